"""Serves every built-in grader from one process, several cases at once (host mode,
docs/grader-protocol.md): ``python -m graders._host SLOTS``. Only modules of this package can
be named, so a case line cannot make the host import anything else.
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any

from grader_sdk._grader import _finish, registered_grader
from grader_sdk._host import serve_host

#: a built-in grader's module: ``graders.`` and one lower-case name that is not private
_BUILTIN = re.compile(r"graders\.[a-z][a-z0-9_]*")


def load(name: str) -> Any:
    """The grader function of built-in module ``name``."""
    if not _BUILTIN.fullmatch(name):
        raise ValueError(f"{name!r} is not a built-in grader module")
    importlib.import_module(name)
    return registered_grader(name)


if __name__ == "__main__":
    _finish(serve_host(load, int(sys.argv[1]) if len(sys.argv) > 1 else 1))
