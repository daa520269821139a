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
    ]
    mine = [
        side.CaseOutcome("f.yaml", "a", True, 1.0, ""),
        side.CaseOutcome("f.yaml", "b", False, 0.75, ""),
    ]
    differences = side.compare(theirs, mine)
    assert [(d.agentv.id, d.evalrun) for d in differences] == [("b", mine[1]), ("c", None)]


def documented_differences() -> set[tuple[str, str]]:
    """The cases docs/eval-files.md lists as differing from AgentV, as (file, test id)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Cases that differ from AgentV", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.MULTILINE))


@pytest.mark.slow
def test_evalrun_agrees_with_recorded_agentv_results(tmp_path: Path) -> None:
    agentv, differences = side.run_comparison(tmp_path)
    assert len(agentv) >= 100  # the recording is there and whole
    agree = len(agentv) - len(differences)
    assert agree >= side.BAR * len(agentv), side.report(agentv, differences)
    # every case that still differs is documented with its reason, and no other
    assert {d.agentv.key() for d in differences} == documented_differences(), side.report(
        agentv, differences
    )
