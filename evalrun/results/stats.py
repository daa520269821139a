"""Small numeric helpers shared by the summary, the reporters and ``evalrun compare``.

Stdlib only and order-independent where it matters (``math.fsum``), so a merged shard bundle
sums to exactly the same means as an unsharded run.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def stdev(values: Sequence[float]) -> float | None:
    """Population standard deviation: the spread of the runs we observed (0 for one run)."""
    if not values:
        return None
    if min(values) == max(values):
        return 0.0
    centre = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / len(values))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` attempts with ``c`` passes: ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_ks(n: int, c: int) -> list[float]:
    """pass@1 .. pass@n."""
    return [pass_at_k(n, c, k) for k in range(1, n + 1)]


def bootstrap_mean_ci(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int | None = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean of ``values`` (paired deltas, for compare).

    Deterministic for a given seed: resampling uses its own ``random.Random``.
    """
    if not values:
        raise ValueError("bootstrap needs at least one value")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    if resamples < 1:
        raise ValueError("resamples must be positive")
    data = list(values)
    n = len(data)
    if min(data) == max(data):
        return data[0], data[0]
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(data, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - confidence) / 2.0
    low = means[min(resamples - 1, max(0, math.floor(alpha * resamples)))]
    high = means[min(resamples - 1, max(0, math.ceil((1.0 - alpha) * resamples) - 1))]
    return low, high
