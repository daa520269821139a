"""Per-attempt timeouts derived from the latency a target shows (docs/targets.md, "Tails").

A call that hangs holds its case until the target's ``timeout`` (60 s by default) although the
same request, sent again, would answer in a second. Once ``MIN_SAMPLES`` attempts have answered,
an attempt that takes longer than ``FACTOR`` times the p99 of the recent answers (within
``FLOOR_S`` and the target's ``timeout``) is cut and retried. A ``timeout`` set in targets.yaml
is the user's choice and is kept fixed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: answered attempts needed before a timeout is derived
MIN_SAMPLES = 50
#: how many times the p99 latency an attempt may take
FACTOR = 3.0
#: the shortest derived timeout: a slow but healthy answer is not cut below this
FLOOR_S = 1.0
#: recent answers the p99 is taken over
WINDOW = 1000
#: the p99 is computed again after this many new answers, not on every call
REFRESH = 16


@dataclass
class AttemptTimeouts:
    ceiling_s: float
    #: False when the target's ``timeout`` was set: it stays fixed
    derive: bool = True
    cut: int = 0
    _latencies: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    _fresh: int = 0
    _ordered: list[float] = field(default_factory=list)

    def observe(self, seconds: float) -> None:
        """An attempt answered after ``seconds``."""
        self._latencies.append(seconds)
        self._fresh += 1
        if len(self._latencies) >= MIN_SAMPLES and (not self._ordered or self._fresh >= REFRESH):
            self._ordered = sorted(self._latencies)
            self._fresh = 0

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile of the recent answers' latency, once there are enough of them."""
        if not self._ordered:
            return None
        return self._ordered[min(len(self._ordered) - 1, math.ceil(q * len(self._ordered)) - 1)]

    def current(self) -> float | None:
        """The derived per-attempt timeout, or None (the target's own ``timeout`` applies)."""
        p99 = self.quantile(0.99)
        if not self.derive or p99 is None:
            return None
        return min(self.ceiling_s, max(FLOOR_S, p99 * FACTOR))

    def stats(self) -> dict[str, Any]:
        """What the run summary records per target."""
        timeout, p99 = self.current(), self.quantile(0.99)
        return {
            "attempt_timeout_s": None if timeout is None else round(timeout, 3),
            "latency_p99_ms": None if p99 is None else round(p99 * 1000, 1),
            "attempt_timeouts": self.cut,
        }
