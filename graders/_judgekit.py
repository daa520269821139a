"""Pieces shared by the judge graders (quality, pattern, prompt quality).

Mostly pure functions (bundled YAML definitions, prompt templates, medians, lenient number
and reply reading, de-duplication, truncation), testable without a judge; every judge call goes
through ``send_batch``, so the budget message is the same for every grader.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from grader_sdk import (
    Abstain,
    BudgetExceeded,
    ProxyNotConfigured,
    TargetClient,
    message_text,
    parse_json_reply,
)

R = TypeVar("R")

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


def fraction(value: float) -> float:
    """A 0..1 share; percentages (1 < x <= 100) are read as percent."""
    if 1.0 < value <= 100.0:
        value /= 100.0
    return clamp(value, 0.0, 1.0)


def lookup(mapping: Mapping[Any, Any], key: str) -> Any:
    """``mapping[key]``, else the first entry whose key matches ignoring case; None if none."""
    if key in mapping:
        return mapping[key]
    folded = key.casefold()
    return next(
        (v for k, v in mapping.items() if isinstance(k, str) and k.casefold() == folded), None
    )


def reply_object(text: str) -> Mapping[str, Any] | None:
    """The JSON object in a judge reply (a one-item list counts), or None."""
    data = parse_json_reply(text)
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    return data if isinstance(data, Mapping) else None


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


def conversation_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """A conversation as text: one message as its content, several as ``[role]`` blocks."""
    items = [m for m in messages if message_text(m).strip()]
    if len(items) == 1:
        return message_text(items[0])
    return "\n\n".join(f"[{m.get('role', 'user')}]\n{message_text(m)}" for m in items)


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
    check_budget(len(requests), max_calls)
    try:
        return list(client.invoke_batch(requests))
    except BudgetExceeded as exc:
        raise BudgetTooSmall(
            f"the judge budget is used up ({exc}); {_hint(len(requests))}"
        ) from None


def judge_runs(
    client: Any,
    question: str,
    system_prompt: str,
    *,
    runs: int,
    temperature: float,
    max_calls: int | None,
    parse: Callable[[str], R | str],
) -> tuple[list[R], list[str]]:
    """The same prompt ``runs`` times in one batch: (parsed runs, why each other run is unusable).

    ``parse`` returns a run or a short explanation; when no run parses, the grader abstains.
    """
    request = {"question": question, "system_prompt": system_prompt, "temperature": temperature}
    replies = send_batch(client, [dict(request) for _ in range(runs)], max_calls)
    parsed: list[R] = []
    unparsed: list[str] = []
    for index, reply in enumerate(replies, start=1):
        run = parse(reply.raw_text)
        if isinstance(run, str):
            unparsed.append(f"run {index}: {run}: {shorten(reply.raw_text, 160)!r}")
        else:
            parsed.append(run)
    if not parsed:
        raise Abstain(f"no judge reply could be parsed ({runs} runs): " + "; ".join(unparsed))
    return parsed, unparsed


def judge_client() -> TargetClient:
    """The proxy client from the environment; a grader given no ``target:`` abstains."""
    try:
        return TargetClient.from_env()
    except ProxyNotConfigured as exc:
        raise Abstain(str(exc)) from None
