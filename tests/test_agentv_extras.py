"""The AgentV keys and kinds of issue #34 (docs/eval-files.md, "AgentV files"): they load onto
the models, the list checks score, and what evalrun cannot run errors with its reason."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalrun.launcher.deterministic import run_deterministic
from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.spec.models import GraderSpec
from tests.conftest import read_bundle, run_cli


def write(tmp_path: Path, body: str, name: str = "suite.eval.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


@pytest.mark.parametrize(
    ("type_", "value", "output", "passed"),
    [
        ("contains-all", ["Paris", "France"], "Paris is in France", True),
        ("contains-all", ["Paris", "France"], "Paris is nice", False),
        ("contains-any", ["Paris", "Lyon"], "Lyon it is", True),
        ("contains-any", ["Paris", "Lyon"], "paris", False),
        ("icontains-any", ["Paris", "Lyon"], "PARIS", True),
        ("icontains-all", ["paris", "FRANCE"], "Paris, France", True),
        ("icontains-all", ["paris", "FRANCE"], "Paris", False),
        ("starts-with", "Hello", "  Hello, Ada", True),
        ("starts-with", "Hello", "Well, Hello", False),
        ("ends-with", " done. ", "All done.\n", True),
        ("ends-with", ["yes", "no"], "maybe", False),
    ],
)
def test_list_checks_score_as_agentv_defines_them(
    type_: str, value: object, output: str, passed: bool
) -> None:
    result = run_deterministic(GraderSpec(type=type_, value=value), output)
    assert (result.status, result.score) == (("passed", 1.0) if passed else ("failed", 0.0))
    negated = run_deterministic(GraderSpec(type=type_, value=value, negate=True), output)
    assert negated.passed is not passed


@pytest.mark.parametrize(
    ("type_", "config"),
    [
        ("tool-trajectory", {"expected": []}),
        ("trajectory:tool-used", {"value": "search"}),
        ("execution-metrics", {"max_tool_calls": 1}),
        ("skill-trigger", {"skill": "deploy"}),
    ],
)
def test_agent_facing_graders_error_saying_they_need_a_transcript(
    type_: str, config: dict[str, object]
) -> None:
    result = run_deterministic(GraderSpec(type=type_, config=config), "any answer")
    assert result.status == "error"
    assert result.score is None
    assert "needs a transcript this target gives none of" in (result.reason or "")


AGENTV_FILE = """\
    name: suite-name
    version: 2
    tags: [smoke]
    governance: &gov {owner: qa}
    workspace: {template: ./ws, isolation: shared}
    extensions: [x]
    evaluate_options: {max_concurrency: 2}
    input:
      - role: system
        content: Be brief.
    target: mock
    tests:
      - id: one
        conversation_id: conv-1
        input: "Hello {{ env.AGENTV_EXTRAS_NAME }}"
        assertions:
          - Greets the user
          - {type: icontains-any, value: [hi, hello], required: true}
          - Is polite
          - type: rubrics
            criteria: [Is short, {id: r2, outcome: Is kind}]
          - {type: not-skill-used, value: deploy}
          - type: tool-trajectory
            mode: any_order
            expected: [{tool: search}]
          - {type: regex, value: "^hello", flags: i, required: 0.8}
          - type: composite
            aggregator: {type: weighted_average}
            assertions:
              - {metric: inner, type: llm-grader, prompt: file://judge.md, target: other}
      - id: two
        criteria: Says thanks.
        metadata: {<<: *gov, note: x}
"""


def test_agentv_suite_keys_and_graders_load(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTV_EXTRAS_NAME", "Ada")
    loaded = load_eval(write(tmp_path, AGENTV_FILE))
    spec = loaded.spec
    assert (spec.name, spec.version, spec.tags) == ("suite-name", 2, ["smoke"])
    # AgentV's workspace maps onto evalrun's (docs/agents.md, "AgentV's workspace keys")
    assert spec.workspace is not None
    assert spec.workspace.template == str((tmp_path / "ws").resolve())
    assert any("workspace.isolation: every case gets a fresh" in w for w in loaded.warnings)
    assert spec.governance == {"owner": "qa"}
    one, two = loaded.tests
    # the suite's input goes before the test's own; {{ env.X }} is filled
    assert [(m.role, m.text()) for m in one.input_messages] == [
        ("system", "Be brief."),
        ("user", "Hello Ada"),
    ]
    assert one.metadata == {"conversation_id": "conv-1"}
    graders = {g.name: g for g in one.graders}
    # the plain strings are one llm-rubric at the first one's place, weighted by their count
    assert one.graders[0].type == "llm-rubric"
    assert one.graders[0].config["rubric"] == ["Greets the user", "Is polite"]
    assert one.graders[0].weight == 2.0
    assert graders["icontains-any"].value == ["hi", "hello"]
    rubrics = [g for g in one.graders if g.config.get("rubric") == ["Is short", "Is kind"]]
    assert rubrics and rubrics[0].type == "llm-rubric"
    skill = graders["skill-used"]
    assert (skill.negate, skill.value, skill.config) == (True, "deploy", {})
    trajectory = graders["tool-trajectory"]
    assert trajectory.mode is None
    assert trajectory.config == {
        "mode": "any_order",
        "expected": [{"tool": "search"}],
        "rules": "agentv",  # AgentV's scoring (docs/agents.md)
    }
    regex = graders["regex"]
    assert (regex.value, regex.threshold) == ("(?i)^hello", 0.8)
    assert_set = graders["assert-set"]
    assert assert_set.config == {"aggregator": {"type": "weighted_average"}}
    inner = assert_set.graders[0]
    assert (inner.name, inner.type, inner.target) == ("inner", "llm-rubric", None)
    assert inner.config == {"prompt": "file://judge.md", "target": "other"}
    # a criteria-only test of an AgentV file is judged on its criteria
    assert [g.type for g in two.graders] == ["llm-rubric"]
    assert two.metadata == {"owner": "qa", "note": "x"}


def test_an_unset_env_var_in_a_test_is_an_error_at_its_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("AGENTV_EXTRAS_UNSET", raising=False)
    path = write(
        tmp_path,
        """\
        description: "{{ env.AGENTV_EXTRAS_UNSET }} is fine here"
        tests:
          - id: a
            input: "{{ env.AGENTV_EXTRAS_UNSET }}"
            graders: [{type: contains, value: x}]
          - id: b
            input: "{{ env.AGENTV_EXTRAS_UNSET | default('fallback') }}"
            graders: [{type: contains, value: x}]
        """,
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert str(caught.value) == (
        f"{path}:4: tests[0].input: environment variable AGENTV_EXTRAS_UNSET is not set "
        "({{ env.AGENTV_EXTRAS_UNSET }})"
    )


def test_prompt_md_among_input_files_is_the_input(tmp_path: Path) -> None:
    (tmp_path / "PROMPT.md").write_text("Summarize the data.")
    (tmp_path / "data.csv").write_text("a,b\n")
    path = write(
        tmp_path,
        """\
        name: shorthand
        tests:
          - id: a
            input_files: [PROMPT.md, data.csv]
            graders: [{type: contains, value: x}]
        """,
    )
    (case,) = load_eval(path).tests
    assert case.input == "Summarize the data."
    assert case.input_files == [str(tmp_path / "data.csv")]


def test_an_unsupported_key_still_names_file_line_and_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: x
        tests:
          - id: a
            input: hi
            assertions:
              - {type: tool-trajectory, mode: any_order}
              - {type: word-count, min: 3}
        """,
    )
    result = run_cli("validate", str(path), "--target", "mock")
    assert result.returncode == 2
    assert f"{path}:7: tests[0].graders[1].type: Value error, unknown grader type 'word-count'" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_a_run_says_plainly_what_it_cannot_grade(tmp_path: Path) -> None:
    """A trajectory grader without a transcript scores 0 as in AgentV, saying why, never a
    silent pass (multi-turn tests run: tests/test_conversation.py)."""
    path = write(
        tmp_path,
        """\
        name: cannot-run
        target: mock
        tests:
          - id: answer
            input: hi
            output: hello there
            assertions:
              - {type: starts-with, value: hello}
              - {type: trajectory:tool-used, value: search}
        """,
    )
    out = tmp_path / "out"
    result = run_cli(str(path), "--out", str(out), "-q")
    assert result.returncode != 0, result.stdout + result.stderr
    rows = {row["id"]: row for row in read_bundle(out)[0]}
    answer = rows["answer"]
    assert answer["status"] == "failed"
    graders = {g["name"]: g for g in answer["graders"]}
    assert graders["starts-with"]["status"] == "passed"
    assert graders["trajectory:tool-used"]["status"] == "failed"
    assert graders["trajectory:tool-used"]["score"] == 0
    assert "the case has no transcript" in graders["trajectory:tool-used"]["reason"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("name: x\ninput: 5\ntests: [{id: a, input: q, graders: [{type: is-json}]}]", ":2: input"),
        ("name: x\ngraders: 5\ntests: [{id: a, criteria: c}]", ":2: graders"),
        ("name: x\ntests: [{id: a, input: q, graders: 5}]", ":2: tests[0].graders"),
        (
            "name: x\ntests: [{id: a, input: q, assertions: [{type: rubrics, criteria: [3]}]}]",
            ":2: tests[0].graders[0].criteria[0]: a rubric item needs its text",
        ),
        (
            "name: x\ntests: [{id: a, input: q, turns: x, assertions: [{type: is-json}]}]",
            ":2: tests[0].turns",
        ),
        (
            "name: x\ntests: [{id: a, input: q, assertions: [{type: composite, assertions: 5}]}]",
            ":2: tests[0].graders[0].graders",
        ),
        ("name: x\ntests:\n  - id: a\n    <<: [1]\n", ":4: '<<' merges mappings only"),
    ],
)
def test_hostile_agentv_values_are_errors_at_their_key(
    tmp_path: Path, body: str, where: str
) -> None:
    path = tmp_path / "h.eval.yaml"
    path.write_text(body)
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert f"{path}{where}" in str(caught.value)


