"""Pieces shared by the judge graders (quality, pattern, prompt quality).

Mostly pure functions (bundled YAML definitions, prompt templates, medians, de-duplication,
truncation), testable without a judge. Replies are read by ``grader_sdk.replies`` only; every
judge call goes through ``send_batch``, so the budget message and the handling of cut-off
replies are the same for every grader.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from grader_sdk import (
    Abstain,
    BudgetExceeded,
    ProxyNotConfigured,
    Reading,
    TargetClient,
    judge_replies,
    message_text,
)

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
    """Median; with an even count, the mean of the two middle values. (Not ``statistics``: its
    import, with ``fractions`` and ``decimal``, costs each grader start a few ms.)"""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def config_number(value: Any) -> float | None:
    """A finite number from an eval file's config (not a judge reply): 4, 4.0, "4"."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def json_schema_format(name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """A strict JSON Schema response format for one judge task (docs/judge-graders.md)."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "strict": True,
            "schema": strict_object(properties),
        },
    }


def strict_object(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def lookup(mapping: Mapping[Any, Any], key: str) -> Any:
    """``mapping[key]``, else the first entry whose key matches ignoring case; None if none."""
    if key in mapping:
        return mapping[key]
    folded = key.casefold()
    return next(
        (v for k, v in mapping.items() if isinstance(k, str) and k.casefold() == folded), None
    )


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
    number = config_number(value)
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


#: max_tokens of a judge call; a reply cut off there is asked again with more room.
MAX_TOKENS = 4096


def send_batch(
    client: Any,
    requests: list[dict[str, Any]],
    max_calls: int | None,
    read: Callable[[str], Reading] | Sequence[Callable[[str], Reading]],
) -> list[Reading]:
    """All judge calls in one batch, after checking they fit the budget (so none are wasted),
    each reply read with ``read``. Cut-off replies are asked again with more room while the
    budget lasts; they are never read."""
    check_budget(len(requests), max_calls)
    try:
        return judge_replies(client, requests, read, retry=False)
    except BudgetExceeded as exc:
        raise BudgetTooSmall(
            f"the judge budget is used up ({exc}); {_hint(len(requests))}"
        ) from None


def judge_runs(
    client: Any,
    request: dict[str, Any],
    *,
    runs: int,
    max_calls: int | None,
    read: Callable[[str], Reading],
) -> tuple[list[Reading], list[str]]:
    """The same request ``runs`` times in one batch: (readings that worked, why each other run
    is unusable). When no run can be read, the grader abstains with the reasons."""
    readings = send_batch(client, [dict(request) for _ in range(runs)], max_calls, read)
    parsed = [r for r in readings if r.ok]
    unparsed = [f"run {i}: {r.explain()}" for i, r in enumerate(readings, 1) if not r.ok]
    if not parsed:
        raise Abstain(f"no judge reply could be read ({runs} runs): " + "; ".join(unparsed))
    return parsed, unparsed


def judge_client() -> TargetClient:
    """The proxy client from the environment; a grader given no ``target:`` abstains."""
    try:
        return TargetClient.from_env()
    except ProxyNotConfigured as exc:
        raise Abstain(str(exc)) from None
