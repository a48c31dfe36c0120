"""Helpers user code can import inside the JAX Playground: ``from playground import ...``."""
from playground.display import HTML, display  # noqa: F401
from playground.profiling import profile  # noqa: F401
from playground.sharding import show_sharding  # noqa: F401
from playground.timing import TimingResult, timeit  # noqa: F401
