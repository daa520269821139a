"""A program's argv as evalrun runs it: relative paths that exist from a base folder made
absolute, so the program finds them from wherever it runs (a grader's scratch folder, an
agent's workspace: docs/eval-files.md); a bare program name stays a PATH lookup."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def absolute_paths(argv: Iterable[str], base: Path) -> list[str]:
    out = []
    for index, part in enumerate(argv):
        path_like = index > 0 or "/" in part or part.startswith(".")
        candidate = base / part
        if path_like and part and not Path(part).is_absolute() and existing(candidate):
            out.append(str(candidate.resolve()))
        else:
            out.append(part)
    return out


def existing(path: Path) -> bool:
    """Whether ``path`` exists; an argument no file can be named (too long a name, a NUL byte,
    such as inline code) is not a path rather than an error."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
