"""AgentV's content parts (``{type: text, value}`` and ``{type: file, value: PATH}`` in a
message's ``content``), made into the text AgentV sends a language model, when the file is
loaded (docs/eval-files.md, "Keys both generations share").

AgentV shows a model a file's text inside ``<file path="PATH">`` tags, with the path as written.
It joins a message's parts with a blank line when the test's input is that one message, each
part trimmed (and trims that message's text), and with a newline when the input has several
messages. evalrun makes each such message's content that one text, so every target and grader
reads what AgentV's model reads. A file it cannot read (AgentV also looks in its repository's
root) leaves its message as written. A file read from the working folder outside the eval
file's repository is said as a warning: it depends on where the run was started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalrun.spec.agentv import Notes


def join_content_parts(
    case: dict[str, Any], folder: Path, notes: Notes, at: tuple[Any, ...] = ()
) -> None:
    """Make the content of every message of the test's ``input`` whose parts are all text or
    readable files one text, in place. A message with other parts (images) or with a file
    that cannot be read here is left as it is. ``notes`` gets a warning, at the part's key
    under ``at`` (the test's), for each file a joined message read from outside the eval
    file's repository."""
    messages = case.get("input")
    if isinstance(messages, str):
        case["input"] = messages.strip()  # one message: AgentV trims it
        return
    if not isinstance(messages, list):
        return
    shown = [m for m in messages if isinstance(m, dict) and m.get("content")]
    conversation = any(m.get("role") in ("assistant", "tool") for m in shown)
    alone = len(shown) == 1 and not conversation
    roots = search_roots(folder)
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if alone and isinstance(content, str):
            message["content"] = content.strip()
        if not isinstance(content, list) or not all(_is_textual(p) for p in content):
            continue
        parts = [_shown(part, roots) for part in content]
        texts = [part[0] for part in parts if part is not None]
        if len(texts) < len(parts):
            continue  # a file not found (AgentV looks in more places): left as it was
        for p, part in enumerate(parts):
            if part is not None and part[1] is not None:
                notes.append(((*at, "input", m, "content", p), part[1]))
        if alone:
            message["content"] = "\n\n".join(t.strip() for t in texts if t.strip())
        else:
            message["content"] = "\n".join(texts)


def _is_textual(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in ("text", "file")


def _shown(part: dict[str, Any], roots: list[Path]) -> tuple[str, str | None] | None:
    """The part as AgentV shows it to a model, and a warning when its file was read from the
    working folder outside the eval file's repository; None for a file that cannot be read."""
    if part.get("type") == "text":
        return str(part.get("value", "")), None
    name = part.get("value", part.get("path"))
    if not isinstance(name, str) or not name:
        return None
    for base in roots:
        path = base / name.lstrip("/\\")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        shown = f'<file path="{name}">\n{text.strip()}\n</file>'
        top = roots[-2]  # the repository's root (else the eval file's folder)
        if base != roots[-1] or path.resolve().is_relative_to(top):
            return shown, None
        return shown, (
            f"file part {name} was read from the working folder ({base}), outside the eval "
            f"file's repository ({top}): AgentV looks there last, so a run started from "
            "another folder reads another file or none"
        )
    return None


def search_roots(folder: Path) -> list[Path]:
    """Where AgentV looks for a file part's path, in order: the eval file's folder and each
    folder above it up to the repository's root (the nearest folder with ``.git``), then the
    working folder, always last (docs/eval-files.md, "AgentV files"). Without a repository
    above, only the eval file's folder and the working folder."""
    folder = folder.resolve()
    chain = [folder, *folder.parents]
    top = next((i for i, d in enumerate(chain) if (d / ".git").exists()), None)
    roots = chain[: top + 1] if top is not None else [folder]
    return [*roots, Path.cwd()]
