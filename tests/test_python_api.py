"""`evalrun.run` (docs/python-api.md): the same run as `evalrun run`, graders as real processes,
results read back from the bundle; and `--limit`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import evalrun
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent

#: a script grader (a real process): passes when the output names Paris
GRADER = """
import json, sys
case = json.load(sys.stdin)
ok = "Paris" in (case.get("output") or "")
print(json.dumps({"score": 1.0 if ok else 0.0, "reason": "Paris" if ok else "no Paris"}))
"""

EVAL = """
description: capitals
graders:
  - name: names_paris
    command: [python, grader.py]
tests:
  - id: fr-1
    input: Capital of France?
    output: Paris.
  - id: de-1
    input: Capital of Germany?
    output: Bonn.
  - id: fr-2
    input: And of France, again?
    output: Paris again.
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    path = tmp_path / "capitals.eval.yaml"
    path.write_text(textwrap.dedent(EVAL))
    return path


def test_a_file_runs_as_the_command_line_runs_it(suite: Path, tmp_path: Path) -> None:
    outcome = evalrun.run(suite, out=tmp_path / "api", quiet=True, sandbox="none")
    cli = run_cli(str(suite), "--out", str(tmp_path / "cli"), "-q", "--sandbox", "none")
    assert outcome.exit_code == cli.returncode == 1
    assert outcome.bundle == tmp_path / "api"
    assert outcome.counts == {"passed": 2, "failed": 1, "error": 0, "unscored": 0, "total": 3}
    assert outcome.mean_score == pytest.approx(2 / 3)
    by_id = {case.id: case for case in outcome.cases}
    assert by_id["de-1"].status == "failed" and by_id["de-1"].graders[0].reason == "no Paris"
    cli_lines = (tmp_path / "cli" / "results.jsonl").read_text().splitlines()
    cli_status = {r["id"]: r["status"] for r in map(json.loads, cli_lines)}
    assert {c.id: c.status for c in outcome.cases} == cli_status
    for name in ("results.jsonl", "summary.json", "report.md", "report.html", "junit.xml"):
        assert (tmp_path / "api" / name).is_file(), name


def test_a_built_eval_runs_with_paths_from_its_base_dir(suite: Path, tmp_path: Path) -> None:
    built = evalrun.Eval(
        graders=[evalrun.Grader(name="names_paris", command=["python", "grader.py"])],
        tests=[
            evalrun.Case(id="yes", input="q", output="Paris"),
            evalrun.Case(id="no", input="q", output="Rome"),
        ],
    )
    outcome = evalrun.run(built, base_dir=suite.parent, out=tmp_path / "b", quiet=True)
    assert {c.id: c.status for c in outcome.cases} == {"yes": "passed", "no": "failed"}
    assert outcome.exit_code == 1
    assert built.tests[0].index == 0 and built.tests[1].index == 0  # the caller's copy untouched


