"""Summary statistics the benchmarks print."""

from __future__ import annotations


def percentile(samples: list[float], q: float) -> float:
    """The sample at quantile ``q`` (nearest rank), e.g. 0.5 for p50, 0.95 for p95."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
