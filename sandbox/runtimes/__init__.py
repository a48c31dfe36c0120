"""JAX runtimes: the Python environments, one per JAX version, a worker can run programs on.

``pins`` holds the pinning rules (which library versions go with each JAX
line), ``store`` finds the runtimes installed under ``--runtimes-dir`` and
what each offers, ``install`` adds and removes them with pip.
"""
