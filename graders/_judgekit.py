"""Pieces shared by the judge graders (quality, pattern, prompt quality).

Mostly pure functions (bundled YAML definitions, prompt templates, medians, lenient number
reading, de-duplication, truncation), testable without a judge; ``send_batch`` is the one place
that talks to the proxy, so the budget message is the same for every grader.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from grader_sdk import Abstain

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def load_definition(name: str, path: str | Path | None = None) -> dict[str, Any]:
    """A judge definition YAML: ``path`` if given, else the bundled ``rubrics/<name>.yaml``."""
    import yaml

    if path is None:
        from rubrics import bundled

        path = bundled(name)
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping")
    return data


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{{name}}`` placeholders in one pass, so braces inside values are never expanded."""
    return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), "")), template)


def median(values: Sequence[float]) -> float:
    """Median; with an even count, the mean of the two middle values."""
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def as_number(value: Any) -> float | None:
    """A finite number from a judge's JSON value: 4, 4.0, "4", "4/5", "8 out of 10"."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(
            r"\s*(-?\d+(?:\.\d+)?)\s*(?:(?:/|out\s+of)\s*\d+(?:\.\d+)?)?\s*", value
        )
        if not match:
            return None
        number = float(match.group(1))
    elif isinstance(value, Mapping):
        for key in ("score", "value", "rating"):
            if key in value:
                return as_number(value[key])
        return None
    else:
        return None
    return number if math.isfinite(number) else None


def clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def dedupe(items: Iterable[Any], limit: int | None = None) -> list[str]:
    """Distinct non-empty strings in first-seen order (case and spacing ignored), at most limit."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        text = item.strip()
        key = " ".join(text.lower().split())
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(text)
        if limit is not None and len(out) >= limit:
            break
    return out


TRUNCATION_MARKER = "\n\n[... {omitted} characters omitted ...]\n\n"


def truncate_middle(text: str, limit: int = 18_000, head: int = 16_000, tail: int = 1_000) -> str:
    """Texts longer than ``limit`` keep their first ``head`` and last ``tail`` characters."""
    if len(text) <= limit:
        return text
    omitted = len(text) - head - tail
    return text[:head] + TRUNCATION_MARKER.format(omitted=omitted) + text[-tail:]


def message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        return "" if message is None else str(message)
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text", "") for p in content if p]
        return "\n".join(p for p in parts if isinstance(p, str))
    return json.dumps(content, ensure_ascii=False)


def conversation_text(messages: Any) -> str:
    """A conversation as text: one message as its content, several as ``[role]`` blocks."""
    if messages is None:
        return ""
    if isinstance(messages, str):
        return messages
    if isinstance(messages, Mapping):
        messages = [messages]
    items = [m for m in messages if message_text(m).strip()]
    if len(items) == 1:
        return message_text(items[0])
    blocks = []
    for m in items:
        role = m.get("role", "user") if isinstance(m, Mapping) else "user"
        blocks.append(f"[{role}]\n{message_text(m)}")
    return "\n\n".join(blocks)


def passage_text(passage: Any) -> str:
    if isinstance(passage, str):
        return passage
    if isinstance(passage, Mapping):
        for key in ("content", "text", "page_content", "passage"):
            if isinstance(passage.get(key), str):
                return passage[key]
    return json.dumps(passage, ensure_ascii=False)


def numbered(passages: Sequence[Any]) -> str:
    return "\n".join(f"[{i}] {passage_text(p)}" for i, p in enumerate(passages, start=1))


def shorten(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def runs_setting(config: Mapping[str, Any], default: int) -> int:
    runs = config.get("runs", default)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"config.runs must be a positive integer, got {runs!r}")
    return runs


def temperature_setting(config: Mapping[str, Any], runs: int) -> float:
    """Repeated runs need sampling to differ (and temperature 0 answers are cached)."""
    value = config.get("temperature")
    if value is None:
        return 0.0 if runs == 1 else 0.7
    number = as_number(value)
    if number is None or number < 0:
        raise ValueError(f"config.temperature must be a number >= 0, got {value!r}")
    return number


class BudgetTooSmall(Abstain):
    """The grader's ``max_calls`` cannot cover the calls it needs: it abstains (exit 3), as the
    RAG graders do, and says which budget to set."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)


def _hint(needed: int) -> str:
    return f"set `target: {{max_calls: {needed}}}` (or more) on this grader"


def check_budget(needed: int, max_calls: int | None) -> None:
    """Fail before any call is spent when the budget cannot cover the calls needed."""
    if max_calls is not None and needed > max_calls:
        raise BudgetTooSmall(
            f"needs {needed} judge calls but max_calls is {max_calls}; {_hint(needed)}"
        )


def send_batch(client: Any, requests: list[dict[str, Any]], max_calls: int | None) -> list[Any]:
    """All judge calls in one batch, after checking they fit the budget (so none are wasted)."""
    from grader_sdk import BudgetExceeded

    check_budget(len(requests), max_calls)
    try:
        return list(client.invoke_batch(requests))
    except BudgetExceeded as exc:
        raise BudgetTooSmall(
            f"the judge budget is used up ({exc}); {_hint(len(requests))}"
        ) from None
