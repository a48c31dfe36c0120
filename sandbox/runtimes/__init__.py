"""JAX runtimes: the Python environments, one per JAX version, a worker can run programs on.

``pins`` holds the pinning rules (which library versions go with each JAX
line), ``pythons`` finds the Pythons a runtime's environment can be made from
(JAX 0.11 and newer need 3.12 or newer), ``install`` adds and removes runtimes
with pip, ``store`` finds the runtimes installed under ``--runtimes-dir`` and
what each offers, and ``launch`` starts this project's sandbox code under a
runtime's Python (``bootstrap``), whichever version it is.
"""
