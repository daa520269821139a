"""AgentV's agent examples (trajectory, transcript, skill) against AgentV's own scores, grader by
grader (issue #35; docs/agents.md, "AgentV's agent examples side by side").

AgentV ran each example with its own scripted agent and the results were recorded by
``bench/agentv_side_by_side.py record --set agents`` (``tests/data/agentv_side/<commit>/agents/``);
here evalrun runs the same files with ``bench/agentv_side_replay_agent.py``, a ``cli`` target printing
the same recorded runs in Claude Code's or Copilot's stream format.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from evalrun.spec.agentv_names import assertion_name
from evalrun.transcripts import read_transcript

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import agentv_side_by_side as side  # noqa: E402 (bench/ is not a package)
import agentv_side_replay_agent as agent  # noqa: E402

DOC = ROOT / "docs" / "agents.md"
SHOWCASE = side.CORPUS / "examples" / "showcase" / "trace-evaluation"


@pytest.mark.parametrize(
    ("kind", "value", "name"),
    [
        ("skill-used", "csv-analyzer", "skill-used-csv-analyzer"),
        ("not-skill-used", ["a", "b"], "not-skill-used-2"),
        ("contains", "Baikal", "contains-Baikal"),
        ("icontains-any", ["x", "y", "z"], "icontains-any-3"),
        ("regex", "a" * 40, "regex-" + "a" * 30),
        ("equals", 7, "equals"),
        ("trajectory:tool-used", {"name": "search"}, "trajectory:tool-used"),
        ("not-contains", "x", "not-contains"),
    ],
)
def test_unnamed_assertions_take_agentvs_names(kind: str, value: object, name: str) -> None:
    assert assertion_name(kind, value) == name


def _replayed(emit: str) -> list[str]:
    run = agent.read_fixtures(
        SHOWCASE / "fixtures" / "replay-target-output.jsonl", "inspect-and-fix-config"
    )
    return [json.dumps(event) for event in agent.EMITTERS[emit](run)]


@pytest.mark.parametrize("emit", sorted(agent.EMITTERS))
def test_the_scripted_agent_prints_what_the_readers_read_back(emit: str) -> None:
    """The recorded run comes back through evalrun's reader of that agent's stream: the same
    calls in order, arguments and results, the answer, and the totals the format carries."""
    transcript = read_transcript(emit, "\n".join(_replayed(emit)))
    calls = [call for step in transcript.steps for call in step.tool_calls]
    assert [call.name for call in calls] == ["Read", "Grep", "Edit"]
    assert calls[0].arguments == {"path": "package.json"}
    assert json.loads(calls[2].result or "") == {
        "changed": True,
        "diff": "- timeoutMs: 0\n+ timeoutMs: 5000",
    }
    assert transcript.answer.startswith("Updated src/config.ts")
    assert transcript.usage is not None
    assert transcript.usage.to_dict() == {"input": 912, "output": 246, "cached": 128}
    assert transcript.duration_ms == 980
    assert transcript.cost_usd == (0.0042 if emit == "claude-code" else None)


def test_the_scripted_agent_picks_the_run_by_the_tests_input() -> None:
    eval_file = SHOWCASE / "evals" / "coding-agent-replay.eval.yaml"
    prompt = "Fix the retry limit bug in the config module. If a file path is wrong, recover and continue."
    assert agent.pick_test(eval_file, f"system\n\n{prompt}") == "recover-from-tool-error"
    with pytest.raises(SystemExit, match="matches 0 tests"):
        agent.pick_test(eval_file, "something else")


def test_a_grader_that_differs_is_named_even_when_the_case_agrees() -> None:
    theirs = [side.CaseOutcome("f", "a", False, 0.5, "", graders={"x": 1.0, "y": 0.0})]
    same = [side.CaseOutcome("f", "a", False, 0.5, "", graders={"x": 1.0, "y": 0.0})]
    swapped = [side.CaseOutcome("f", "a", False, 0.5, "", graders={"x": 0.0, "y": 1.0})]
    renamed = [side.CaseOutcome("f", "a", False, 0.5, "", graders={"x": 1.0, "z": 0.0})]
    assert side.grader_differences(theirs, same) == []
    assert side.grader_differences(theirs, swapped) == [
        "f a x: agentv 1.0 evalrun 0.0",
        "f a y: agentv 0.0 evalrun 1.0",
    ]
    assert side.grader_differences(theirs, renamed) == ["f a y: agentv 0.0 evalrun missing"]


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split("### AgentV's agent examples side by side", 1)[1].split("\n## ", 1)[0]


def documented_differences() -> set[tuple[str, str]]:
    """The cases docs/agents.md lists as differing from AgentV, as (file, test id)."""
    return set(re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", _section(), re.MULTILINE))


def documented_agreement() -> dict[str, tuple[int, int, int, int]]:
    """Each example's figures in docs/agents.md (rows that give them): cases agreeing and
    recorded, graders agreeing and recorded."""
    rows = re.findall(
        r"^\| `([^`]+)` \| yes \| yes \| (\d+) of (\d+)[^|]*\| (\d+) of (\d+) \|",
        _section(),
        re.MULTILINE,
    )
    return {file: tuple(int(n) for n in figures) for file, *figures in rows}  # type: ignore[misc]


def rubrics_tests(file: str) -> set[tuple[str, str]]:
    """The tests of ``file`` with a ``type: rubrics`` grader, which AgentV's current version
    skips (docs/agents.md)."""
    document = yaml.safe_load((side.CORPUS / file).read_text(encoding="utf-8"))
    return {
        (file, str(test["id"]))
        for test in document.get("tests") or []
        if any(isinstance(a, dict) and a.get("type") == "rubrics" for a in test.get("assert") or [])
    }


def test_the_docs_list_differences_and_figures() -> None:
    assert len(documented_differences()) == 5
    assert set(documented_agreement()) <= set(side.AGENT_SET.files())


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> side.Comparison:
    return side.run_comparison(tmp_path_factory.mktemp("agents"), side.AGENT_SET)


@pytest.mark.slow
def test_every_agent_example_validates(tmp_path: Path) -> None:
    found = side.validations(tmp_path, side.AGENT_SET)
    assert len(found) == len(side.AGENT_SET.files())
    assert all(isinstance(result, str) and ": ok (" in result for result in found.values()), found


@pytest.mark.slow
def test_every_agent_example_case_that_differs_is_documented(comparison: side.Comparison) -> None:
    assert len(comparison.agentv) >= 26  # the recording is there and whole
    differing = {d.agentv.key() for d in comparison.differences}
    assert differing == documented_differences(), comparison.report()


@pytest.mark.slow
def test_the_docs_figures_are_the_comparisons(comparison: side.Comparison) -> None:
    differing = {d.agentv.key() for d in comparison.differences}
    figures = documented_agreement()
    assert len(figures) == len(side.AGENT_SET.files()) - 1  # one file AgentV ran no case of
    for file, documented in figures.items():
        cases = [case for case in comparison.agentv if case.file == file]
        graders = sum(len(case.graders) for case in cases)
        differing_graders = side.grader_differences(cases, comparison.evalrun)
        found = (
            sum(case.key() not in differing for case in cases),
            len(cases),
            graders - len(differing_graders),
            graders,
        )
        assert found == documented, file


@pytest.mark.slow
def test_the_cases_only_evalrun_ran_are_agentvs_skipped_rubrics_tests(
    comparison: side.Comparison,
) -> None:
    theirs = {case.key() for case in comparison.agentv}
    only_ours = {case.key() for case in comparison.evalrun if case.key() not in theirs}
    expected = set().union(*(rubrics_tests(f) for f in side.AGENT_SET.files()))
    assert only_ours == expected
    assert len(expected) == 17


@pytest.mark.slow
def test_every_grader_of_an_agreeing_case_scores_as_under_agentv(
    comparison: side.Comparison,
) -> None:
    documented = documented_differences()
    agreeing = [case for case in comparison.agentv if case.key() not in documented]
    assert sum(len(case.graders) for case in agreeing) >= 60  # every grader of every case
    assert side.grader_differences(agreeing, comparison.evalrun) == []
