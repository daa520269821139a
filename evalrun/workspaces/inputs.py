"""The files a case gives an agent (docs/agents.md, "Input files"): AgentV's ``type: file``
content parts and the test's ``input_files``. A ``cli`` agent reads each file part as
``<file: path="ABSOLUTE">`` where it stands in the prompt (AgentV's agent-mode rendering) and
gets every file in ``{files}``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalrun.errors import EvalrunError
from evalrun.spec.models import Message, TestCase


class MissingInputFile(EvalrunError):
    """A file part names a file that is not there."""


def _file_part(part: Any) -> str | None:
    """The path of a ``{type: file, value|path: ...}`` part, else None."""
    if isinstance(part, dict) and part.get("type") == "file":
        for key in ("value", "path"):
            if isinstance(part.get(key), str):
                return str(part[key])
    return None


def _resolved(name: str, eval_dir: Path) -> Path:
    path = (eval_dir / name.removeprefix("file://")).resolve()
    if not path.is_file():
        raise MissingInputFile(f"input file part {name}: no such file ({path})")
    return path


def agent_text(message: Message, eval_dir: Path) -> str:
    """The message as a ``cli`` agent reads it: text parts, and file parts as references."""
    if not isinstance(message.content, list):
        return message.text()
    parts = []
    for part in message.content:
        name = _file_part(part)
        if name is not None:
            parts.append(f'<file: path="{_resolved(name, eval_dir)}">')
        else:
            text = Message(role=message.role, content=[part]).text()
            if text:
                parts.append(text)
    return "\n".join(parts)


def input_files(case: TestCase, eval_dir: Path) -> list[Path]:
    """Every file part of the input, then the test's ``input_files``, once each."""
    found = [
        _resolved(name, eval_dir)
        for message in case.input_messages
        if isinstance(message.content, list)
        for name in map(_file_part, message.content)
        if name is not None
    ]
    found += [Path(f) for f in case.input_files]
    return list(dict.fromkeys(found))
