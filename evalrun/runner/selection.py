"""Which cases a run grades: --filter globs, a stable --shard slice, and what --resume skips."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable

from evalrun.results.models import CaseResult
from evalrun.spec.models import TestCase


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); shards count from 1."""
    try:
        index, total = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 1/4), got {text!r}") from None
    if total < 1 or not 1 <= index <= total:
        raise ValueError(f"--shard {text}: need 1 <= i <= n")
    return index, total


def shard_of(case_id: str, total: int) -> int:
    digest = hashlib.sha256(case_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def select_cases(
    cases: Iterable[TestCase],
    *,
    filters: list[str],
    shard: tuple[int, int] | None,
    only_ids: set[str] | None = None,
) -> list[TestCase]:
    out = []
    for case in cases:
        if filters and not any(fnmatch.fnmatchcase(case.id, f) for f in filters):
            continue
        if shard is not None and shard_of(case.id, shard[1]) != shard[0]:
            continue
        if only_ids is not None and case.id not in only_ids:
            continue
        out.append(case)
    return out


def finished_keys(previous: Iterable[CaseResult]) -> set[tuple[str, int]]:
    """(case id, repeat) pairs a resumed run need not grade again; errors are retried."""
    return {(c.id, c.repeat) for c in previous if c.status != "error"}


def failed_ids(previous: Iterable[CaseResult]) -> set[str]:
    return {c.id for c in previous if c.status in ("failed", "error")}
