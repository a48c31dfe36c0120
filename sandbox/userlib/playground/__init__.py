"""Helpers user code can import inside the JAX Playground: ``from playground import ...``."""
