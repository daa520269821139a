"""The pytest plugin (docs/pytest.md), run as a user runs it: pytest in a real subprocess, graders
as real processes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: a script grader that counts its runs (one line per case graded) and passes on "Paris"
COUNTING_GRADER = """
import json, os, sys
case = json.load(sys.stdin)
with open(os.environ["COUNT_FILE"], "a") as f:
    f.write(case["case_id"] + "\\n")
ok = "Paris" in (case.get("output") or "")
print(json.dumps({"score": 1.0 if ok else 0.0, "reason": "no Paris" if not ok else "Paris"}))
"""


def eval_text(*cases: tuple[str, str]) -> str:
    rows = "".join(f"  - {{id: {i}, input: q, output: {o}}}\n" for i, o in cases)
    return (
        "graders:\n  - name: counted\n    command: [python, grader.py]\n"
        "    env: [COUNT_FILE]\n"
        f"tests:\n{rows}"
    )


def pytest_run(
    *args: str,
    cwd: Path,
    autoload: bool = False,
    plugin: str = "evalrun.pytest_plugin",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess; without ``autoload`` only ``plugin`` (and xdist) load, so the
    run does not pay for every plugin installed beside evalrun. ``plugin="evalrun"`` loads our
    plugin by its installed ``pytest11`` entry point's name, as ``-p`` looks entry points up
    first (a plain ``import evalrun`` would register no hooks and ``--evalrun`` would be an
    unknown option)."""
    full_env = {**os.environ, **(env or {})}
    plugins: list[str] = []
    if not autoload:
        full_env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugins = ["-p", plugin]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugins, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=full_env,
    )


@pytest.mark.parametrize(
    "autoload",
    [
        False,  # the entry point by name, beside no other plugin: the default run's check
        # every installed plugin autoloaded, as a user's pytest does: 5-20 s a run with the
        # [test-all] plugins (schemathesis, hypothesis, ...) on a shared 2-core machine
        pytest.param(True, marks=pytest.mark.slow),
    ],
    ids=["entry-point", "autoload"],
)
def test_the_installed_plugin_does_nothing_unless_asked(tmp_path: Path, autoload: bool) -> None:
    (tmp_path / "a.eval.yaml").write_text(eval_text(("x", "Paris")))
    plain = pytest_run("--co", "-q", cwd=tmp_path, autoload=autoload, plugin="evalrun")
    assert plain.returncode == 5, plain.stdout + plain.stderr  # no tests collected
    asked = pytest_run("--co", "-q", "--evalrun", cwd=tmp_path, autoload=autoload, plugin="evalrun")
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert "a.eval.yaml::x" in asked.stdout
    # the project's own addopts spread a run over xdist workers, which this run does not load
    own = pytest_run(
        "--co", "-q", "-o", "addopts=", "tests/data", cwd=ROOT, autoload=autoload, plugin="evalrun"
    )
    assert own.returncode == 5 and ".eval.yaml::" not in own.stdout, own.stdout


def test_the_plugin_imports_nothing_of_evalrun_until_asked() -> None:
    code = (
        "import evalrun.pytest_plugin, sys; "
        "print(sorted(m for m in sys.modules if m.startswith(('evalrun', 'pydantic'))))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loaded = "['evalrun', 'evalrun.pytest_plugin', 'evalrun.pytest_state']"
    assert shown.stdout.strip() == loaded, shown.stderr


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
def test_each_case_is_a_test_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "grader.py").write_text(textwrap.dedent(COUNTING_GRADER))
    (tmp_path / "c.eval.yaml").write_text(eval_text(("fr", "Paris"), ("de", "Bonn")))
    count = tmp_path / "count.txt"
    ran = pytest_run("--evalrun", "-rA", cwd=tmp_path, env={"COUNT_FILE": str(count)})
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "PASSED c.eval.yaml::fr" in ran.stdout
    assert "FAILED c.eval.yaml::de - case 'de' failed (score 0.000)" in ran.stdout
    assert "  counted: 0.000 no Paris" in ran.stdout
    assert sorted(count.read_text().split()) == ["de", "fr"]  # one run of the file


