"""evalrun against AgentV's own results on AgentV's own eval files (issue #34; docs/eval-files.md,
"Side by side with AgentV").

AgentV's per-case results were recorded by ``bench/agentv_side_by_side.py record`` with AgentV
built from source (``tests/data/agentv_side/``); CI has no bun, so this test runs only evalrun,
on the same files and the same loopback model, and compares case by case.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import agentv_side_by_side as side  # noqa: E402 (bench/ is not a package)
import agentv_side_model as model  # noqa: E402

DOC = ROOT / "docs" / "eval-files.md"
#: Script graders whose score under evalrun differs from AgentV's (each is also a documented
#: case difference, docs/eval-files.md).
DOCUMENTED_SCRIPT_DIFFERENCES = {
    "examples/contract/evals/script-grader-contract.eval.yaml script-grader-stdin-payload "
    "script-grader-payload-contract: agentv 0 evalrun 0.875",
}


def test_the_loopback_model_answers_both_roles_from_the_text_alone() -> None:
    """The answer depends on the input only, and the verdict on the marks in the prompt: so
    both tools get the same answer and the same verdict for the same case."""
    asked = [{"role": "system", "content": "x"}, {"role": "user", "content": "What is 2+2?"}]
    answer = model.target_answer(asked)
    assert answer == model.target_answer([{"role": "user", "content": "What is 2+2?"}])
    answers = [model.target_answer([{"role": "user", "content": f"q{n}"}]) for n in range(8)]
    assert any(a.endswith(model.GOOD_MARK) for a in answers)  # both halves occur
    assert any(a.endswith(model.BAD_MARK) for a in answers)
    good = model.judge_verdict([{"role": "user", "content": f"answer: ok {model.GOOD_MARK}"}])
    bad = model.judge_verdict([{"role": "user", "content": f"answer: {model.BAD_MARK}"}])
    assert '"pass": true' in good and '"pass": false' in bad


def test_the_comparison_counts_a_lost_case_and_a_score_difference() -> None:
    theirs = [
        side.CaseOutcome("f.yaml", "a", True, 1.0, ""),
        side.CaseOutcome("f.yaml", "b", False, 0.5, ""),
        side.CaseOutcome("f.yaml", "c", False, 0.0, ""),
        side.CaseOutcome("f.yaml", "d", False, 0.0, "execution_error: no repo"),
        side.CaseOutcome("f.yaml", "e", False, 0.0, "quality_failure: x=0"),
    ]
    mine = [
        side.CaseOutcome("f.yaml", "a", True, 1.0, ""),
        side.CaseOutcome("f.yaml", "b", False, 0.75, ""),
        side.CaseOutcome("f.yaml", "d", False, None, "error: "),  # neither could run it
        side.CaseOutcome("f.yaml", "e", False, None, "error: "),  # AgentV ran it: differs
    ]
    differences = side.compare(theirs, mine)
    assert [(d.agentv.id, d.evalrun) for d in differences] == [
        ("b", mine[1]),
        ("c", None),
        ("e", mine[3]),
    ]


def documented_differences() -> set[tuple[str, str]]:
    """The cases docs/eval-files.md lists as differing from AgentV, as (file, test id)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Cases that differ from AgentV", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.MULTILINE))


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> side.Comparison:
    return side.run_comparison(tmp_path_factory.mktemp("side"))


@pytest.mark.slow
def test_every_case_that_differs_from_agentv_is_documented(comparison: side.Comparison) -> None:
    assert len(comparison.agentv) >= 200  # the recording is there and whole
    assert len(comparison.evalrun) >= 200  # and evalrun ran its files
    differing = {d.agentv.key() for d in comparison.differences}
    assert differing == documented_differences(), comparison.report()


@pytest.mark.slow
def test_agentvs_script_graders_score_as_under_agentv(comparison: side.Comparison) -> None:
    """AgentV's Python and TypeScript graders (the TypeScript ones replayed from the
    recording) give evalrun the scores they gave AgentV."""
    compared, differing = side.script_grader_differences(comparison.agentv, comparison.evalrun)
    assert compared >= 20
    assert set(differing) == DOCUMENTED_SCRIPT_DIFFERENCES, comparison.report()


@pytest.mark.slow
def test_evalrun_agrees_with_agentv_on_95_percent_of_cases(comparison: side.Comparison) -> None:
    assert comparison.meets_bar(), comparison.report()
