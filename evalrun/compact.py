"""Sorting and duplicate checks over compact arrays of numbers, for code that must not hold a
Python object per case (docs/performance.md): sorting a whole array at once would hold an int
object per value, about five times the array's own memory."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator

#: Values sorted at a time; the merge then holds one copy of the array, in chunks.
CHUNK = 1 << 14


def merge_sorted(values: array[int]) -> Iterator[int]:
    """``values`` in ascending order, sorted a chunk at a time and merged lazily."""
    chunks = [
        array(values.typecode, sorted(values[i : i + CHUNK])) for i in range(0, len(values), CHUNK)
    ]
    return heapq.merge(*chunks)


def repeated(values: array[int]) -> set[int]:
    """The values that occur more than once."""
    out: set[int] = set()
    previous = None
    for value in merge_sorted(values):
        if value == previous:
            out.add(value)
        previous = value
    return out
