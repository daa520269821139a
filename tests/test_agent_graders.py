"""The graders of an agent's run (docs/agents.md): execution-metrics, skill-used, skill-trigger
as checks on the transcript, and AgentV's own example files run against scripted agents with
the scores AgentV recorded for its mock agent on the same runs."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evalrun.launcher.deterministic import run_deterministic
from evalrun.results.models import GraderOutcome
from evalrun.spec.models import GraderSpec
from evalrun.transcripts import Step, ToolCall, Transcript, read_transcript

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "transcripts"
AGENT = ROOT / "tests" / "scripted_agent.py"
METRICS_AGENT = DATA / "agentv-metrics-agent"
CORPUS = ROOT / "tests" / "data" / "agentv_corpus" / "58f316ca2" / "examples" / "features"


def claude(name: str) -> Transcript:
    return read_transcript("claude-code", (DATA / name).read_text())


def grade(grader: dict[str, Any], transcript: Transcript | None) -> GraderOutcome:
    spec = GraderSpec.model_validate(grader)
    return run_deterministic(spec, transcript.answer if transcript else "answer", transcript)


def refused(grader: dict[str, Any], message: str) -> None:
    """Options a check cannot read are refused when the file loads; a spec built around
    validation still gets an error result from the check, never a score."""
    with pytest.raises(ValidationError) as caught:
        GraderSpec.model_validate(grader)
    assert f"Value error, {message}" in str(caught.value)
    unchecked = GraderSpec.model_construct(**{"config": {}, "value": None, "negate": False,
                                              "name": grader["type"], **grader})  # fmt: skip
    result = run_deterministic(unchecked, "done", SKILL_RUN)
    assert result.status == "error" and result.reason.startswith(message), result.reason


def test_a_file_with_options_a_check_cannot_read_names_its_line(tmp_path: Path) -> None:
    from evalrun.spec.loader import EvalFileError, load_eval

    path = tmp_path / "agent.eval.yaml"
    path.write_text(
        "tests:\n  - id: a\n    input: hi\n    graders:\n      - type: contains\n"
        "        value: x\n      - type: execution-metrics\n        max_tokens: lots\n"
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert str(caught.value).startswith(
        f"{path}:7: tests[0].graders[1]: Value error, execution-metrics: max_tokens must be a "
        "number >= 0, got 'lots'"
    )


# --- execution-metrics ---------------------------------------------------------------------


def test_metrics_of_the_recorded_claude_run() -> None:
    """claude-code.jsonl: 3 calls (Read, Edit, Bash), 4 model turns, 5628 tokens, $0.04213,
    14210 ms; Read is the one read-only tool, so the exploration ratio is 1/3."""
    t = claude("claude-code.jsonl")
    result = grade(
        {
            "type": "execution-metrics",
            "config": {
                "max_tool_calls": 3,
                "max_llm_calls": 3,
                "max_tokens": 6000,
                "max_cost_usd": 0.04,
                "max_duration_ms": 20000,
                "target_exploration_ratio": 0.3,
                "exploration_tolerance": 0.05,
            },
        },
        t,
    )
    assert [c["pass"] for c in result.checks] == [True, False, True, False, True, True]
    assert result.score == pytest.approx(4 / 6)
    assert result.status == "passed"  # 0.67 >= the default threshold 0.5
    assert result.checks[1]["text"] == "model turns 4 > 3"
    assert result.checks[3]["text"] == "cost $0.0421 > $0.0400"
    assert result.misses == ["model turns 4 > 3", "cost $0.0421 > $0.0400"]


def test_a_figure_the_agent_did_not_report_fails_its_limit() -> None:
    """Codex reports no cost or duration: those limits fail, they are never skipped."""
    t = read_transcript("codex", (DATA / "codex.jsonl").read_text())
    result = grade(
        {"type": "execution-metrics", "config": {"max_cost_usd": 1, "max_duration_ms": 1e9}}, t
    )
    assert result.score == 0 and result.status == "failed"
    assert result.reason == "cost: not reported; duration: not reported"
    empty = Transcript("jsonl", "done")
    ratio = grade({"type": "execution-metrics", "config": {"target_exploration_ratio": 0}}, empty)
    assert ratio.score == 0 and "no tool calls" in ratio.reason


def test_negated_metrics_score_one_minus_the_share() -> None:
    t = claude("claude-code.jsonl")
    config = {"max_tool_calls": 10, "max_llm_calls": 1, "maxTokens": 1}  # AgentV's camelCase too
    plain = grade({"type": "execution-metrics", "config": config}, t)
    negated = grade({"type": "execution-metrics", "negate": True, "config": config}, t)
    assert plain.score == pytest.approx(1 / 3) and plain.status == "failed"
    assert negated.score == pytest.approx(2 / 3) and negated.status == "passed"
    assert negated.reason.startswith("not (tool calls 3 <= 10")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "execution-metrics: set at least one of max_tool_calls"),
        ({"exploration_tolerance": 0.1}, "execution-metrics: set at least one of"),
        ({"max_tokens": -1}, "execution-metrics: max_tokens must be a number >= 0, got -1"),
        ({"max_cost_usd": "cheap"}, "execution-metrics: max_cost_usd must be a number >= 0"),
        ({"max_tool_calls": True}, "execution-metrics: max_tool_calls must be a number >= 0"),
    ],
)
def test_metrics_config_it_cannot_read_is_refused(config: dict[str, Any], message: str) -> None:
    refused({"type": "execution-metrics", "config": config}, message)


def test_agentv_trajectory_assertions_without_a_transcript_score_zero() -> None:
    """AgentV scores a trajectory assertion 0 when the run left no trace; an AgentV file's
    trajectory graders do the same (``no_transcript: fail``, set by the loader), evalrun's own
    are errors."""
    for negate in (False, True):
        grader = {
            "type": "trajectory:step-count",
            "negate": negate,
            "config": {"value": {"max": 3}},
        }
        assert grade(grader, None).status == "error"
        grader["config"]["no_transcript"] = "fail"
        result = grade(grader, None)
        assert (result.status, result.score) == ("failed", 0.0), result.reason
        assert "no trace data for trajectory:step-count" in result.reason
    with pytest.raises(ValidationError, match="tool-used: no_transcript must be error or fail"):
        GraderSpec.model_validate(
            {"type": "trajectory:tool-used", "config": {"value": "a", "no_transcript": "pass"}}
        )


def test_agent_checks_without_a_transcript_are_errors() -> None:
    for grader in (
        {"type": "execution-metrics", "config": {"max_tool_calls": 1}},
        {"type": "skill-used", "value": "x"},
        {"type": "skill-trigger", "config": {"skill": "x"}},
    ):
        result = grade(grader, None)
        assert result.status == "error" and "needs the agent's transcript" in result.reason


# --- skill-used / skill-trigger ------------------------------------------------------------


def run_of(*calls: ToolCall) -> Transcript:
    return Transcript("jsonl", "done", [Step("assistant", None, list(calls))])


SKILL_RUN = run_of(
    ToolCall("Skill", {"skill": "csv-analyzer"}, result="Launching skill: csv-analyzer"),
    ToolCall("Read", {"file_path": "/w/.claude/skills/acme-deploy/SKILL.md"}, result="# Deploy"),
    ToolCall("Read", {"file_path": "/w/.claude/skills/acme-deploy/SKILL.md"}, result="# Deploy"),
    ToolCall("Bash", {"command": "cat /w/skills/pdf-tools/SKILL.md"}, result="# PDF"),
    ToolCall("Skill", {"skill": "broken"}, is_error=True),
    ToolCall("Glob", {"pattern": "**/*.md"}, result="notes/skills/review-kit/SKILL.md\nREADME.md"),
)


@pytest.mark.parametrize(
    ("grader", "passed"),
    [
        ({"value": "csv-analyzer"}, True),
        ({"value": ["csv-analyzer", "acme-deploy", "review-kit"]}, True),
        ({"value": ["csv-analyzer", "web-search"]}, False),
        ({"value": "broken"}, False),  # a failed call is no use
        ({"value": "csv-analyzer", "negate": True}, False),
        ({"value": ["web-search", "broken"], "negate": True}, True),
        # a list is forbidden when any of it was used, not only when all of it was
        ({"value": ["web-search", "csv-analyzer"], "negate": True}, False),
        ({"config": {"value": {"name": "acme-deploy", "max": 1}}}, True),  # one path, read twice
        # a Bash command's path counts as the whole word and as the skills/ path inside it
        ({"config": {"value": {"name": "pdf-tools", "min": 2, "max": 2}}}, True),
        ({"config": {"value": {"pattern": "ACME-*"}}}, True),  # a glob, ignoring case
        ({"config": {"value": {"pattern": "*", "min": 6}}}, True),
        ({"config": {"value": {"pattern": "*", "min": 7}}}, False),
        ({"config": {"value": {"name": "web-search", "max": 0}}, "negate": True}, True),
        ({"config": {"value": {"name": "csv-analyzer"}}, "negate": True}, False),
    ],
)
def test_skill_used(grader: dict[str, Any], passed: bool) -> None:
    result = grade({"type": "skill-used", **grader}, SKILL_RUN)
    assert result.status == ("passed" if passed else "failed"), result.reason
    assert result.score == (1.0 if passed else 0.0)


def test_skill_used_names_what_it_saw() -> None:
    result = grade({"type": "skill-used", "value": "web-search"}, SKILL_RUN)
    assert result.reason.startswith("did not use web-search; skills used: csv-analyzer (tool), ")
    assert "acme-deploy (path, /w/.claude/skills/acme-deploy/SKILL.md)" in result.reason


@pytest.mark.parametrize(
    ("config", "passed"),
    [
        ({"skill": "csv-analyzer"}, True),
        ({"skill": "csv-analyzer", "should_trigger": True}, True),
        ({"skill": "csv-analyzer", "should_trigger": False}, False),
        ({"skill": "web-search", "should_trigger": False}, True),
        ({"skill": "web-search"}, False),
    ],
)
def test_skill_trigger_is_skill_used_by_another_name(config: dict[str, Any], passed: bool) -> None:
    result = grade({"type": "skill-trigger", "config": config}, SKILL_RUN)
    assert result.status == ("passed" if passed else "failed"), result.reason


@pytest.mark.parametrize(
    ("grader", "message"),
    [
        ({"type": "skill-used"}, "skill-used: value must be a skill name"),
        (
            {"type": "skill-used", "config": {"value": {"min": 1}}},
            "skill-used: an object value needs",
        ),
        (
            {"type": "skill-used", "config": {"value": {"name": "a", "min": 2, "max": 1}}},
            "skill-used: max must not be less than min",
        ),
        (
            {"type": "skill-used", "config": {"value": {"name": "a", "min": -1}}},
            "skill-used: min must be a whole number >= 0",
        ),
        (
            {"type": "skill-used", "negate": True, "config": {"value": {"name": "a", "min": 1}}},
            "not-skill-used: an object value takes no bounds but max: 0",
        ),
        ({"type": "skill-trigger", "config": {}}, "skill-trigger: needs skill"),
    ],
)
def test_skill_config_it_cannot_read_is_refused(grader: dict[str, Any], message: str) -> None:
    refused(grader, message)


# --- AgentV's example files against scripted agents ----------------------------------------


def _run_agentv_file(
    tmp_path: Path, eval_file: Path, agent: Path, target: str, *filters: str
) -> tuple[int, dict[str, dict[str, Any]], str]:
    """Run one of AgentV's files as it is, its target a scripted agent speaking Claude Code's
    stream, its judge a mock that passes every rubric item."""
    judge_reply = json.dumps({"pass": True, "score": 1, "reason": "ok"})
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "targets.yaml").write_text(
        textwrap.dedent(
            f"""
            targets:
              - name: {target}
                kind: cli
                command: [{json.dumps(sys.executable)}, {json.dumps(str(AGENT))}, {json.dumps(str(agent))}]
                transcript: claude-code
                max_retries: 0
              - name: judge
                kind: mock
                default: {json.dumps(judge_reply)}
            """
        )
    )
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "evalrun", "run", str(eval_file), "--targets",
            str(tmp_path / "targets.yaml"), "--target", target, "--judge", "judge",
            "--out", str(out), "--no-cache", "-q"]  # fmt: skip
    for pattern in filters:
        argv += ["--filter", pattern]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = (out / "results.jsonl").read_text().splitlines() if out.exists() else []
    cases = {case["id"]: case for case in map(json.loads, lines)}
    return proc.returncode, cases, proc.stdout + proc.stderr


def _figures(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]


@pytest.mark.slow
def test_agentv_execution_metrics_example_scores_as_agentv(tmp_path: Path) -> None:
    """AgentV's examples/features/execution-metrics suite, its mock agent's runs recorded as
    Claude Code streams: every execution-metrics grader has AgentV's score (its
    suite.baseline.jsonl), and each assertion the same verdict on the same figures."""
    suite = CORPUS / "execution-metrics" / "evals" / "suite.yaml"
    baseline = [
        json.loads(line)
        for line in (METRICS_AGENT / "suite.baseline.jsonl").read_text().splitlines()
    ]
    # hybrid-evaluation's other grader runs `bun`, which this machine need not have
    wanted = [b["test_id"] for b in baseline if b["test_id"] != "hybrid-evaluation"]
    _, cases, log = _run_agentv_file(tmp_path, suite, METRICS_AGENT, "mock_metrics_agent", *wanted)
    assert sorted(cases) == sorted(wanted), log
    compared = 0
    for line in baseline:
        if line["test_id"] not in cases:
            continue
        ours = {g["name"]: g for g in cases[line["test_id"]]["graders"]}
        for theirs in line["scores"]:
            if theirs["type"] != "execution-metrics":
                continue
            grader = ours[theirs["name"]]
            assert grader["score"] == theirs["score"], (line["test_id"], grader)
            assert len(grader["checks"]) == len(theirs["assertions"])
            for check, assertion in zip(grader["checks"], theirs["assertions"], strict=True):
                expected = _figures(assertion["text"])  # ours may add the tolerance after them
                assert _figures(check["text"])[: len(expected)] == expected, (check, assertion)
                assert check["pass"] == assertion["passed"]
            compared += 1
    assert compared == 5


@pytest.mark.slow
def test_agentv_skill_example_runs_against_a_scripted_agent(tmp_path: Path) -> None:
    """AgentV's agent-skills-evals/csv-analyzer.EVAL.yaml: the agent that loads the skill for
    the CSV question passes skill-used, and not-skill-used passes on the question about the
    time; the same file against an agent that reads the skill for both fails not-skill-used."""
    eval_file = CORPUS / "agent-skills-evals" / "csv-analyzer.EVAL.yaml"
    agent = tmp_path / "agent"
    agent.mkdir()
    skill_call = {"type": "tool_use", "id": "toolu_01", "name": "Skill",
                  "input": {"skill": "csv-analyzer"}}  # fmt: skip
    read_call = {"type": "tool_use", "id": "toolu_02", "name": "Read",
                 "input": {"file_path": "/w/.agents/skills/csv-analyzer/SKILL.md"}}  # fmt: skip

    def recording(name: str, answer: str, *calls: dict[str, Any]) -> None:
        events = [
            {"type": "assistant", "message": {"role": "assistant", "content": [*calls]}},
            {"type": "result", "subtype": "success", "is_error": False, "result": answer},
        ]
        (agent / name).write_text("".join(json.dumps(e) + "\n" for e in events))

    recording("csv.jsonl", "Top months by weighted revenue (seasonal factor applied): ...",
              skill_call)  # fmt: skip
    recording("clock.jsonl", "I cannot read a clock.")
    recording("clock-reads-skill.jsonl", "I cannot read a clock.", read_call)
    (agent / "routes.json").write_text(json.dumps([["csv", "csv.jsonl"], ["", "clock.jsonl"]]))
    _, cases, log = _run_agentv_file(tmp_path / "a", eval_file, agent, "claude")
    by_case = {cid: {g["name"]: g for g in c["graders"]} for cid, c in cases.items()}
    # AgentV's names for unnamed assertions (docs/eval-files.md, "Grader names")
    assert by_case["csv-top-months"]["skill-used-csv-analyzer"]["score"] == 1, log
    assert by_case["irrelevant-query"]["not-skill-used-csv-analyzer"]["score"] == 1
    assert cases["irrelevant-query"]["status"] == "passed"

    (agent / "routes.json").write_text(
        json.dumps([["csv", "csv.jsonl"], ["", "clock-reads-skill.jsonl"]])
    )
    _, cases, log = _run_agentv_file(tmp_path / "b", eval_file, agent, "claude")
    (grader,) = cases["irrelevant-query"]["graders"]
    assert grader["score"] == 0 and grader["status"] == "failed", log
    assert grader["reason"].startswith("used csv-analyzer; skills used: csv-analyzer (path, ")


# --- the worked example of docs/agents.md ---------------------------------------------------


@pytest.mark.slow
def test_the_worked_example_of_the_docs(tmp_path: Path) -> None:
    """docs/agents.md, "A worked example": its three files written as the page shows them (the
    target's ``python`` made this interpreter), run, and every grader as the page's table says."""
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    example = text[text.index("### A worked example") :]
    example = example.split("\n## ", 1)[0]  # the section, not the ones after it
    blocks = re.findall(r"```(?:json|yaml)\n(.*?)```", example, re.S)
    run_jsonl, targets, eval_file = blocks
    (tmp_path / "run.jsonl").write_text(run_jsonl)
    (tmp_path / "targets.yaml").write_text(
        targets.replace("[python, -c,", f"[{json.dumps(sys.executable)}, -c,")
    )
    (tmp_path / "agent.eval.yaml").write_text(eval_file)
    proc = subprocess.run(
        [sys.executable, "-m", "evalrun", "run", "agent.eval.yaml", "--out", "out", "-q",
         "--no-cache"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (case,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    assert case["status"] == "passed"
    table = example[example.index("| grader | status |") :].splitlines()[2:]
    rows = itertools.takewhile(lambda line: line.startswith("|"), table)
    documented = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    actual = [[g["name"], g["status"], f"{g['score']:g}", g["reason"]] for g in case["graders"]]
    assert actual == documented


# --- AgentV's trajectory assertions ---------------------------------------------------------

TOOL_RUN = run_of(
    ToolCall("knowledgeSearch", {"query": "REST"}),
    ToolCall("shell", {"command": ["ls", "-la"]}),  # a command, not a tool
    ToolCall("knowledgeSearch", '{"query": "GraphQL", "page": 2}'),  # JSON text is read
    ToolCall("get_weather", {"location": "Paris", "units": "metric", "trace_id": "x1"}),
    ToolCall("flag", {"on": True}),
)


@pytest.mark.parametrize(
    ("type_", "value", "negate", "passed"),
    [
        ("trajectory:tool-used", "knowledgeSearch", False, True),
        ("trajectory:tool-used", "KNOWLEDGE*", False, True),  # a glob, ignoring case
        ("trajectory:tool-used", "shell", False, False),  # commands are not tools
        ("trajectory:tool-used", ["knowledgeSearch", "get_weather"], False, True),
        ("trajectory:tool-used", ["knowledgeSearch", "writeFile"], False, False),
        ("trajectory:tool-used", ["writeFile", "deleteFile"], True, True),
        ("trajectory:tool-used", ["writeFile", "get_weather"], True, False),
        ("trajectory:tool-used", {"name": "knowledgeSearch", "min": 2}, False, True),
        ("trajectory:tool-used", {"name": "knowledgeSearch", "min": 3}, False, False),
        ("trajectory:tool-used", {"name": "knowledgeSearch", "max": 1}, False, False),
        ("trajectory:tool-used", {"pattern": "get_*", "max": 1}, False, True),
        ("trajectory:tool-used", {"name": "knowledgeSearch", "max": 1}, True, True),
        ("trajectory:tool-sequence", ["knowledgeSearch", "get_weather"], False, True),
        ("trajectory:tool-sequence", ["get_weather", "knowledgeSearch"], False, False),
        ("trajectory:tool-sequence", {"mode": "exact", "steps": ["knowledgeSearch", "get_weather"]}, False, False),
        ("trajectory:tool-sequence", {"mode": "exact", "steps": ["knowledgeSearch", "knowledgeSearch", "get_weather", "flag"]}, False, True),
        ("trajectory:tool-sequence", {"mode": "in_order", "steps": ["get_weather", "knowledgeSearch"]}, True, True),
        ("trajectory:tool-args-match", {"name": "knowledgeSearch", "args": {"query": "GraphQL"}}, False, True),
        ("trajectory:tool-args-match", {"name": "knowledgeSearch", "args": {"query": "GraphQL"}, "mode": "exact"}, False, False),
        ("trajectory:tool-args-match", {"name": "get_weather", "args": {"location": "Paris"}, "mode": "exact", "defaults": {"units": "metric"}, "ignore": "trace_*"}, False, True),
        ("trajectory:tool-args-match", {"name": "get_weather", "args": {"location": "Rome"}}, False, False),
        ("trajectory:tool-args-match", {"name": "get_weather", "args": {"location": "Rome"}}, True, True),
        ("trajectory:tool-args-match", {"name": "flag", "args": {"on": 1}}, False, False),  # true is not 1
        # the run's steps: 2 messages (the calls' step, the answer) and final_response, 4 tools,
        # 1 command, no tool results (spans)
        ("trajectory:step-count", {"type": "tool", "min": 4, "max": 4}, False, True),
        ("trajectory:step-count", {"type": "tool", "max": 3}, False, False),
        ("trajectory:step-count", {"type": "tool", "max": 3}, True, True),
        ("trajectory:step-count", {"type": "command", "min": 1, "max": 1}, False, True),
        ("trajectory:step-count", {"type": "command", "pattern": "ls*", "min": 1}, False, True),
        ("trajectory:step-count", {"type": ["tool", "command"], "min": 5, "max": 5}, False, True),
        ("trajectory:step-count", {"pattern": "knowledge*", "min": 2, "max": 2}, False, True),
        ("trajectory:step-count", {"type": "message", "min": 3, "max": 3}, False, True),
        ("trajectory:step-count", {"name": "final_response", "max": 0}, False, False),
        ("trajectory:step-count", {"type": "span", "max": 0}, False, True),
        ("trajectory:step-count", {"max": 8}, False, True),
        ("trajectory:step-count", {"max": 7}, False, False),
    ],
)  # fmt: skip
def test_trajectory_assertions(type_: str, value: Any, negate: bool, passed: bool) -> None:
    result = grade({"type": type_, "negate": negate, "config": {"value": value}}, TOOL_RUN)
    assert result.status == ("passed" if passed else "failed"), result.reason
    assert result.score == (1.0 if passed else 0.0)


@pytest.mark.parametrize(
    ("type_", "value", "message"),
    [
        ("trajectory:tool-used", 3, "trajectory:tool-used: value must be a tool name"),
        ("trajectory:tool-used", {"min": 1}, "trajectory:tool-used: an object value must be"),
        ("trajectory:tool-sequence", {"steps": []}, "trajectory:tool-sequence: name at least one"),
        ("trajectory:tool-sequence", [{"min": 1}], "trajectory:tool-sequence: step 1 must be"),
        ("trajectory:tool-args-match", {"name": "a"}, "trajectory:tool-args-match: value needs args"),
        ("trajectory:tool-args-match", {"name": "a", "args": {}, "mode": "fuzzy"}, "trajectory:tool-args-match: mode must be"),
        ("trajectory:step-count", "tool", "trajectory:step-count: value must be"),
        ("trajectory:step-count", {"type": "tool"}, "trajectory:step-count: give min or max"),
        ("trajectory:step-count", {"type": "robot", "min": 1}, "trajectory:step-count: type must be one of"),
        ("trajectory:step-count", {"max": -1}, "trajectory:step-count: max must be a number >= 0"),
    ],
)  # fmt: skip
def test_trajectory_assertion_config_it_cannot_read(type_: str, value: Any, message: str) -> None:
    refused({"type": type_, "config": {"value": value}}, message)


#: AgentV's examples/features/trajectory-assertions-simple/evals/suite.yaml, each case's
#: trajectory graders in order, scored by AgentV's rules (its trajectory grader) on its mock
#: agent's runs. (The suite.baseline.jsonl beside it was recorded by an older AgentV that
#: grouped a test's assertions into one proportional score, so it is not compared.)
TRAJECTORY_SCORES = {
    "any-order-pass": [1, 1],
    "in-order-pass": [1],
    "exact-auth-flow": [1],
    "metrics-check": [1, 1],
    "partial-match": [1, 1, 0],
    "exact-args-match": [1, 1, 1],
    "skip-args-validation": [1, 1],
    "superset-mode": [1, 1],
    "subset-mode": [1],
    "mixed-args-match": [1],
    "field-list-match": [1, 0],  # fetchData was called with endpoint, not source
}


@pytest.mark.slow
def test_agentv_trajectory_example_runs_against_a_scripted_agent(tmp_path: Path) -> None:
    suite = CORPUS / "trajectory-assertions-simple" / "evals" / "suite.yaml"
    agent = DATA / "agentv-trajectory-agent"
    _, cases, log = _run_agentv_file(tmp_path, suite, agent, "mock_agent")
    assert sorted(cases) == sorted(TRAJECTORY_SCORES), log
    for case_id, expected in TRAJECTORY_SCORES.items():
        graders = [g for g in cases[case_id]["graders"] if g["name"] != "llm-rubric"]
        assert [g["score"] for g in graders] == expected, (case_id, graders)


#: AgentV's results for examples/features/tool-trajectory-simple (commit 14bca459e), from its
#: evals/dataset.eval.baseline.jsonl: each test's tool-trajectory score. Its mock agent is the
#: trajectory-assertions-simple one recorded above (the two differ only in comments).
TOOL_TRAJECTORY_BASELINE = {
    "any-order-pass": 1.0,
    "in-order-pass": 1.0,
    "exact-auth-flow": 1.0,
    "metrics-check": 1.0,
    "partial-match": 2 / 3,
    "exact-args-match": 1.0,
    "skip-args-validation": 1.0,
}


@pytest.mark.slow
def test_agentv_tool_trajectory_example_scores_as_agentv(tmp_path: Path) -> None:
    """AgentV's tool-trajectory-simple suite, as it is, against its mock agent's recorded runs:
    every tool-trajectory grader has the score AgentV recorded (rules: agentv)."""
    suite = CORPUS.parents[2] / "14bca459e/examples/features/tool-trajectory-simple/evals"
    agent = DATA / "agentv-trajectory-agent"
    # the baseline has the suite's first seven tests (the later four were added after it)
    wanted = list(TOOL_TRAJECTORY_BASELINE)
    file = suite / "dataset.eval.yaml"
    _, cases, log = _run_agentv_file(tmp_path, file, agent, "mock_agent", *wanted)
    assert sorted(cases) == sorted(wanted), log
    for case_id, score in TOOL_TRAJECTORY_BASELINE.items():
        (grader,) = [g for g in cases[case_id]["graders"] if g["name"] != "llm-rubric"]
        assert grader["score"] == pytest.approx(score), (case_id, grader)


# --- AgentV's trajectory graders in a real run ----------------------------------------------

GOAL_FILE = """\
name: goal
target: agent
judge: judge
tests:
  - id: fix
    input: Fix add() in calc.py and run the tests.
    assert:
      - type: trajectory:goal-success
        value: {goal: The tests pass after the fix}
      - type: trajectory:step-count
        value: {type: tool, max: 2}
      - type: tool-trajectory
        mode: in_order
        args_match: superset
        expected:
          - {tool: read, args: {path: calc.py}}
          - {tool: bash}
  - id: plain
    input: hi
    output: hello
    assert:
      - type: trajectory:step-count
        value: {type: tool, max: 3}
"""


@pytest.mark.slow
def test_agentv_trajectory_graders_in_a_real_run(tmp_path: Path) -> None:
    """An AgentV file (current format) against a pi agent's recorded run and a mock judge:
    goal-success asks the judge through the proxy, step-count and tool-trajectory (AgentV's
    spellings) read the transcript, and a case without one scores 0 as in AgentV."""
    run = tmp_path / "run.jsonl"
    run.write_text((DATA / "pi.jsonl").read_text())
    reply = json.dumps({"pass": True, "score": 1, "reason": "the tests ran and passed"})
    printer = f"import sys; sys.stdin.read(); print(open({str(run)!r}).read())"
    (tmp_path / "targets.yaml").write_text(
        json.dumps(
            {
                "targets": [
                    {"name": "agent", "kind": "cli", "command": [sys.executable, "-c", printer],
                     "transcript": "pi"},
                    {"name": "judge", "kind": "mock", "default": reply},
                ]
            }
        )
    )  # fmt: skip
    (tmp_path / "goal.eval.yaml").write_text(GOAL_FILE)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "evalrun", "goal.eval.yaml", "--out", str(out), "-q"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr  # the plain case fails
    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    fix = {g["name"]: g for g in rows["fix"]["graders"]}
    assert fix["trajectory:goal-success"]["score"] == 1
    assert fix["trajectory:goal-success"]["reason"] == "the tests ran and passed"
    step_count = fix["trajectory:step-count"]
    assert (step_count["status"], step_count["reason"]) == (
        "failed",
        "3 step(s) for type=tool, wanted at most 2",
    )
    assert fix["tool-trajectory"]["status"] == "passed"
    (plain,) = rows["plain"]["graders"]
    assert (plain["status"], plain["score"]) == ("failed", 0)
    assert "the case has no transcript" in plain["reason"]
