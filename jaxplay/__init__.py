"""JAX Playground: the settings and wire protocols shared by server and worker, and the version.

The ``jaxplay`` command itself lives in ``jaxplay_cli``, above server/ and sandbox/.
"""

__version__ = "0.1.0"
