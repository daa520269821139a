"""“Did you mean …?” for names a user typed: targets, keys, scripts, case ids."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(dict.fromkeys(choices)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'mock'?"`` when a choice is close to ``word``, else ``""``."""
    match = closest(word, choices)
    return f"; did you mean '{match}'?" if match and match != word else ""
