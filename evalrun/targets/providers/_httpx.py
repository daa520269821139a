"""httpx, imported without its command-line client.

``httpx/__init__`` imports ``httpx._main`` (its CLI) whenever click, rich and pygments are
installed, and they are here (typer and rich are evalrun's own dependencies): ~45 ms of CPU that
every run with an HTTP target paid on its way to the first judge call. An import whose
``sys.modules`` entry is None fails at once, so httpx takes its fallback as if the CLI's
dependencies were missing; only ``httpx.main`` (the ``httpx`` command) changes, and evalrun
never calls it. An ``httpx._main`` already imported is left as it is. (docs/performance.md)
"""

from __future__ import annotations

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

__all__ = ["httpx"]
