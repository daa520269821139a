"""Number and text formatting shared by the text reporters."""

from __future__ import annotations

STATUS_ICONS = {"passed": "✅", "failed": "❌", "error": "⚠️", "unscored": "➖"}


def score(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


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
