"""Per-case workspaces (docs/agents.md, "Workspaces"): made from a template or a local git
repository, set up and torn down by scripts, worked in by a scripted ``cli`` agent (a real
process emitting a recorded JSONL transcript), and shown to graders (real processes) as a file
list, a unified diff and a path they may read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import evalrun
from evalrun.session import EvalError
from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.workspaces.changes import compare

PY = sys.executable

#: edits the template's files, makes one, deletes one, prints its run as evalrun's JSONL
EDITING_AGENT = """\
import json, pathlib, sys
prompt = sys.stdin.read()
pathlib.Path("hello.txt").write_text("hello, agent\\n")
calc = pathlib.Path("src/calc.py")
calc.write_text(calc.read_text() + "\\n\\ndef sub(a, b):\\n    return a - b\\n")
pathlib.Path("notes.md").write_text("done\\n")
pathlib.Path("obsolete.log").unlink()
for event in [
    {"type": "tool_call", "id": "c1", "name": "Edit", "arguments": {"file_path": "src/calc.py"}},
    {"type": "tool_result", "id": "c1", "result": "ok"},
    {"type": "final", "text": "added sub"},
]:
    print(json.dumps(event))
"""

#: reads the payload's workspace fields and the workspace itself; prints them as details
DIFF_GRADER = """\
import json, os, sys
p = json.load(sys.stdin)
diff = p["file_changes"] or ""
def read(name):
    path = os.path.join(p["workspace_path"], name)
    return open(path).read() if os.path.exists(path) else None
ok = "+def sub(a, b):" in diff and read("notes.md") == "done\\n"
print(json.dumps({"score": 1.0 if ok else 0.0, "reason": "diff read",
                  "details": {"files": p["workspace_files"], "diff": diff, "notes": read("notes.md"),
                              "which": read("which.txt"), "hook": read("hook.json"),
                              "path": p["workspace_path"]}}))
"""


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _project(tmp_path: Path, eval_yaml: str, agent: str = EDITING_AGENT) -> Path:
    """An eval folder: a template, the agent, the grader, targets.yaml and the eval file."""
    _write(
        tmp_path,
        {
            "tpl/hello.txt": "hello\n",
            "tpl/src/calc.py": "def add(a, b):\n    return a + b\n",
            "tpl/obsolete.log": "old\n",
            "agent.py": agent,
            "grader.py": DIFF_GRADER,
            "targets.yaml": f"targets:\n  - name: agent\n    kind: cli\n"
            f"    command: [{PY}, {tmp_path / 'agent.py'}]\n    transcript: jsonl\n",
            "ws.eval.yaml": textwrap.dedent(eval_yaml),
        },
    )
    return tmp_path / "ws.eval.yaml"


#: one case of the editing agent graded by the diff grader, in the workspace given under its key
ONE_CASE = """\
target: agent
workspace:
{workspace}
tests:
  - {{id: one, input: go, graders: [{{name: diff, command: [python, grader.py]}}]}}
"""


@pytest.fixture
def one_case(tmp_path: Path) -> Callable[[str], Path]:
    """Makes the eval folder (``_project``) of ``ONE_CASE`` with the workspace's YAML lines."""

    def make(workspace: str) -> Path:
        lines = textwrap.indent(textwrap.dedent(workspace), "  ")
        return _project(tmp_path, ONE_CASE.format(workspace=lines.rstrip()))

    return make


