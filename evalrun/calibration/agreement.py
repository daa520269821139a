"""Agreement between a judge and people, item by item (formulas in docs/judges.md).

Two raters (the person who labelled the case, the judge) rated the same items. Nominal scales
(yes/no verdicts) get Cohen's kappa; ordinal scales (a 1..5 rating) get Krippendorff's alpha
with the ordinal distance, which counts a 4 against a 5 as a smaller disagreement than a 1
against a 5.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    n: int
    agreement: float
    #: Cohen's kappa (nominal) or Krippendorff's alpha (ordinal); None where it is undefined
    #: (every rating the same value, so chance agreement is total)
    coefficient: float | None
    coefficient_name: str
    #: human value -> judge value -> count
    confusion: dict[str, dict[str, int]]


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]]) -> float | None:
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(a == b for a, b in pairs) / n
    human = Counter(a for a, _ in pairs)
    judge = Counter(b for _, b in pairs)
    expected = sum(human[c] * judge[c] for c in human) / (n * n)
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def krippendorff_alpha_ordinal(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Two raters, every unit rated by both: coincidences o[c][k] over ordered value pairs."""
    if not pairs:
        return None
    values = sorted({v for pair in pairs for v in pair})
    coincidence: Counter[tuple[float, float]] = Counter()
    for a, b in pairs:
        coincidence[(a, b)] += 1
        coincidence[(b, a)] += 1
    totals = {c: sum(coincidence[(c, k)] for k in values) for c in values}
    n = sum(totals.values())
    if n < 2:
        return None
    rank = {v: i for i, v in enumerate(values)}

    def distance(c: float, k: float) -> float:
        low, high = sorted((rank[c], rank[k]))
        between = sum(totals[values[g]] for g in range(low, high + 1))
        return (between - (totals[c] + totals[k]) / 2) ** 2

    observed = sum(coincidence[(c, k)] * distance(c, k) for c in values for k in values) / n
    expected = sum(totals[c] * totals[k] * distance(c, k) for c in values for k in values) / (
        n * (n - 1)
    )
    if expected == 0:
        return None
    return 1 - observed / expected


def measure(pairs: Sequence[tuple[object, object]], ordinal: bool) -> Agreement:
    confusion: dict[str, dict[str, int]] = {}
    for human, judge in pairs:
        row = confusion.setdefault(_label(human), {})
        row[_label(judge)] = row.get(_label(judge), 0) + 1
    n = len(pairs)
    if ordinal:
        coefficient = krippendorff_alpha_ordinal(pairs)  # type: ignore[arg-type]
        name = "alpha"
    else:
        coefficient = cohen_kappa(pairs)  # type: ignore[arg-type]
        name = "kappa"
    return Agreement(
        n=n,
        agreement=sum(a == b for a, b in pairs) / n if n else 0.0,
        coefficient=coefficient,
        coefficient_name=name,
        confusion=confusion,
    )


def _label(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
