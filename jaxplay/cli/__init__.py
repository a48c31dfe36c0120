"""The ``jaxplay`` command: starts the server (jaxplay.server) and the worker (jaxplay.sandbox).

It sits above both; ``jaxplay`` itself holds only the settings and the
protocols they share, so neither side imports the other through it.
"""
