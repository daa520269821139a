"""``tool_choice:`` of an eval file (docs/agents.md, "tool_choice"): set on the suite or a test
(the test's wins), sent with the tool loop's model calls (a forced call once, then ``auto``),
and refused before the run when the tools cannot take it. Each provider's wire form of it is
checked against the official SDKs in tests/test_targets_conformance.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from targets_helpers import Reply, Seen
from toolloop_helpers import chat_reply, grade_one, tool_call

from evalrun.runner.options import RunOptions
from evalrun.runner.plan import plan_run
from evalrun.runner.preflight import PreflightError
from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.targets import StoreOptions

NAMED = {"type": "function", "function": {"name": "lookup"}}
UNSET = object()


def model(seen: Seen) -> Reply:
    """Calls ``lookup`` once, then answers with its result."""
    last = seen.json()["messages"][-1]
    if last["role"] == "tool":
        return chat_reply({"role": "assistant", "content": f"it is {last['content']}"})
    return chat_reply(tool_call("c1", "lookup", {}))


def _eval(suite: str | None, test: str | None, tools: tuple[str, ...] = ("lookup",)) -> str:
    declared = "".join(f"  - {{name: {name}, result: blue}}\n" for name in tools)
    return (
        "target: gpt\n"
        + (f"tool_choice: {suite}\n" if suite else "")
        + (f"tools:\n{declared}" if tools else "")
        + "graders: [{type: contains, value: blue}]\n"
        + "tests:\n  - id: one\n    input: colour?\n"
        + (f"    tool_choice: {test}\n" if test else "")
    )


@pytest.mark.parametrize(
    ("suite", "test", "first", "then"),
    [
        (None, None, UNSET, UNSET),  # unset: the provider's default, no key sent
        ("auto", None, "auto", "auto"),
        ("none", None, "none", "none"),
        ("required", None, "required", "auto"),  # forced once, so it cannot loop
        ("{name: lookup}", None, NAMED, "auto"),
        ("auto", "required", "required", "auto"),  # the test's wins
        (None, "{type: function, function: {name: lookup}}", NAMED, "auto"),  # OpenAI's form
    ],
)
def test_the_choice_is_sent_with_the_loops_model_calls(
    tmp_path: Path, suite: str | None, test: str | None, first: Any, then: Any
) -> None:
    result, seen = grade_one(tmp_path, _eval(suite, test), model)
    assert (result.status, result.output) == ("passed", "it is blue")
    sent = [request.json().get("tool_choice", UNSET) for request in seen]
    assert sent == [first, then]


@pytest.mark.parametrize(
    ("suite", "test", "tools", "problem"),
    [
        (
            None,
            "{name: lookdown}",
            ("lookup", "other"),
            "t.eval.yaml:9: tests[0].tool_choice: tool_choice names 'lookdown', which is not "
            "offered (tools: lookup, other)",
        ),
        (
            "required",
            None,
            (),
            "t.eval.yaml:2: tool_choice: tool_choice is set, but no tools are offered",
        ),
    ],
)
def test_a_choice_the_tools_cannot_take_stops_the_run_before_it_starts(
    tmp_path: Path, suite: str | None, test: str | None, tools: tuple[str, ...], problem: str
) -> None:
    path = tmp_path / "t.eval.yaml"
    path.write_text(_eval(suite, test, tools))
    (tmp_path / "targets.yaml").write_text(
        "targets:\n  - {name: gpt, kind: openai, model: m, base_url: 'http://127.0.0.1:9'}\n"
    )
    options = RunOptions(out=tmp_path / "out", stores=StoreOptions(), quiet=True, sandbox="none")
    with pytest.raises(PreflightError) as caught:
        plan_run(load_eval(path), options)
    assert [p.replace(f"{tmp_path}/", "") for p in caught.value.problems] == [problem]


def test_an_unknown_mode_is_refused_where_the_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "t.eval.yaml"
    path.write_text(_eval("always", None))
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert "t.eval.yaml:2: tool_choice" in str(caught.value)
