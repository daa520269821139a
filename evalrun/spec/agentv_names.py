"""The name AgentV gives an assertion that has no ``metric``, so an AgentV file's results name
each grader as AgentV's do (docs/eval-files.md, "Grader names").
"""

from __future__ import annotations

from typing import Any

#: kinds named after their text value, and after the length of their list value
_BY_TEXT = ("contains", "icontains", "starts-with", "ends-with", "equals")
_BY_COUNT = ("contains-any", "contains-all", "icontains-any", "icontains-all")
_SKILLS = ("skill-used", "not-skill-used")
#: AgentV keeps this many characters of a regex in the name
_REGEX_CHARS = 30


def assertion_name(kind: str, value: Any) -> str:
    """AgentV's name for an unnamed assertion of ``kind`` with ``value`` (as written)."""
    text = value if isinstance(value, str) else None
    if kind in _SKILLS:
        if text and text.strip():
            return f"{kind}-{text.strip()}"
        return f"{kind}-{len(value)}" if isinstance(value, list) else kind
    if kind in _BY_TEXT:
        return f"{kind}-{text}" if text else kind
    if kind in _BY_COUNT:
        return f"{kind}-{len(value)}" if isinstance(value, list) else kind
    if kind == "regex":
        return f"regex-{text[:_REGEX_CHARS]}" if text else kind
    return kind
