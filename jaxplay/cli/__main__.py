"""``python -m jaxplay.cli``: how the server starts its local workers with its own interpreter."""

from jaxplay.cli.commands import main

main()
