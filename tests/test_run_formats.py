"""``evalrun run --format``: the reports a run writes into its bundle, AgentV's result layout
among them (docs/reports.md, docs/results.md "AgentV's result layout")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evalrun
from evalrun.session import EvalError, RunSettings
from tests.conftest import run_cli

SUITE = """\
description: formats
graders: [{type: contains, value: Paris}]
tests:
  - {id: right, input: Capital of France, output: Paris.}
  - {id: wrong, input: Capital of France, output: Lyon.}
"""


def test_an_unknown_format_is_refused_naming_the_option() -> None:
    with pytest.raises(EvalError) as caught:
        RunSettings.checked(format=["md", "pdf"])
    assert "--format" in str(caught.value) and "agentv" in str(caught.value)
    assert RunSettings.checked().format == ["md", "html", "junit"]


def test_a_run_writes_agentvs_result_layout_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "capitals.eval.yaml"
    path.write_text(SUITE)
    outcome = evalrun.run(path, format=["agentv", "json"], out=tmp_path / "run", quiet=True)
    out = tmp_path / "run"
    assert outcome.exit_code == 1
    assert (out / "report.json").is_file()
    assert not (out / "report.md").exists()  # only what was asked for
    index = [json.loads(line) for line in (out / "index.jsonl").read_text().splitlines()]
    assert sorted((row["test_id"], row["score"]) for row in index) == [
        ("right", 1.0),
        ("wrong", 0.0),
    ]


@pytest.mark.slow  # a real process: 2-4 s
def test_the_command_line_takes_format_repeated(tmp_path: Path) -> None:
    path = tmp_path / "capitals.eval.yaml"
    path.write_text(SUITE)
    out = tmp_path / "run"
    done = run_cli(str(path), "--format", "agentv", "--format", "md", "-q", "--out", str(out))
    assert done.returncode == 1, done.stderr
    assert (out / "index.jsonl").is_file() and (out / "report.md").is_file()
    assert not (out / "report.html").exists()
    bad = run_cli(str(path), "--format", "pdf", "-q", "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and "--format" in bad.stderr
