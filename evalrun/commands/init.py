"""``evalrun init [DIR] --language python|js|shell``: a project that runs green at once, offline,
so a newcomer edits something that works (docs/config.md, "Starting a project")."""

from __future__ import annotations

import enum
from pathlib import Path

import typer

from evalrun.safetext import printable

Language = enum.Enum("Language", {"python": "python", "js": "js", "shell": "shell"}, type=str)

#: How each language's grader is run and what its file is called (eval file's folder relative).
GRADER_COMMANDS: dict[str, tuple[str, list[str]]] = {
    "python": ("graders/mentions_reference.py", ["python3", "graders/mentions_reference.py"]),
    "js": ("graders/mentions_reference.mjs", ["node", "graders/mentions_reference.mjs"]),
    "shell": ("graders/mentions_reference.sh", ["sh", "graders/mentions_reference.sh"]),
}

GRADERS = {
    "python": '''\
"""A grader: one JSON case on stdin, one JSON score on stdout (docs/grader-protocol.md).
Passes when the answer mentions the reference answer, ignoring case."""

import json
import sys

case = json.load(sys.stdin)
answer = (case["output"] or "").lower()
reference = (case["reference_answer"] or "").lower()
found = bool(reference) and reference in answer
reason = f"{'mentions' if found else 'does not mention'} {case['reference_answer']!r}"
print(json.dumps({"score": 1.0 if found else 0.0, "reason": reason}))
''',
    "js": """\
// A grader: one JSON case on stdin, one JSON score on stdout (docs/grader-protocol.md).
// Passes when the answer mentions the reference answer, ignoring case.
let text = "";
for await (const chunk of process.stdin) text += chunk;
const kase = JSON.parse(text);
const answer = (kase.output ?? "").toLowerCase();
const reference = (kase.reference_answer ?? "").toLowerCase();
const found = reference !== "" && answer.includes(reference);
const reason = `${found ? "mentions" : "does not mention"} '${kase.reference_answer}'`;
console.log(JSON.stringify({ score: found ? 1.0 : 0.0, reason }));
""",
    "shell": """\
#!/bin/sh
# A grader: one JSON case on stdin, one JSON score on stdout (docs/grader-protocol.md).
# Passes when the answer mentions the reference answer, ignoring case. Needs jq.
set -eu
case_json=$(cat)
answer=$(printf '%s' "$case_json" | jq -r '.output // "" | ascii_downcase')
reference=$(printf '%s' "$case_json" | jq -r '.reference_answer // "" | ascii_downcase')
case "$answer" in
  *"$reference"*) [ -n "$reference" ] && score=1.0 || score=0.0 ;;
  *) score=0.0 ;;
esac
jq -n --argjson s "$score" --arg r "$reference" '{score: $s, reason: "looked for \\($r)"}'
""",
}

EVAL = """\
# A first eval: each test's recorded `output` is graded by a grader in {language}.
# Run it with `evalrun run` (evalrun.toml names this folder); docs/eval-files.md has the format.
description: Starter eval ({language} grader)
graders:
  - name: mentions_reference
    command: {command}
    threshold: 1.0
tests:
  - id: capital-of-france
    input: What is the capital of France?
    output: The capital of France is Paris.
    expected_output: Paris
  - id: largest-planet
    input: Which planet is the largest?
    output: Jupiter is the largest planet in the solar system.
    expected_output: Jupiter
"""

TARGETS = """\
# Targets the evals in this folder can name (docs/targets.md). `local` is an offline embedding
# judge (the [local] extra); add a real model for the tests to be answered rather than recorded:
#
#   - name: gemini
#     kind: gemini
#     model: gemini-2.5-flash
#     api_key_env: GEMINI_API_KEY
targets:
  - name: local
    kind: local
"""

CONFIG = """\
# Project defaults for `evalrun run` (docs/config.md); a flag, EVALRUN_* or .env overrides them.
evals = ["evals"]
target = "local"
"""


def scaffold(folder: Path, language: str) -> list[Path]:
    """The starter files for ``language`` in ``folder``; none is written if any exists."""
    grader_path, command = GRADER_COMMANDS[language]
    files = {
        folder / "evalrun.toml": CONFIG,
        folder / "evals" / "targets.yaml": TARGETS,
        folder / "evals" / "starter.eval.yaml": EVAL.format(
            language=language, command=_flow_list(command)
        ),
        folder / "evals" / grader_path: GRADERS[language],
    }
    taken = [path for path in files if path.exists()]
    if taken:
        raise FileExistsError(", ".join(str(path) for path in taken))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)


def _flow_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def init(
    folder: Path = typer.Argument(Path("."), help="Where to create the project (default: here)."),
    language: Language = typer.Option(
        "python", "--language", "-l", help="The language of the starter grader."
    ),
) -> None:
    """Create a starter project: evalrun.toml, an eval, a targets file and a grader. It runs
    green offline: `evalrun run` in that folder."""
    try:
        written = scaffold(folder, language.value)
    except FileExistsError as exc:
        typer.echo(f"error: already there, nothing written: {printable(str(exc))}", err=True)
        raise typer.Exit(2) from None  # a usage error (docs/results.md)
    for path in written:
        typer.echo(f"created {printable(str(path))}")
    where = "" if folder == Path(".") else f"cd {printable(str(folder))} && "
    typer.echo(f"next: {where}evalrun run")


def register(app: typer.Typer) -> None:
    app.command("init")(init)
