"""Number and text formatting shared by the text reporters."""

from __future__ import annotations

import math
from collections.abc import Callable
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any

STATUS_ICONS = {"passed": "✅", "failed": "❌", "error": "⚠️", "unscored": "➖"}


def score(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def bounds(ci: tuple[float, float], show: Callable[[float], str]) -> str:
    """``[0.333, 1.000]``: a 95% interval (docs/results.md#intervals)."""
    return f"[{show(ci[0])}, {show(ci[1])}]"


def interval(text: str, ci: tuple[float, float] | None, show: Callable[[float], str]) -> str:
    """``0.722 [0.333, 1.000]``: a value and its interval, or the value alone."""
    return text if ci is None else f"{text} {bounds(ci, show)}"


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 60:
        return f"{value:.2f} s"
    minutes, secs = divmod(value, 60)
    return f"{int(minutes)} min {secs:.0f} s"


def clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def pretty_json(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False, default=str)``, ~3x faster
    (with an indent the standard library uses its pure-Python encoder; a report shows a block
    like this for every judge call). A key that is not a JSON scalar is written as ``str(key)``
    where ``json.dumps`` would raise."""
    out: list[str] = []
    _pretty(value, "\n", out)
    return "".join(out)


def _pretty(value: Any, newline: str, out: list[str]) -> None:
    """``newline``: a line break and the indent of the line ``value`` starts on."""
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif (scalar := _scalar(value)) is not None:
        out.append(scalar)
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        lead = "{" + inner
        for key, item in value.items():
            name = key if isinstance(key, str) else _scalar(key) or str(key)
            out.append(lead + encode_basestring(name) + ": ")
            _pretty(item, inner, out)
            lead = "," + inner
        out.append(newline + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        lead = "[" + inner
        for item in value:
            out.append(lead)
            _pretty(item, inner, out)
            lead = "," + inner
        out.append(newline + "]")
    else:
        out.append(encode_basestring(str(value)))


def _scalar(value: Any) -> str | None:
    """JSON's text for None, a bool or a number (a key of one, too); None for anything else."""
    if value is None or value is True or value is False:
        return "null" if value is None else "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float.__repr__(value)
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    return None
