"""AgentV's content parts (``{type: text, value}`` and ``{type: file, value: PATH}`` in a
message's ``content``), made into the text AgentV sends a language model, when the file is
loaded (docs/eval-files.md, "Keys both generations share").

AgentV shows a model a file's text inside ``<file path="PATH">`` tags, with the path as written.
It joins a message's parts with a blank line when the test's input is that one message, each
part trimmed (and trims that message's text), and with a newline when the input has several
messages. evalrun makes each such
message's content that one text, so every target and grader reads what AgentV's model reads. A
file that cannot be read is an error at its key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: A part that cannot be read: the key path it is at, and why.
Problem = tuple[tuple[Any, ...], str]


def join_content_parts(case: dict[str, Any], path: tuple[Any, ...], folder: Path) -> Problem | None:
    """Make the content of every message of the test's ``input`` whose parts are all text or
    files one text, in place; the first file that cannot be read is returned instead (the
    caller raises it at its key). Other parts (images) leave their message as it is."""
    messages = case.get("input")
    if isinstance(messages, str):
        case["input"] = messages.strip()  # one message: AgentV trims it
        return None
    if not isinstance(messages, list):
        return None
    shown = [m for m in messages if isinstance(m, dict) and m.get("content")]
    conversation = any(m.get("role") in ("assistant", "tool") for m in shown)
    alone = len(shown) == 1 and not conversation
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if alone and isinstance(content, str):
            message["content"] = content.strip()
        if not isinstance(content, list) or not all(_is_textual(p) for p in content):
            continue
        texts = []
        for j, part in enumerate(content):
            text = part.get("value", "") if part.get("type") == "text" else None
            if text is None:
                text, problem = _tagged(part, folder)
                if problem is not None:
                    return (*path, "input", i, "content", j), problem
            texts.append(str(text))
        if alone:
            message["content"] = "\n\n".join(t.strip() for t in texts if t.strip())
        else:
            message["content"] = "\n".join(texts)
    return None


def _is_textual(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in ("text", "file")


def _tagged(part: dict[str, Any], folder: Path) -> tuple[str, str | None]:
    """The file as AgentV shows it to a model, or why it cannot be read."""
    name = part.get("value", part.get("path"))
    if not isinstance(name, str) or not name:
        return "", "a file part needs 'value': the file's path"
    try:
        text = (folder / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return "", f"file {name}: {getattr(exc, 'strerror', None) or 'not UTF-8 text'}"
    return f'<file path="{name}">\n{text.strip()}\n</file>', None
