"""AgentV's own eval files validate unchanged (docs/eval-files.md, "AgentV files").

Every eval file AgentV discovers under ``examples/`` and ``evals/`` at two of its commits
(tests/data/agentv_corpus/README.md) goes through ``evalrun validate``'s own code path. No file
may raise; the share that validates may not fall below the floor measured when the floor was
set; every refusal must be one of ``OUT_OF_SCOPE``, the list docs/eval-files.md documents; and
``evalrun schema`` accepts every file that validates (docs/eval-files.md, "Editor set-up").
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import traceback
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from evalrun.commands.run import _validate_one, eval_json_schema
from evalrun.yamlsource import load_yaml_with_lines

CORPUS = Path(__file__).parent / "data" / "agentv_corpus"
#: AgentV's discovery patterns, matched on the path below the commit's folder, any case.
EVAL_FILE = re.compile(r"(\.eval\.ya?ml|(^|/)(suite|eval)\.ya?ml)$", re.IGNORECASE)

#: Files that validate, per commit: raise a floor when a change makes more files validate.
#: Before issue #34: 12 of 119 and 8 of 118 (and 2 tracebacks each, on YAML merge keys).
FLOORS = {"58f316ca2": 115, "14bca459e": 113}

#: Programs AgentV's graders run. Whether this machine has them is not what this test checks,
#: so a stand-in for each is put first on PATH (validation only looks them up).
PROGRAMS = ("bun", "uv", "node", "npx", "deno", "tsx")

#: What evalrun refuses in AgentV's files, on purpose: (what, pattern on ``key: message``).
#: docs/eval-files.md ("AgentV files", "Deliberate refusals") names each and says why.
OUT_OF_SCOPE: tuple[tuple[str, str], ...] = (
    ("top-level imports, which AgentV itself has removed", r"^imports: "),
    (
        "rubric items scored in score_ranges bands",
        r"scored in score_ranges bands",
    ),
    (
        "template names the test's vars lack (Nunjucks renders them as nothing)",
        r"'\{\{ (config\b|7 \* 7)[^']*\}\}' names no var",
    ),
    ("environment variables this machine does not set", r"environment variable \w+ is not set"),
    (
        "judge targets this machine's targets.yaml does not name",
        r"target\.allow\[\]: unknown target '\w+'|^targets: targets file: ",
    ),
    (
        "scripts AgentV's repository does not have where the file says",
        r"command: script 'graders/transcript-quality\.ts'",
    ),
)


@dataclass
class Outcome:
    file: Path
    problems: list[str]
    crash: str | None = None


def _eval_files(commit: str) -> list[Path]:
    base = CORPUS / commit
    return sorted(
        path
        for path in base.rglob("*")
        if path.is_file()
        and path.relative_to(base).parts[0] in ("examples", "evals")
        and EVAL_FILE.search(path.relative_to(base).as_posix())
    )


def _validate(file: Path, targets: Path) -> Outcome:
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            found = _validate_one(file, "mock", "mock", targets)
    except BaseException:  # noqa: BLE001 - any escape is the failure this test looks for
        return Outcome(file, [], traceback.format_exc())
    return Outcome(file, [] if isinstance(found, str) else found)


def _key_and_message(problem: str) -> str:
    """``key: message`` of a ``file:line: key: message`` problem, indexes dropped."""
    rest = problem.split(": ", 1)[1] if ": " in problem else problem
    return re.sub(r"\[\d+\]", "[]", rest)


def _out_of_scope(problem: str) -> str | None:
    text = _key_and_message(problem)
    return next((what for what, pattern in OUT_OF_SCOPE if re.search(pattern, text)), None)


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in PROGRAMS:
        program = bin_dir / name
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    targets = tmp_path / "targets.yaml"
    targets.write_text("targets: []\n")
    return targets


@pytest.mark.slow  # about 240 files through validate's checks: 10-40 s on a shared machine
@pytest.mark.parametrize("commit", sorted(FLOORS))
def test_agentv_files_validate(commit: str, stand_ins: Path) -> None:
    files = _eval_files(commit)
    assert len(files) > 100, f"the corpus of {commit} is missing files"
    outcomes = [_validate(file, stand_ins) for file in files]
    crashes = [f"{o.file}:\n{o.crash}" for o in outcomes if o.crash]
    assert not crashes, "validate raised:\n" + "\n".join(crashes)
    unexplained = [p for o in outcomes for p in o.problems if _out_of_scope(p) is None]
    assert not unexplained, "refusals outside OUT_OF_SCOPE:\n" + "\n".join(unexplained[:40])
    valid = [o.file for o in outcomes if not o.problems]
    print(f"{commit}: {len(valid)}/{len(files)} validate")
    assert len(valid) >= FLOORS[commit], f"{commit}: {len(valid)}/{len(files)} validate"
    schema = jsonschema.Draft202012Validator(eval_json_schema())
    refused = {
        str(file): [e.message[:200] for e in schema.iter_errors(load_yaml_with_lines(file)[0])]
        for file in valid
    }
    assert {file: errors for file, errors in refused.items() if errors} == {}
