"""Small numeric helpers shared by the summary, the reporters and ``evalrun compare``.

Stdlib only and order-independent where it matters (``math.fsum``), so a merged shard bundle
sums to exactly the same means as an unsharded run.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Sequence


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
    return percentile_interval(means, confidence)


def percentile_interval(ordered: Sequence[float], confidence: float) -> tuple[float, float]:
    """The ``(1-confidence)/2`` and ``(1+confidence)/2`` quantiles of sorted resample means."""
    count = len(ordered)
    alpha = (1.0 - confidence) / 2.0
    low = ordered[min(count - 1, max(0, math.floor(alpha * count)))]
    high = ordered[min(count - 1, max(0, math.ceil((1.0 - alpha) * count) - 1))]
    return low, high


#: z for a two-sided 95% interval: the normal distribution's 0.975 quantile.
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion (docs/results.md#intervals); None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    scale = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / scale
    half = z / scale * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


#: The single-run score interval's resamples and seed (docs/results.md#intervals).
RUN_RESAMPLES = 1_000
RUN_SEED = 0
#: Scores are counted in cells this wide for the run's bootstrap.
CELL_WIDTH = 0.01
#: Cell sums are kept as integers in units of 2**-60, so they do not depend on the order of
#: the scores (a merged bundle gives the interval of the same run unsharded).
_UNIT = 1 << 60


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One Binomial(n, p) draw: Devroye's geometric method when n*p < 10, else Hörmann's
    transformed rejection with squeeze (BTRS); both exact."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        log_q = math.log1p(-p)
        successes = position = 0
        while True:  # jump over the failures between successes, a geometric gap at a time
            position += math.floor(math.log(1.0 - rng.random()) / log_q) + 1
            if position > n:
                return successes
            successes += 1
    spread = math.sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spread
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spread
    log_odds = math.log(p / (1.0 - p))
    mode = math.floor((n + 1) * p)
    h = math.lgamma(mode + 1) + math.lgamma(n - mode + 1)
    while True:
        u = rng.random() - 0.5
        v = rng.random()
        us = 0.5 - abs(u)
        k = math.floor((2.0 * a / us + b) * u + c) if us > 0 else -1
        if not 0 <= k <= n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v *= alpha / (a / (us * us) + b)
        log_pk = h - math.lgamma(k + 1) - math.lgamma(n - k + 1) + (k - mode) * log_odds
        if math.log(v) <= log_pk:
            return k


def run_mean_ci(
    scores: Iterable[float],
    *,
    confidence: float = 0.95,
    resamples: int = RUN_RESAMPLES,
    seed: int = RUN_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval for the mean score of a run (docs/results.md#intervals).

    Scores are counted in cells of ``CELL_WIDTH``, each standing for the mean of its scores,
    and a resample draws how many of the n results fall in each cell (a multinomial, as a
    chain of binomials): the cost is per occupied cell, not per result, and nothing is held
    per result. None when there are no scores.
    """
    counts: dict[int, int] = {}
    sums: dict[int, int] = {}
    for score in scores:
        cell = round(score / CELL_WIDTH)
        counts[cell] = counts.get(cell, 0) + 1
        sums[cell] = sums.get(cell, 0) + int(score * _UNIT)
    n = sum(counts.values())
    if not n:
        return None
    cells = sorted(counts, key=lambda cell: (-counts[cell], cell))  # the largest first
    sizes = [counts[cell] for cell in cells]
    values = [sums[cell] / _UNIT / counts[cell] for cell in cells]
    if len(cells) == 1:
        return values[0], values[0]
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        left, rest, total = n, n, 0.0
        for size, value in zip(sizes[:-1], values[:-1], strict=True):
            drawn = binomial(rng, left, size / rest)
            total += drawn * value
            left -= drawn
            rest -= size
        means.append((total + left * values[-1]) / n)
    means.sort()
    return percentile_interval(means, confidence)
