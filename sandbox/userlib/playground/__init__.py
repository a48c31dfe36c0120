"""Helpers user code can import inside the JAX Playground: ``from playground import ...``."""
from playground.sharding import show_sharding  # noqa: F401  (issue 4)
