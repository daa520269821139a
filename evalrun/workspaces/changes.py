"""What an agent changed in its workspace: the files there and a unified diff against the
workspace as the agent got it (docs/agents.md, "What graders get from a workspace").

The diff is git's format (``diff --git a/P b/P``, ``--- /dev/null`` for a new file,
``+++ /dev/null`` for a deleted one), the one AgentV's ``file_changes`` holds, so graders
written for AgentV read it unchanged. It is made in Python from two snapshots: no git needed.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

#: folders never listed nor diffed (version-control data, caches, dependencies)
SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})
#: a file larger than this is listed, and diffed as "changed" without its lines
MAX_DIFF_BYTES = 512 * 1024

#: relative path (``/``-separated) -> content
Snapshot = dict[str, bytes]


def snapshot(root: Path) -> Snapshot:
    """Every regular file below ``root`` (links are not followed), ``SKIPPED_DIRS`` left out."""
    files: Snapshot = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            try:
                size = path.stat().st_size
                files[rel] = path.read_bytes() if size <= MAX_DIFF_BYTES else _too_big(size)
            except OSError:
                continue  # unreadable: left out of both the list and the diff
    return files


def _too_big(size: int) -> bytes:
    return f"\0evalrun: {size} bytes, not read\n".encode()


@dataclass(frozen=True)
class Changes:
    """The final workspace: its files (sorted) and the diff (empty when nothing changed)."""

    files: list[str]
    diff: str


def compare(before: Snapshot, after: Snapshot) -> Changes:
    blocks = [
        _block(path, before.get(path), after.get(path))
        for path in sorted(before.keys() | after.keys())
        if before.get(path) != after.get(path)
    ]
    return Changes(files=sorted(after), diff="".join(blocks))


def _block(path: str, old: bytes | None, new: bytes | None) -> str:
    head = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    old_text, new_text = _text(old), _text(new)
    if old_text is None or new_text is None:
        return (
            "".join(head)
            + f"Binary files {_name('a', path, old)} and {_name('b', path, new)} differ\n"
        )
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        _name("a", path, old),
        _name("b", path, new),
    )
    body = []
    for line in lines:
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    if not body:  # an empty file made or removed: headers only, as git prints them
        body = [f"--- {_name('a', path, old)}\n", f"+++ {_name('b', path, new)}\n"]
    return "".join(head + body)


def _name(side: str, path: str, content: bytes | None) -> str:
    return "/dev/null" if content is None else f"{side}/{path}"


def _text(content: bytes | None) -> str | None:
    """The text of a file, "" for none; None for binary content (a NUL byte, not UTF-8)."""
    if content is None:
        return ""
    if b"\0" in content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None