def test_a_banded_rubric_item_is_refused_at_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: x
        tests:
          - id: a
            input: q
            assertions:
              - type: rubrics
                criteria:
                  - Is short
                  - id: accuracy
                    score_ranges: {0: wrong, 10: right}
        """,
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert str(caught.value) == (
        f"{path}:9: tests[0].graders[0].criteria[1]: a rubric item scored in score_ranges "
        "bands is not supported by evalrun"
    )


def test_skip_defaults_gives_a_test_neither_suite_graders_nor_suite_input(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: x
        input: Be brief.
        assertions:
          - {type: contains, value: a}
        tests:
          - id: inherits
            input: q
            assertions:
              - {type: equals, value: b}
          - id: skips
            input: r
            execution: {skip_defaults: true}
            assertions:
              - {type: is_json, timeout: nope}
        """,
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)  # the lines still point at the test's own grader
    assert f"{path}:14: tests[1].graders[0].timeout" in str(caught.value)
    path.write_text(path.read_text().replace("value: b}", "value: b, timeout: x}"))
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)  # an inheriting test's own grader keeps its line
    assert f"{path}:9: tests[0].graders[1].timeout" in str(caught.value)
    path.write_text(path.read_text().replace(", timeout: nope", "").replace(", timeout: x", ""))
    loaded = load_eval(path)
    assert loaded.spec.graders == []
    inherits, skips = loaded.tests
    assert [g.type for g in inherits.graders] == ["contains", "equals"]
    assert [m.text() for m in inherits.input_messages] == ["Be brief.", "q"]
    assert [g.type for g in skips.graders] == ["is-json"]
    assert [m.text() for m in skips.input_messages] == ["r"]


def test_a_rubric_file_is_read_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "judge.md").write_text("Refuses the unsafe request.\n")
    body = """\
        name: x
        tests:
          - id: a
            input: q
            assertions:
              - {type: llm-rubric, prompt: "file://judge.md"}
        """
    (case,) = load_eval(write(tmp_path, body)).tests
    assert case.graders[0].config["rubric"] == ["Refuses the unsafe request."]
    path = write(tmp_path, body.replace("judge.md", "nope.md"))
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert str(caught.value).startswith(f"{path}:6: tests[0].graders[0]: rubric file nope.md: ")
