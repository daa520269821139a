"""One grader written with the Python SDK, the JS SDK and sh + curl gives the same results."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT, read_bundle, run_cli


@pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("node", "curl", "jq")), reason="needs node, curl and jq"
)
def test_same_grader_in_three_languages_agrees_on_every_case(tmp_path):
    out = tmp_path / "run"
    result = run_cli(str(ROOT / "evals" / "polyglot" / "polyglot.eval.yaml"), "--out", str(out))
    assert result.returncode == 1, result.stderr  # two wrong answers fail by design
    cases, _ = read_bundle(out)
    assert len(cases) == 4
    for case in cases:
        graders = {g["name"]: g for g in case["graders"]}
        assert set(graders) == {"python", "javascript", "shell"}
        assert {g["status"] for g in graders.values()} <= {"passed", "failed"}, case
        assert len({g["score"] for g in graders.values()}) == 1, case
        assert len({g["reason"] for g in graders.values()}) == 1, case
        assert all(g["proxy"]["calls"] == 1 for g in graders.values())
    scores = {c["id"]: c["score"] for c in cases}
    assert scores == {
        "paris-right": 1.0,
        "paris-wrong": 0.0,
        "madrid-right": 1.0,
        "madrid-wrong": 0.0,
    }