def test_a_built_eval_is_checked_as_a_file_is(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs 'value'"):
        evalrun.Grader(type="contains")
    twice = evalrun.Eval(
        graders=[evalrun.Grader(type="contains", value="x")],
        tests=[evalrun.Case(id="a", input="q"), evalrun.Case(id="a", input="q")],
    )
    with pytest.raises(evalrun.EvalError, match="duplicate test id 'a'"):
        evalrun.run(twice, base_dir=tmp_path)
    with pytest.raises(evalrun.EvalError, match="needs base_dir"):
        evalrun.run(twice)


def test_a_bad_file_raises_what_the_command_line_prints(tmp_path: Path) -> None:
    bad = tmp_path / "bad.eval.yaml"
    bad.write_text("tests:\n  - id: a\n    input: q\n    graders:\n      - type: contains\n")
    cli = run_cli(str(bad), "-q")
    with pytest.raises(evalrun.EvalError) as caught:
        evalrun.run(bad)
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"error: {caught.value}"
    assert re.search(r"bad\.eval\.yaml:5: tests\[0\]\.graders\[0\]", str(caught.value))


def test_a_run_that_cannot_start_raises_the_command_lines_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asks = tmp_path / "asks.eval.yaml"  # no recorded output: a target must answer
    asks.write_text("graders:\n  - {type: contains, value: x}\ntests:\n  - {id: a, input: q}\n")
    (tmp_path / "targets.yaml").write_text("targets:\n  - {name: sut, kind: mock}\n")
    monkeypatch.chdir(tmp_path)
    cli = run_cli(str(asks), "--target", "nowhere", "-q", cwd=tmp_path)
    with pytest.raises(evalrun.EvalError) as caught:
        evalrun.run(asks, target="nowhere")
    assert cli.returncode == 2
    assert len(caught.value.problems) == 2
    assert cli.stderr.strip().splitlines() == [
        *caught.value.problems,
        f"error: {caught.value.summary}",
    ]
    assert not (tmp_path / ".evalrun" / "runs").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workers": 0}, "--workers: Input should be greater than or equal to 1 (got 0)"),
        ({"limit": 0}, "--limit: Input should be greater than or equal to 1 (got 0)"),
        ({"sandbox": "jail"}, "--sandbox: Input should be"),
        ({"wrokers": 2}, "wrokers: not an option of a run (did you mean 'workers'?)"),
        ({"shard": "5/4"}, "--shard 5/4: need 1 <= i <= n"),
    ],
)
def test_a_bad_option_raises_eval_error(suite: Path, options: dict, message: str) -> None:
    with pytest.raises(evalrun.EvalError) as caught:
        evalrun.run(suite, **options)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("flag", "option"), [("--workers", "workers"), ("--limit", "limit"), ("--repeat", "repeat")]
)
def test_a_bad_option_says_what_the_command_line_says(suite: Path, flag: str, option: str) -> None:
    cli = run_cli(str(suite), flag, "0", "-q")
    with pytest.raises(evalrun.EvalError) as caught:
        evalrun.run(suite, **{option: 0})
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"error: {caught.value}"


def test_the_options_have_the_command_lines_defaults() -> None:
    """Every option of `evalrun run` is an option of the API, with the same default (but the
    files, and -v, which says where the command line's project defaults came from)."""
    import inspect

    from evalrun.commands.run import run
    from evalrun.session import RunSettings

    cli = {}
    for name, param in inspect.signature(run).parameters.items():
        if name in ("ctx", "files", "verbose"):
            continue
        default = param.default.default
        cli[name.rstrip("_")] = getattr(default, "value", default)
    api = {
        name: field.get_default(call_default_factory=True)
        for name, field in RunSettings.model_fields.items()
    }
    assert cli == api


def test_limit_runs_the_first_selected_cases(suite: Path, tmp_path: Path) -> None:
    outcome = evalrun.run(suite, filter=["fr-*"], limit=1, out=tmp_path / "api", quiet=True)
    assert [c.id for c in outcome.cases] == ["fr-1"]
    cli = run_cli(str(suite), "--limit", "2", "-q", "--out", str(tmp_path / "cli"))
    lines = (tmp_path / "cli" / "results.jsonl").read_text().splitlines()
    assert cli.returncode == 1  # de-1 is the second case, and fails
    assert sorted(json.loads(line)["id"] for line in lines) == ["de-1", "fr-1"]


def test_import_evalrun_imports_none_of_the_api() -> None:
    code = "import evalrun, sys; print(sorted(m for m in sys.modules if m.startswith(('evalrun', 'pydantic'))))"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "['evalrun']"


def python_block(doc: Path) -> str:
    """The doc's worked example: its first ```python block."""
    found = re.search(r"```python\n(.*?)```", doc.read_text(), re.S)
    assert found is not None, f"{doc} has no python block"
    return found.group(1)


def test_the_docs_worked_example_runs_as_written(tmp_path: Path) -> None:
    example = python_block(ROOT / "docs" / "python-api.md")
    ran = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "1",
        "1 1",
        "[('france', 'passed'), ('germany', 'failed')]",
        "capitals-run",
    ]
    assert (tmp_path / "capitals-run" / "results.jsonl").is_file()
