"""Where evalrun keeps what belongs to the user rather than to a project: one folder under the
XDG cache directory (docs/config.md, "Caches")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def user_cache_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/evalrun``, else ``~/.cache/evalrun`` (the XDG base directory rule)."""
    base = env.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):  # the spec says a relative value is ignored
        base = os.path.join(env.get("HOME") or Path.home(), ".cache")
    return Path(base) / "evalrun"