def _run(eval_file: Path, **options: Any) -> list[dict[str, Any]]:
    """The run's results; the eval file's folder holds its targets.yaml and ``out``."""
    options.setdefault("out", eval_file.parent / "out")
    options.setdefault("targets", eval_file.parent / "targets.yaml")
    evalrun.run(eval_file, quiet=True, **options)
    lines = (Path(options["out"]) / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# --- the diff --------------------------------------------------------------------------------


def test_the_diff_is_gits_format_for_edits_creates_deletes_and_binary_files() -> None:
    before = {"a.txt": b"one\ntwo\n", "gone.txt": b"bye\n", "bin": b"\0\1", "same": b"x\n"}
    after = {"a.txt": b"one\nTWO", "new.txt": b"hi\n", "bin": b"\0\2", "same": b"x\n"}
    changes = compare(before, after)
    assert changes.files == ["a.txt", "bin", "new.txt", "same"]
    assert changes.diff == (
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n"
        "-two\n+TWO\n\\ No newline at end of file\n"
        "diff --git a/bin b/bin\nBinary files a/bin and b/bin differ\n"
        "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n"
        "+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
        "diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n"
        "@@ -0,0 +1 @@\n+hi\n"
    )
    assert compare(before, dict(before)).diff == ""


# --- end to end ------------------------------------------------------------------------------


def test_an_agent_edits_its_workspace_and_graders_read_the_diff_and_the_files(
    tmp_path: Path,
) -> None:
    eval_file = _project(
        tmp_path,
        """\
        target: agent
        workspace:
          template: tpl
          setup:
            - command: [sh, -c, 'cat > hook.json; echo "{{test_id}}" > setup.log']
          teardown:
            - command: [sh, -c, 'echo "$EVALRUN_WORKSPACE" >> ../../../teardown.log']
              cwd: .
        tests:
          - id: add-sub
            input: Add a sub function to src/calc.py
            graders:
              - {name: diff, command: [python, grader.py]}
        """,
    )
    (result,) = _run(eval_file)
    assert result["status"] == "passed", result
    details = result["graders"][0]["details"]
    # the setup's file is part of what the agent got, so it is listed but not in the diff
    assert details["files"] == ["hello.txt", "hook.json", "notes.md", "setup.log", "src/calc.py"]
    # a script gets AgentV's hook context on stdin and its names in its arguments
    hook = json.loads(details["hook"])
    assert hook["workspace_path"] == details["path"] and hook["test_id"] == "add-sub"
    assert hook["case_input"] == "Add a sub function to src/calc.py"
    assert details["notes"] == "done\n"
    diff = details["diff"]
    assert "diff --git a/src/calc.py b/src/calc.py" in diff and "+def sub(a, b):" in diff
    assert "--- /dev/null\n+++ b/notes.md" in diff and "--- a/obsolete.log\n+++ /dev/null" in diff
    assert "setup.log" not in diff
    assert result["transcript"]["answer"] == "added sub"
    assert not (tmp_path / "tpl" / "notes.md").exists()  # the template is never touched


@pytest.mark.slow  # two runs; the default run keeps the editing agent's
def test_the_workspace_is_removed_after_the_case_unless_kept(
    tmp_path: Path, one_case: Callable[[str], Path]
) -> None:
    eval_file = one_case("template: tpl")
    (kept,) = _run(eval_file, keep_workspaces=True)
    folder = Path(kept["graders"][0]["details"]["path"])
    assert f"workspace kept at {folder}" in kept["warnings"]
    assert (folder / "notes.md").read_text() == "done\n"
    (gone,) = _run(eval_file, out=tmp_path / "out2")
    assert gone["status"] == "passed"
    assert gone["warnings"] == []
    assert not Path(gone["graders"][0]["details"]["path"]).exists()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("[sh, -c, 'echo cannot find fixture >&2; exit 4']", "exited with status 4: cannot find"),
        pytest.param(
            "[sleep, '30']",
            "no exit within 0.5s (process group killed)",
            marks=pytest.mark.slow,  # waits out its timeout
        ),
        ("[no-such-program-xyz]", "cannot start 'no-such-program-xyz'"),
    ],
)
def test_a_failed_setup_is_the_cases_error_and_teardown_still_runs(
    tmp_path: Path, setup: str, message: str, one_case: Callable[[str], Path]
) -> None:
    eval_file = one_case(
        f"""\
        template: tpl
        setup: {{command: {setup}, timeout: 0.5}}
        teardown: {{command: [sh, -c, 'echo torn > {tmp_path}/teardown.log']}}
        """
    )
    # the teardown's note is written outside its workspace: no sandbox (test_script_sandbox.py)
    (result,) = _run(eval_file, sandbox="none")
    assert result["status"] == "error"
    assert result["error"].startswith("workspace: workspace setup[0]: ")
    assert message in result["error"]
    assert result["graders"] == []  # the agent never ran
    assert (tmp_path / "teardown.log").read_text() == "torn\n"


@pytest.mark.slow  # a real run; the default run keeps the editing agent's
def test_a_failed_teardown_makes_a_passing_case_an_error(one_case: Callable[[str], Path]) -> None:
    eval_file = one_case(
        """\
        template: tpl
        teardown: {command: [sh, -c, 'echo disk full >&2; exit 1']}
        """
    )
    (result,) = _run(eval_file)
    assert result["status"] == "error"
    assert result["graders"][0]["status"] == "passed"  # the graders' results are kept
    assert result["error"] == "workspace teardown[0]: exited with status 1: disk full"


