"""evalrun against AgentV on AgentV's workspace examples, both run on one scripted agent (issue
#35; docs/agents.md, "AgentV's workspace examples side by side").

AgentV's results were recorded by ``bench/agentv_side_by_side.py record --set workspace`` with AgentV
built from source; CI has no bun, so this runs evalrun alone, on the corpus's copies of the
same files with the same scripted agent and loopback model, and compares case by case.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import agentv_side_by_side as side  # noqa: E402 (bench/ is not a package)
import agentv_side_workspace_agent as agent  # noqa: E402

DOC = ROOT / "docs" / "agents.md"


def documented_differences() -> set[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("#### Workspace cases that differ from AgentV", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.MULTILINE))


def test_the_scripted_agent_edits_its_workspace_and_hashes_both_checkouts_alike(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("x")
    prompt = 'Read <file: path="/one/checkout/AGENTS.md"> and go'
    answer, edit = agent.act(prompt, tmp_path)
    assert edit == {"file_path": agent.NOTES}
    assert (tmp_path / agent.NOTES).read_text() == "Files seen:\n- a.txt\n"
    assert answer.startswith('Read <file: path="AGENTS.md"> and go\nFiles: a.txt\n')
    other, _ = agent.act('Read <file: path="/another/AGENTS.md"> and go', tmp_path)
    assert other.rsplit("\n", 1)[1] == answer.rsplit("\n", 1)[1]  # the same mark


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> side.Comparison:
    return side.run_comparison(tmp_path_factory.mktemp("side-agents"), side.WORKSPACE_SET)


@pytest.mark.slow
def test_every_workspace_case_that_differs_from_agentv_is_documented(
    comparison: side.Comparison,
) -> None:
    assert len(comparison.agentv) >= 25  # the recording is there and whole
    # evalrun runs every file of the set, AgentV's refused and skipped ones too
    assert {case.file for case in comparison.evalrun} == set(side.WORKSPACE_FILES)
    differing = {d.agentv.key() for d in comparison.differences}
    assert differing == documented_differences(), comparison.report()


@pytest.mark.slow
def test_the_agents_edits_reach_both_tools_graders_alike(comparison: side.Comparison) -> None:
    """AgentV's own Python grader reads the diff of the scripted agent's edit: a score between
    0 and 1 that only the same diff gives, in both tools."""
    ours = {case.key(): case for case in comparison.evalrun}
    graded = [
        (theirs.scripts[name], ours[theirs.key()].scripts.get(name))
        for theirs in comparison.agentv
        if theirs.file == "examples/features/file-changes/evals/suite.yaml"
        for name in theirs.scripts
    ]
    assert len(graded) == 2
    assert all(0 < agentv < 1 and agentv == pytest.approx(mine) for agentv, mine in graded)
