"""Which cases a run grades: --filter globs, a stable --shard slice, --limit, and what --resume
skips."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Iterator, Sized
from dataclasses import dataclass, field
from itertools import islice

from evalrun.results.matrix import column_name
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


@dataclass
class Selection:
    """Which case ids a run grades: --filter globs, a --shard slice, only some ids."""

    filters: list[str] = field(default_factory=list)
    shard: tuple[int, int] | None = None
    only_ids: set[str] | None = None

    def __call__(self, case_id: str) -> bool:
        if self.filters and not any(fnmatch.fnmatchcase(case_id, f) for f in self.filters):
            return False
        if self.shard is not None and shard_of(case_id, self.shard[1]) != self.shard[0]:
            return False
        return self.only_ids is None or case_id in self.only_ids


class SelectedCases:
    """The selected cases of a source, iterated afresh each time (a streaming source stays
    streaming); counted once up front. ``limit`` keeps the first N of them (docs/results.md,
    "Which cases run")."""

    def __init__(
        self, source: Iterable[TestCase], selection: Selection, limit: int | None = None
    ) -> None:
        self.source = source
        self.selection = selection
        self.limit = limit
        if selection == Selection() and isinstance(source, Sized):
            self.count = len(source) if limit is None else min(len(source), limit)
        else:
            self.count = sum(1 for _ in self)

    def __iter__(self) -> Iterator[TestCase]:
        selected = (case for case in self.source if self.selection(case.id))
        return selected if self.limit is None else islice(selected, self.limit)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0


def select_cases(
    cases: Iterable[TestCase],
    *,
    filters: list[str],
    shard: tuple[int, int] | None,
    only_ids: set[str] | None = None,
    limit: int | None = None,
) -> SelectedCases:
    return SelectedCases(cases, Selection(filters, shard, only_ids), limit)


def finished_keys(
    previous: Iterable[CaseResult], *, by_target: bool = True
) -> set[tuple[str, str, int]]:
    """(case id, column, repeat) cells a resumed run need not grade again (the column is the
    target and the prompt variant, docs/results.md); errors are retried. Not ``by_target``
    (a run of one target): a line counts whatever target it names."""
    return {
        (c.id, column_name(c.target if by_target else None, c.prompt), c.repeat)
        for c in previous
        if c.status != "error"
    }


def failed_ids(previous: Iterable[CaseResult]) -> set[str]:
    return {c.id for c in previous if c.status in ("failed", "error")}
