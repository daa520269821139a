"""The scripted agent AgentV and evalrun both run on AgentV's workspace examples in the
side-by-side check (docs/agents.md, "AgentV's workspace examples side by side").

It acts as a coding agent would, in the folder it is started in (the case's workspace): it
lists the files there, writes ``AGENT_NOTES.md`` naming them, and answers with the prompt it
was given, the files it saw and the side model's mark (``[side:good]`` for half the prompts,
by a hash of the text with file parts' folders left out, else ``[side:bad]``), so the loopback
judge's verdict follows the answer. The same run is printed in the stream each tool reads:

- with ``--output-file F`` (AgentV's ``cli`` provider, ``{OUTPUT_FILE}``): AgentV's output JSON,
  ``{"output": [messages with tool_calls]}``, written to F;
- without (evalrun's ``cli`` target, ``transcript: jsonl``): evalrun's JSONL on stdout.

    python bench/agentv_side_workspace_agent.py [--prompt-file F] [--output-file F]  (prompt: F or stdin)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

GOOD_MARK = "[side:good]"
BAD_MARK = "[side:bad]"
NOTES = "AGENT_NOTES.md"
#: Folders an agent does not read (version control, dependencies, caches).
SKIPPED = {".git", "node_modules", "__pycache__", ".venv"}
#: AgentV's rendering of a file part for agents; the folder differs between the two checkouts.
FILE_PART = re.compile(r'<file: path="([^"]*)">')


def normalized(prompt: str) -> str:
    """The prompt with each file part's path cut to its name, so both checkouts hash alike."""
    return FILE_PART.sub(lambda m: f'<file: path="{Path(m.group(1)).name}">', prompt).strip()


def workspace_files(root: Path) -> list[str]:
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and not SKIPPED.intersection(path.relative_to(root).parts)
    )


def act(prompt: str, root: Path) -> tuple[str, dict[str, str]]:
    """Do the run's one edit and return the answer and the edit's arguments."""
    text = normalized(prompt)
    files = workspace_files(root)
    (root / NOTES).write_text("Files seen:\n" + "".join(f"- {f}\n" for f in files), "utf-8")
    good = hashlib.sha256(text.encode()).digest()[0] % 2 == 0
    listing = ", ".join(files) or "(none)"
    answer = f"{text}\nFiles: {listing}\n{GOOD_MARK if good else BAD_MARK}"
    return answer, {"file_path": NOTES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-file", type=Path)
    parser.add_argument("--output-file", type=Path)
    args = parser.parse_args()
    prompt = args.prompt_file.read_text("utf-8") if args.prompt_file else sys.stdin.read()
    answer, edit = act(prompt, Path.cwd())
    if args.output_file:
        call = {"tool": "Write", "input": edit, "output": "ok", "id": "w1"}
        message = {"role": "assistant", "content": answer, "tool_calls": [call]}
        args.output_file.write_text(json.dumps({"output": [message]}), "utf-8")
        return 0
    events = [
        {"type": "tool_call", "id": "w1", "name": "Write", "arguments": edit},
        {"type": "tool_result", "id": "w1", "result": "ok"},
        {"type": "final", "text": answer},
    ]
    print("\n".join(json.dumps(event) for event in events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
