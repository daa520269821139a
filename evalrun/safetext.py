"""Text that crosses a boundary: made encodable where it enters, made printable where it leaves.

Entering (grader output, target and judge replies, eval files): JSON and YAML may spell a lone
UTF-16 surrogate (``\\ud800``), which is a legal escape but no character; no UTF-8 writer can
encode it. :func:`repair` joins valid surrogate pairs and replaces lone ones with U+FFFD, once,
where the text enters, and says how many it replaced so the result can be flagged.

Leaving (terminal, GitHub Actions log, annotations, Markdown): :func:`printable` shows control
characters as escapes and keeps any line from starting a GitHub workflow command. The rules are
in docs/security.md ("Output safe for every consumer").
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")

#: The characters :func:`escape_controls` shows as escapes, as a regex character-class body: C0
#: controls but tab and newline, DEL, C1 controls, line/paragraph separators, bidi controls.
CONTROL_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[{CONTROL_CHARS}]")
#: a workflow command is a line that starts with ``::`` after leading white space (v2), or holds
#: ``##[`` anywhere (v1)
_COMMAND_LINE = re.compile(r"^(\s*)::", re.MULTILINE)
_V1_COMMAND = "##["


def repair(text: str) -> tuple[str, int]:
    """``text`` with surrogate pairs joined and lone surrogates replaced; (text, replaced)."""
    if not _SURROGATE.search(text):
        return text, 0
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, fixed.count(REPLACEMENT) - text.count(REPLACEMENT)


#: the only way a lone surrogate gets into data parsed from valid UTF-8 JSON: a ``\\uD800``-style
#: escape (an escaped backslash before ``u`` matches too, which only costs a full look)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def json_text_may_hold_surrogates(text: str) -> bool:
    """False when the data parsed from this JSON text (valid UTF-8) holds no surrogate, so
    :func:`repair_json` has nothing to do on it."""
    return _SURROGATE_ESCAPE.search(text) is not None


def repair_json(value: Any) -> tuple[Any, int]:
    """:func:`repair` applied to every string (keys too) inside JSON-like data."""
    if isinstance(value, str):
        return repair(value)
    if isinstance(value, list):
        total = 0
        out = []
        for item in value:
            fixed, n = repair_json(item)
            out.append(fixed)
            total += n
        return out, total
    if isinstance(value, dict):
        total = 0
        result = {}
        for key, item in value.items():
            fixed_key, n_key = repair_json(key)
            fixed, n = repair_json(item)
            result[fixed_key] = fixed
            total += n_key + n
        return result, total
    return value, 0


def repaired_note(count: int, where: str) -> str:
    return f"{where} held {count} lone UTF-16 surrogate(s), replaced with U+FFFD"


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    """Control characters as visible escapes (``\\x1b``); newlines too unless ``keep_newlines``."""
    text = _CONTROL.sub(_escape, text.replace("\r\n", "\n"))
    return text if keep_newlines else text.replace("\n", "\\n")


def no_workflow_commands(text: str) -> str:
    """A backslash before any line's leading ``::`` and inside ``##[``, so the GitHub Actions
    runner executes no line of it (in Markdown ``\\:`` still renders as ``:``)."""
    return _COMMAND_LINE.sub(r"\1\\::", text).replace(_V1_COMMAND, "#\\#[")


def printable(text: Any, *, multiline: bool = False) -> str:
    """User text safe to print anywhere: escaped controls, no workflow command. One line unless
    ``multiline``; a consumer that wraps lines itself must print it without wrapping."""
    return no_workflow_commands(escape_controls(str(text), keep_newlines=multiline))
