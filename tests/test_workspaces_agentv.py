"""AgentV's ``file-changes`` example (tests/data/agentv_corpus/, both commits: ``workspace:`` in
4.x, ``environment:`` now) runs as it is against a scripted agent that makes the edits AgentV's
mock agent makes, and its ``file_changes`` grader (AgentV's own script) scores what AgentV
recorded for it (``*.baseline.jsonl`` beside the suite)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import evalrun
from evalrun.spec.loader import load_eval

CORPUS = Path(__file__).parent / "data" / "agentv_corpus"
SUITES = {
    "58f316ca2": ("suite.yaml", "suite.baseline.jsonl"),
    "14bca459e": ("dataset.eval.yaml", "dataset.eval.baseline.jsonl"),
}

#: the edits of AgentV's mock agent in that example: two files edited, two made, one deleted
MOCK_AGENT = """\
import json, pathlib, sys
sys.stdin.read()
pathlib.Path("hello.txt").write_text("Hello, AgentV!\\nUpdated by the agent.\\n")
pathlib.Path("config.json").write_text('{ "version": 2, "debug": true }\\n')
pathlib.Path("src").mkdir(exist_ok=True)
pathlib.Path("tests").mkdir(exist_ok=True)
pathlib.Path("src/utils.ts").write_text("export const isEmpty = (s: string) => s.length === 0;\\n")
pathlib.Path("tests/main.test.ts").write_text('import { greet } from "../src/main";\\n')
pathlib.Path("obsolete.log").unlink()
print(json.dumps({"type": "final", "text": "Done: edited 2 files, created 2 files, deleted 1 file."}))
"""


@pytest.mark.slow  # two real runs (~7 s each on a loaded machine)
@pytest.mark.parametrize("commit", sorted(SUITES))
def test_agentvs_file_changes_example_scores_as_agentv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: str
) -> None:
    suite_name, baseline_name = SUITES[commit]
    evals = CORPUS / commit / "examples" / "features" / "file-changes" / "evals"
    # the example's grader runs under uv; a stand-in runs the script with python, as uv would
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "uv").write_text(f'#!/bin/sh\n[ "$1" = run ] && shift\nexec {sys.executable} "$@"\n')
    (shims / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "agent.py").write_text(MOCK_AGENT)
    (tmp_path / "targets.yaml").write_text(
        "targets:\n"
        "  - name: mock_agent\n    kind: cli\n    transcript: jsonl\n"
        f"    command: [{sys.executable}, {tmp_path / 'agent.py'}]\n"
        "  - name: judge\n    kind: mock\n"
        '    default: \'{"pass": true, "score": 1, "reason": "the diff shows it"}\'\n'
    )
    loaded = load_eval(evals / suite_name)
    assert loaded.spec.workspace is not None and loaded.warnings == []
    out = tmp_path / "out"
    evalrun.run(
        evals / suite_name,
        target="mock_agent",
        judge="judge",
        targets=tmp_path / "targets.yaml",
        out=out,
        quiet=True,
    )
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    baseline = [json.loads(line) for line in (evals / baseline_name).read_text().splitlines()]
    expected = {
        (row["test_id"], score["name"]): score["score"]
        for row in baseline
        for score in row["scores"]
        if score["type"] in ("script", "code-grader")
    }
    got = {
        (result["id"], grader["name"]): grader["score"]
        for result in results
        for grader in result["graders"]
        if (result["id"], grader["name"]) in expected
    }
    assert len(expected) == 2
    assert got == expected, [r["graders"] for r in results]
    assert all(result["status"] == "passed" for result in results)