def test_a_file_that_does_not_load_is_a_collection_error_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "bad.eval.yaml").write_text("tests:\n  - id: a\n    input: q\n    graders: [{}]\n")
    ran = pytest_run("--evalrun", cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert re.search(r"bad\.eval\.yaml:4: tests\[0\]\.graders\[0\]", ran.stdout), ran.stdout
    assert "Traceback" not in ran.stdout


def test_a_run_that_cannot_start_fails_every_case_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "targets.yaml").write_text("targets:\n  - {name: sut, kind: mock}\n")
    (tmp_path / "t.eval.yaml").write_text(
        "graders:\n  - {type: contains, value: x}\ntests:\n  - {id: a, input: q}\n"
        "  - {id: b, input: q}\n"
    )
    ran = pytest_run("--evalrun", "--evalrun-target", "nowhere", cwd=tmp_path)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ran.stdout.count("--target: unknown target 'nowhere'") >= 2
    assert "2 failed" in ran.stdout


def test_evalrun_paths_collects_only_what_it_names(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "in.eval.yaml").write_text(eval_text(("kept", "Paris")))
    (tmp_path / "out.eval.yaml").write_text(eval_text(("left", "Paris")))
    (tmp_path / "pytest.ini").write_text("[pytest]\nevalrun_paths = evals\n")
    ran = pytest_run("--co", "-q", cwd=tmp_path)
    assert "in.eval.yaml::kept" in ran.stdout, ran.stdout + ran.stderr
    assert "left" not in ran.stdout


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
def test_under_xdist_each_file_runs_once(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    (tmp_path / "grader.py").write_text(textwrap.dedent(COUNTING_GRADER))
    for name in ("one", "two"):
        cases = [(f"{name}-{i}", "Paris") for i in range(3)]
        (tmp_path / f"{name}.eval.yaml").write_text(eval_text(*cases))
    count = tmp_path / "count.txt"
    ran = pytest_run(
        "-p",
        "xdist.plugin",
        "-n",
        "2",
        "--evalrun",
        "--basetemp",
        str(tmp_path / "bt"),
        cwd=tmp_path,
        env={"COUNT_FILE": str(count)},
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "6 passed" in ran.stdout
    graded = sorted(count.read_text().split())
    assert graded == sorted(f"{n}-{i}" for n in ("one", "two") for i in range(3))
    bundles = sorted(p.name for p in (tmp_path / "bt" / "evalrun").iterdir() if p.is_dir())
    assert len(bundles) == 2 and bundles[0].endswith("one.eval.yaml"), bundles


def doc_example(doc: Path) -> tuple[str, str, str, str]:
    """The worked example of docs/pytest.md: the eval file (named by its first line), the
    command, and the output it shows."""
    text = doc.read_text()
    yaml = re.search(r"```yaml\n(.*?)```", text, re.S)
    command = re.search(r"```bash\n(.*?)```", text, re.S)
    output = re.search(r"```\n(.*?)```", text, re.S)
    assert yaml and command and output, f"{doc} lost its worked example"
    name = yaml.group(1).splitlines()[0].removeprefix("# ")
    return name, yaml.group(1), command.group(1).strip(), output.group(1)


def test_the_docs_worked_example_runs_as_written(tmp_path: Path) -> None:
    name, body, command, shown = doc_example(ROOT / "docs" / "pytest.md")
    (tmp_path / name).write_text(body)
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "pytest"], argv
    ran = pytest_run(*argv[3:], cwd=tmp_path)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    for line in shown.splitlines():
        if line.startswith(("case ", "  ", "FAILED ")):
            assert line in ran.stdout, (line, ran.stdout)
    assert shown.splitlines()[-1] in ran.stdout


def test_a_marked_test_is_graded_on_what_it_returns(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "pytest.md").read_text()
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found is not None, "docs/pytest.md lost its @evalrun.case example"
    name = found.group(1).splitlines()[0].removeprefix("# ")
    (tmp_path / name).write_text(found.group(1))
    ran = pytest_run("-rA", name, cwd=tmp_path)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert f"PASSED {name}::test_knows_paris" in ran.stdout
    assert f"FAILED {name}::test_knows_rome" in ran.stdout
    assert "icontains: 0.000 output lacks 'Rome'" in ran.stdout
    assert len(list((tmp_path / ".evalrun" / "runs").iterdir())) == 2


def test_the_readme_command_runs_in_this_checkout_with_its_own_pytest_config() -> None:
    """The README's ``pytest --evalrun`` line, from the checkout's root, where pyproject's
    ``addopts`` turn plugin autoloading off: the plugin must still be there."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0"]
        + ["--evalrun", "evals/quality.eval.yaml", "--evalrun-target", "quality-mock"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_DISABLE_PLUGIN_AUTOLOAD"},
    )
    assert done.returncode == 1, done.stdout + done.stderr  # off-topic-answer fails on purpose
    assert "1 failed, 2 passed" in done.stdout, done.stdout