def _git(folder: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", *args], cwd=folder, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow  # a real run; the default run keeps the editing agent's
def test_a_local_git_repository_is_checked_out_at_its_ref(
    tmp_path: Path, one_case: Callable[[str], Path]
) -> None:
    repo = tmp_path / "repo"
    _write(repo, {"hello.txt": "hello\n", "src/calc.py": "def add(a, b):\n    return a + b\n"})
    (repo / "obsolete.log").write_text("old\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "hello.txt").write_text("later\n")
    _git(repo, "commit", "-qam", "second")
    eval_file = one_case(f"repos: [{{source: repo, ref: {first}}}]")
    (result,) = _run(eval_file)
    assert result["status"] == "passed", result
    diff = result["graders"][0]["details"]["diff"]
    assert "-hello\n+hello, agent\n" in diff  # the first commit's text, not "later"
    assert ".git" not in result["graders"][0]["details"]["files"][0]


def test_a_remote_repository_is_refused_when_the_file_loads(
    one_case: Callable[[str], Path],
) -> None:
    eval_file = one_case("repos: [{source: 'https://github.com/example/widget.git'}]")
    with pytest.raises(
        EvalFileError,
        match=r"ws.eval.yaml:3: workspace.repos\[0\].source: .*"
        r"remote repository: evalrun works offline",
    ):
        load_eval(eval_file)


@pytest.mark.slow  # a real run; the default run keeps the editing agent's
def test_a_test_level_workspace_replaces_the_suites_keys(tmp_path: Path) -> None:
    eval_file = _project(
        tmp_path,
        """\
        target: agent
        workspace:
          template: tpl
          setup: {command: [sh, -c, 'echo suite > which.txt']}
        tests:
          - id: suite
            input: go
            graders: [{name: diff, command: [python, grader.py]}]
          - id: own
            input: go
            workspace:
              setup: {command: [sh, -c, 'echo own > which.txt']}
            graders: [{name: diff, command: [python, grader.py]}]
        """,
    )
    results = {r["id"]: r for r in _run(eval_file)}
    assert {k: r["status"] for k, r in results.items()} == {"suite": "passed", "own": "passed"}
    for case in ("suite", "own"):
        assert results[case]["graders"][0]["details"]["which"] == f"{case}\n"


#: answers with its prompt, its arguments and the text of each file it was given
ECHO_AGENT = """\
import json, sys
prompt = sys.stdin.read()
files = sys.argv[1:]
texts = [open(f).read() for f in files]
print(json.dumps({"type": "final", "text": json.dumps({"prompt": prompt, "files": files,
                                                       "texts": texts})}))
"""


@pytest.mark.parametrize("workspace", ["", "workspace: {template: tpl}"])
def test_file_parts_reach_a_cli_agents_prompt_and_its_files_argument(
    tmp_path: Path, workspace: str
) -> None:
    """AgentV's ``type: file`` parts: ``<file: path="...">`` in place in the prompt, and every
    input file in ``{files}``; in a workspace's strict sandbox the files are bound in."""
    _write(
        tmp_path,
        {
            "inputs/brief.md": "Summarise the repo.\n",
            "inputs/extra.txt": "extra\n",
            "tpl/README.md": "hi\n",
            "bin/agent.py": ECHO_AGENT,
            "targets.yaml": f"targets:\n  - name: agent\n    kind: cli\n    transcript: jsonl\n"
            f"    command: [{PY}, {tmp_path / 'bin' / 'agent.py'}, '{{files}}']\n",
            "ws.eval.yaml": textwrap.dedent(
                f"""\
                target: agent
                {workspace}
                tests:
                  - id: files
                    input_files: [inputs/extra.txt]
                    input:
                      - role: user
                        content:
                          - {{type: text, value: Follow the brief}}
                          - {{type: file, value: inputs/brief.md}}
                    graders: [{{type: contains, value: Summarise}}]
                """
            ),
        },
    )
    (result,) = _run(tmp_path / "ws.eval.yaml")
    assert result["status"] == "passed", result
    seen = json.loads(result["output"])
    brief, extra = (str((tmp_path / "inputs" / n).resolve()) for n in ("brief.md", "extra.txt"))
    assert seen["prompt"] == f'Follow the brief\n<file: path="{brief}">'
    assert seen["files"] == [brief, extra]
    assert seen["texts"] == ["Summarise the repo.\n", "extra\n"]


def test_a_missing_file_part_is_the_cases_error(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "bin/agent.py": ECHO_AGENT,
            "targets.yaml": f"targets:\n  - name: agent\n    kind: cli\n    transcript: jsonl\n"
            f"    command: [{PY}, {tmp_path / 'bin' / 'agent.py'}]\n",
            "ws.eval.yaml": textwrap.dedent(
                """\
                target: agent
                tests:
                  - id: files
                    input: [{role: user, content: [{type: file, value: gone.md}]}]
                    graders: [{type: contains, value: x}]
                """
            ),
        },
    )
    (result,) = _run(tmp_path / "ws.eval.yaml")
    assert result["status"] == "error"
    assert "input file part gone.md: no such file" in result["error"]


@pytest.mark.slow  # a real run; the default run keeps the editing agent's
def test_the_worked_example_of_the_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/agents.md, "Workspaces", "A worked example": its files written as the page shows
    them, run from their folder, and the grader's reason as the page quotes it."""
    text = (Path(__file__).parents[1] / "docs" / "agents.md").read_text(encoding="utf-8")
    example = text[text.index("### A worked example", text.index("## Workspaces")) :]
    for block in re.findall(r"```(?:python|yaml)\n# file: (\S+)\n(.*?)```", example, re.S):
        _write(tmp_path, {block[0]: block[1]})
    monkeypatch.chdir(tmp_path)
    (result,) = _run(tmp_path / "fix.eval.yaml")
    assert result["status"] == "passed", result
    quoted = re.search(r"grader's reason being\n`([^`]*)`", example)
    assert quoted is not None
    assert result["graders"][0]["reason"] == quoted.group(1)


def test_a_missing_template_stops_the_run_before_anything_runs(
    tmp_path: Path, one_case: Callable[[str], Path]
) -> None:
    eval_file = one_case(
        """\
        template: nowhere
        required_commands: [no-such-program-xyz]
        """
    )
    with pytest.raises(EvalError) as raised:
        _run(eval_file)
    problems = "\n".join(raised.value.problems)
    assert "ws.eval.yaml:3: workspace.template: nowhere is not a folder" in problems
    assert "workspace.required_commands: no-such-program-xyz is not on PATH" in problems
    assert not (tmp_path / "out").exists()


FILES_GRADER = """\
import json, sys
payload = json.load(sys.stdin)
files = payload.get("workspace_files") or []
print(json.dumps({"score": 1.0 if "hello.txt" in files else 0.0, "details": {"files": files}}))
"""


def test_a_model_target_answers_beside_the_workspace_its_graders_read(tmp_path: Path) -> None:
    """A model does not work in a folder, so it answers as without one; the case still gets
    its workspace for the graders, as AgentV does (docs/agents.md, "Workspaces")."""
    eval_file = _project(
        tmp_path,
        """\
        target: mock
        workspace: {template: tpl}
        tests:
          - id: beside
            input: Say hello
            graders:
              - {name: files, command: [python, files.py]}
        """,
    )
    (tmp_path / "files.py").write_text(FILES_GRADER)
    (result,) = _run(eval_file)
    assert result["status"] == "passed", result
    assert "hello.txt" in result["graders"][0]["details"]["files"]


@pytest.mark.parametrize(
    ("workspace", "where"),
    [
        ("workspace: {template: tpl}", "ws.eval.yaml:2: workspace.sandbox"),  # strict by default
        ("workspace: {template: tpl, sandbox: process}", "ws.eval.yaml:2: workspace.sandbox"),
    ],
)
def test_a_sandboxed_workspace_where_bwrap_cannot_run_stops_the_run_before_any_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workspace: str, where: str
) -> None:
    reason = "bubblewrap (bwrap) is not on PATH; install it, e.g. 'apt-get install bubblewrap'"
    monkeypatch.setattr("evalrun.runner.preflight.why_unavailable", lambda: reason)
    eval_file = _project(
        tmp_path,
        f"""\
        target: agent
        {workspace}
        graders: [{{type: contains, value: x}}]
        tests:
          - {{id: one, input: go}}
          - {{id: two, input: go}}
        """,
    )
    with pytest.raises(evalrun.EvalError) as caught:
        _run(eval_file, sandbox="none")
    assert str(caught.value).splitlines()[0] == (
        f"{tmp_path / where}: the agent's sandbox cannot be had: {reason} "
        "(workspace.sandbox: none runs the agent without one)"
    )
    assert caught.value.exit_code == 2 and not (tmp_path / "out").exists()  # nothing ran


def test_a_workspace_without_a_sandbox_runs_where_bwrap_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("evalrun.runner.preflight.why_unavailable", lambda: "no bwrap")
    eval_file = _project(
        tmp_path,
        """\
        target: agent
        workspace: {template: tpl}
        graders: [{type: contains, value: added sub}]
        tests:
          - id: one
            input: go
            workspace: {sandbox: none}
        """,
    )
    (result,) = _run(eval_file, sandbox="none")
    assert result["status"] == "passed", result
