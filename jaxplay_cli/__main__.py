"""``python -m jaxplay_cli``: how the server starts its local workers with its own interpreter."""

from jaxplay_cli.commands import main

main()
