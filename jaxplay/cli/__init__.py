"""The ``jaxplay`` command: starts the server (server/) and the worker (sandbox/).

It sits above both, apart from the ``jaxplay`` package that holds the settings
and the protocols they share, so neither side imports the other through it.
"""
