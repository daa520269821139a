"""AgentV's content parts (``{type: text, value}`` and ``{type: file, value: PATH}`` in a
message's ``content``), made into the text AgentV sends a language model, when the file is
loaded (docs/eval-files.md, "Keys both generations share").

AgentV shows a model a file's text inside ``<file path="PATH">`` tags, with the path as written.
It joins a message's parts with a blank line when the test's input is that one message, each
part trimmed (and trims that message's text), and with a newline when the input has several
messages. evalrun makes each such message's content that one text, so every target and grader
reads what AgentV's model reads. A file it cannot read (AgentV also looks in its repository's
root) leaves its message as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def join_content_parts(case: dict[str, Any], folder: Path) -> None:
    """Make the content of every message of the test's ``input`` whose parts are all text or
    readable files one text, in place. A message with other parts (images) or with a file
    that cannot be read here is left as it is."""
    messages = case.get("input")
    if isinstance(messages, str):
        case["input"] = messages.strip()  # one message: AgentV trims it
        return
    if not isinstance(messages, list):
        return
    shown = [m for m in messages if isinstance(m, dict) and m.get("content")]
    conversation = any(m.get("role") in ("assistant", "tool") for m in shown)
    alone = len(shown) == 1 and not conversation
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if alone and isinstance(content, str):
            message["content"] = content.strip()
        if not isinstance(content, list) or not all(_is_textual(p) for p in content):
            continue
        parts = [_shown(part, folder) for part in content]
        texts = [text for text in parts if text is not None]
        if len(texts) < len(parts):
            continue  # a file not found (AgentV looks in more places): left as it was
        if alone:
            message["content"] = "\n\n".join(t.strip() for t in texts if t.strip())
        else:
            message["content"] = "\n".join(texts)


def _is_textual(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in ("text", "file")


def _shown(part: dict[str, Any], folder: Path) -> str | None:
    """The part as AgentV shows it to a model; None for a file that cannot be read."""
    if part.get("type") == "text":
        return str(part.get("value", ""))
    name = part.get("value", part.get("path"))
    if not isinstance(name, str) or not name:
        return None
    for base in search_roots(folder):
        try:
            text = (base / name.lstrip("/\\")).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        return f'<file path="{name}">\n{text.strip()}\n</file>'
    return None


def search_roots(folder: Path) -> list[Path]:
    """Where AgentV looks for a file part's path, in order: the eval file's folder and each
    folder above it up to the repository's root (the nearest folder with ``.git``), then the
    working folder (docs/eval-files.md, "AgentV files"). Without a repository above, only the
    eval file's folder and the working folder."""
    folder = folder.resolve()
    chain = [folder, *folder.parents]
    top = next((i for i, d in enumerate(chain) if (d / ".git").exists()), None)
    roots = chain[: top + 1] if top is not None else [folder]
    return list(dict.fromkeys([*roots, Path.cwd()]))
