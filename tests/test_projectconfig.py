"""Project config (docs/config.md): [tool.evalrun] / evalrun.toml found walking up, .env,
EVALRUN_* variables, their precedence under real `evalrun` processes, and several eval files
per command."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from evalrun.projectconfig import ProjectConfigError, project_defaults, read_dotenv
from tests.conftest import ROOT, run_cli

EVAL = """\
description: {name}
graders:
  - type: icontains
    value: Paris
tests:
  - id: {name}-case
    input: capital of France?
    output: {answer}
"""


def write_eval(folder: Path, name: str, answer: str = "Paris") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.eval.yaml"
    path.write_text(EVAL.format(name=name, answer=answer))
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any EVALRUN_ variable of the caller's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALRUN_")}
    return {**env, **extra}


def repeat_of(bundle: Path) -> int:
    return int(json.loads((bundle / "summary.json").read_text())["repeat"])


# --- loading, in process --------------------------------------------------------------------


def test_the_layers_stack_env_over_dotenv_over_config(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.evalrun]\nworkers = 2\nrepeat = 2\nthreshold = 0.5\nout = "bundles/x"\n'
    )
    (tmp_path / ".env").write_text("EVALRUN_REPEAT=3\nEVALRUN_WORKERS=3\nOTHER=from-dotenv\n")
    environ = {"EVALRUN_WORKERS": "4", "OTHER": "real"}
    found = project_defaults(tmp_path, environ)
    values = found.values()
    assert values["workers"] == 4  # the environment beats .env
    assert values["repeat"] == 3  # .env beats the config file
    assert values["threshold"] == 0.5  # the config file beats the default
    assert values["out"] == tmp_path / "bundles/x"  # read from the config file's folder
    assert found.settings["workers"].source == "environment"
    assert environ["OTHER"] == "real"  # .env never overrides a real variable


def test_the_config_is_found_walking_up_and_evalrun_toml_comes_first(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.evalrun]\nworkers = 2\n")
    inner = tmp_path / "pkg"
    (inner / "deep").mkdir(parents=True)
    (inner / "pyproject.toml").write_text('[project]\nname = "no-evalrun-table"\n')
    found = project_defaults(inner / "deep", {})
    assert found.config_file == tmp_path / "pyproject.toml"  # a pyproject without it is passed
    (inner / "evalrun.toml").write_text('workers = 5\nevals = ["evals"]\n')
    found = project_defaults(inner / "deep", {})
    assert found.config_file == inner / "evalrun.toml"
    assert found.values()["workers"] == 5
    assert found.evals == [inner / "evals"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "[tool.evalrun]\nwrkers = 2\n",
            "pyproject.toml [tool.evalrun]: wrkers: not an option of evalrun run "
            "(did you mean 'workers'?)",
        ),
        (
            "[tool.evalrun]\nworkers = 0\n",
            "pyproject.toml [tool.evalrun]: workers: Input should be greater than or equal to 1",
        ),
        ('[tool.evalrun]\nsandbox = "box"\n', "[tool.evalrun]: sandbox: Input should be"),
        ("[tool.evalrun]\nevals = 3\n", "evals: a list of eval files or folders"),
        ("[tool.evalrun\n", "pyproject.toml: not valid TOML: "),
    ],
)
def test_a_bad_config_names_the_file_and_key(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "pyproject.toml").write_text(content)
    with pytest.raises(ProjectConfigError) as caught:
        project_defaults(tmp_path, {})
    assert message in str(caught.value)
    assert str(tmp_path) in str(caught.value)


def test_a_bad_variable_names_it(tmp_path: Path) -> None:
    with pytest.raises(ProjectConfigError, match=r"^EVALRUN_WORKERS: .*integer.*'many'"):
        project_defaults(tmp_path, {"EVALRUN_WORKERS": "many"})
    (tmp_path / ".env").write_text("EVALRUN_REPEAT=-1\n")
    with pytest.raises(ProjectConfigError, match=r"\.env: EVALRUN_REPEAT: .*greater than"):
        project_defaults(tmp_path, {})


def test_dotenv_lines(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("# a comment\n\nexport A=1\nB='two words'\nC=\"x # y\"\nD=plain # note\nE=\n")
    assert read_dotenv(dotenv) == {"A": "1", "B": "two words", "C": "x # y", "D": "plain", "E": ""}
    dotenv.write_text("A=1\nnot a line\n")
    with pytest.raises(ProjectConfigError, match=r"\.env:2: expected NAME=VALUE"):
        read_dotenv(dotenv)


def test_list_options_split_on_commas_and_an_empty_variable_is_unset(tmp_path: Path) -> None:
    found = project_defaults(tmp_path, {"EVALRUN_FILTER": "fr-*, de-*", "EVALRUN_TARGET": ""})
    assert found.values() == {"filter": ["fr-*", "de-*"]}


# --- real processes -------------------------------------------------------------------------


def test_env_beats_dotenv_beats_config_in_a_real_run(tmp_path: Path) -> None:
    """One `evalrun` process with every layer set, each option at a different height; -v says
    where each default came from (the full ladder, one process per rung, is the slow test)."""
    write_eval(tmp_path / "evals", "capitals")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.evalrun]\nevals = ["evals"]\nrepeat = 2\nthreshold = 0.25\n'
    )
    (tmp_path / ".env").write_text("EVALRUN_REPEAT=3\nEVALRUN_THRESHOLD=0.5\n")
    work = tmp_path / "sub"
    work.mkdir()
    env = clean_env(EVALRUN_REPEAT="4", EVALRUN_MAX_ERRORS="2")
    flags = ("-v", "-q", "--max-errors", "3", "--out", str(tmp_path / "o"))
    done = run_cli("run", *flags, cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "o" / "capitals" / "summary.json").read_text())
    assert summary["max_errors"] == 3  # the flag over the environment
    assert summary["repeat"] == 4  # environment over .env over config
    assert summary["threshold"] == 0.5  # .env over config
    assert f"config: {tmp_path / 'pyproject.toml'}" in done.stderr
    assert "default --repeat 4 from environment" in done.stderr


@pytest.mark.slow
def test_precedence_ladder_with_real_processes(tmp_path: Path) -> None:
    """flag > env > .env > config > default, one `evalrun` process per rung."""
    eval_file = write_eval(tmp_path, "capitals")
    bundles = tmp_path / "bundles"

    def repeat_given(*flags: str, **variables: str) -> int:
        out = bundles / str(len(list(bundles.glob("*"))) if bundles.exists() else 0)
        done = run_cli(
            str(eval_file),
            "-q",
            "--out",
            str(out),
            *flags,
            cwd=tmp_path,
            env=clean_env(**variables),
        )
        assert done.returncode == 0, done.stderr
        return repeat_of(out)

    assert repeat_given() == 1  # the default
    (tmp_path / "evalrun.toml").write_text("repeat = 2\n")
    assert repeat_given() == 2
    (tmp_path / ".env").write_text("EVALRUN_REPEAT=3\n")
    assert repeat_given() == 3
    assert repeat_given(EVALRUN_REPEAT="4") == 4
    assert repeat_given("--repeat", "5", EVALRUN_REPEAT="4") == 5


def test_a_bad_config_is_exit_2_before_anything_runs(tmp_path: Path) -> None:
    write_eval(tmp_path, "capitals")
    (tmp_path / "evalrun.toml").write_text("repeat = 'often'\n")
    done = run_cli("capitals.eval.yaml", cwd=tmp_path, env=clean_env())
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {tmp_path / 'evalrun.toml'}: repeat: ")
    assert not (tmp_path / ".evalrun" / "runs").exists()
    helped = run_cli("run", "--help", cwd=tmp_path, env=clean_env())
    assert helped.returncode == 0, helped.stderr  # the help that would mend it still shows
    assert "--workers" in helped.stdout


GRADER = """\
import json, os, sys
json.load(sys.stdin)
seen = sorted(f"{n}={v}" for n, v in os.environ.items() if n.startswith("DOTENV_"))
print(json.dumps({"score": 1.0, "reason": " ".join(seen)}))
"""


def test_dotenv_reaches_graders_only_through_the_scrubbing_rules(tmp_path: Path) -> None:
    (tmp_path / "grader.py").write_text(GRADER)
    (tmp_path / "env.eval.yaml").write_text(
        "graders:\n"
        f"  - name: env\n    command: [{json.dumps(sys.executable)}, grader.py]\n"
        "tests:\n  - id: one\n    input: hi\n    output: hello\n"
    )
    (tmp_path / ".env").write_text(
        "DOTENV_PLAIN=visible\nDOTENV_API_KEY=s3cr3t-from-dotenv\nDOTENV_REAL=from-dotenv\n"
    )
    out = tmp_path / "out"
    env = clean_env(DOTENV_REAL="real")
    done = run_cli("env.eval.yaml", "-q", "--out", str(out), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    # the key is scrubbed, and the real variable kept its value
    assert result["graders"][0]["reason"] == "DOTENV_PLAIN=visible DOTENV_REAL=real"
    for file in out.rglob("*"):
        if file.is_file():
            assert "s3cr3t-from-dotenv" not in file.read_text(errors="replace"), file


def test_a_folder_runs_each_file_and_exits_with_the_worst(tmp_path: Path) -> None:
    write_eval(tmp_path / "evals", "good")
    write_eval(tmp_path / "evals", "bad", answer="Lyon")  # fails its grader: exit 1
    (tmp_path / "evals" / "broken.eval.yaml").write_text("tests: [\n")  # exit 2, nothing ran
    out = tmp_path / "out"
    done = run_cli("evals", "-q", "--out", str(out), cwd=tmp_path, env=clean_env())
    assert done.returncode == 2, done.stderr  # usage beats a failed gate (docs/config.md)
    combined = json.loads((out / "combined-summary.json").read_text())
    codes = {Path(row["eval"]).name: row["exit_code"] for row in combined["evals"]}
    assert codes == {"bad.eval.yaml": 1, "broken.eval.yaml": 2, "good.eval.yaml": 0}
    assert combined["exit_code"] == 2
    # the broken file lost nothing of the others: each has its bundle and result
    assert (out / "good" / "results.jsonl").read_text().count("\n") == 1
    assert (out / "bad" / "results.jsonl").read_text().count("\n") == 1
    assert "broken.eval.yaml" in done.stderr
    # the same --out again: refused before anything runs, the first combined summary kept
    before = (out / "combined-summary.json").read_text()
    again = run_cli("evals", "-q", "--out", str(out), cwd=tmp_path, env=clean_env())
    assert again.returncode == 2 and "not a new or empty folder" in again.stderr
    assert (out / "combined-summary.json").read_text() == before


def test_no_file_and_no_evals_key_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("run", cwd=tmp_path, env=clean_env())
    assert done.returncode == 2
    assert "no eval file" in done.stderr


def test_the_docs_example_runs(tmp_path: Path) -> None:
    """docs/config.md's [tool.evalrun] example, in a copy of the example eval's folder: `evalrun
    run` from a subfolder runs it on the mock judge into runs/ and exits 1 (one case fails on
    purpose)."""
    doc = (ROOT / "docs" / "config.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.S)
    assert example is not None
    (tmp_path / "pyproject.toml").write_text(example.group(1))
    (tmp_path / "evals").mkdir()
    for name in ("contextual-precision.eval.yaml", "targets.yaml"):
        shutil.copy(ROOT / "evals" / name, tmp_path / "evals" / name)
    (tmp_path / "deep").mkdir()
    done = run_cli("run", "-q", cwd=tmp_path / "deep", env=clean_env())
    assert done.returncode == 1, done.stderr
    (bundle,) = (tmp_path / "runs").glob("*-contextual-precision")
    summary = json.loads((bundle / "summary.json").read_text())
    assert (summary["target"], summary["counts"]["failed"]) == ("mock", 1)


def test_the_docs_name_every_run_option_as_a_key() -> None:
    """docs/config.md's list of keys is RunSettings' fields, spelled as the flags."""
    from evalrun.session import RunSettings

    doc = (ROOT / "docs" / "config.md").read_text()
    keys_bullet = doc.split("- **Keys**", 1)[1].split("\n- **", 1)[0]
    named = set(re.findall(r"`([a-z-]+)`", keys_bullet))
    expected = {name.replace("_", "-") for name in RunSettings.model_fields} | {"evals"}
    assert named == expected
