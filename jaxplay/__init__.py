"""JAX Playground: the settings, CLI and wire protocols shared by server and worker."""

__version__ = "0.1.0"
