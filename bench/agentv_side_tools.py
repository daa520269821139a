"""The programs AgentV's example graders start, as the side-by-side check gives them to both
tools (docs/eval-files.md, "Side by side with AgentV").

- ``uv`` is absent for both: a stand-in that fails as a missing program would, so AgentV's
  Python-on-uv graders fail alike in both tools, however the machine is set up. On the
  workspace examples (docs/agents.md), whose graders read what the agent changed, it runs
  ``uv run SCRIPT`` with this Python instead, for both tools alike.
- ``bun`` runs AgentV's TypeScript graders. Recording, the stand-in runs the real bun and keeps
  each grader's stdout and exit status under a key made of its command and the payload's
  text; replaying (CI, where there is no bun), it answers from what was kept. A payload it has
  not seen is an error, never a made-up score.

    python bench/agentv_side_tools.py record|replay ARGS...   (what the stand-ins run)
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

#: The payload keys a grader's answer depends on here (``input_files`` holds absolute paths,
#: which differ between the recording and the replay).
KEYED = ("criteria", "input", "output", "expected_output", "config", "metadata")


def key(argv: list[str], payload: bytes) -> str:
    try:
        document = json.loads(payload)
    except ValueError:
        document = {"raw": payload.decode("utf-8", "replace")}
    picked = {k: document.get(k) for k in KEYED} if isinstance(document, dict) else document
    if isinstance(document, dict) and document.get("file_changes") is not None:
        # a workspace case's grader reads the diff (its paths are relative, so stable)
        picked["file_changes"] = document["file_changes"]
    # evalrun passes scripts by absolute path: keyed relative to the grader's folder, so the
    # AgentV checkout of the recording and the corpus copy of the replay give the same key
    here = os.getcwd()
    args = [os.path.relpath(a, here) if os.path.isabs(a) else a for a in argv]
    text = json.dumps([args, picked], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def install(
    folder: Path,
    mode: str,
    *,
    store: Path,
    real_bun: str | None = None,
    uv_runs_python: bool = False,
) -> Path:
    """Write the ``uv`` and ``bun`` stand-ins into ``folder`` (put it first on PATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    uv = "#!/bin/sh\necho 'uv: not available in the side-by-side check' >&2\nexit 127\n"
    if uv_runs_python:
        uv = f'#!/bin/sh\n[ "$1" = run ] && shift\nexec "{sys.executable}" "$@"\n'
    env = f"SIDE_STORE='{store}' SIDE_REAL_BUN='{real_bun or ''}'"
    bun = f'#!/bin/sh\n{env} exec "{sys.executable}" "{Path(__file__).resolve()}" {mode} "$@"\n'
    for name, text in (("uv", uv), ("bun", bun)):
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def main(mode: str, argv: list[str]) -> int:
    store = Path(os.environ["SIDE_STORE"])
    payload = sys.stdin.buffer.read()
    found = key(argv, payload)
    if mode == "record":
        done = subprocess.run(
            [os.environ["SIDE_REAL_BUN"], *argv], input=payload, capture_output=True
        )
        row = {
            "key": found,
            "argv": [Path(a).name if os.path.isabs(a) else a for a in argv],
            "stdout": done.stdout.decode("utf-8", "replace"),
            "stderr": done.stderr.decode("utf-8", "replace")[-2000:],
            "exit": done.returncode,
        }
        with store.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        sys.stdout.write(row["stdout"])
        sys.stderr.buffer.write(done.stderr)
        return done.returncode
    rows = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines() if line]
    for row in rows:
        if row["key"] == found:
            sys.stdout.write(row["stdout"])
            sys.stderr.write(row["stderr"])
            return int(row["exit"])
    sys.stderr.write(f"error: no recorded output of bun {' '.join(argv)} for this payload\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
