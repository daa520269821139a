"""Tools in a multi-turn test (docs/agents.md, "Tools in a conversation"): each turn's answer
may be a tool loop, the transcript keeps every step of every turn, a turn's graders see its
turn's steps and the conversation's graders every turn's; a loop that stops on turn k keeps
the steps and the cost of turns 1..k. A loopback fake model in OpenAI's wire format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from targets_helpers import Reply, Seen
from toolloop_helpers import chat_reply, grade_one, tool_call

from evalrun.results.models import CaseResult

EVAL = """\
target: gpt
max_turns: {max_turns}
tools:
  - name: lookup
    parameters: {{type: object, properties: {{n: {{type: integer}}}}, required: [n]}}
    results:
      - {{arguments: {{n: 1}}, result: one}}
      - {{arguments: {{n: 2}}, result: two}}
tests:
  - id: talk
    turns:
      - input: first
        graders:
          - {{type: tool-trajectory, config: {{mode: exact, expected: [{{tool: lookup, args: {{n: 1}}}}]}}}}
      - input: second
        graders: [{{type: contains, value: "turn 2 saw two"}}]
    graders:
      - type: tool-trajectory
        config:
          mode: exact
          expected: [{{tool: lookup, args: {{n: 1}}}}, {{tool: lookup, args: {{n: 2}}}}]
"""


def model(seen: Seen) -> Reply:
    """Asks ``lookup`` with the number of the user turn it answers, then answers with its
    result; on a user turn that says ``loop`` it keeps asking."""
    messages = seen.json()["messages"]
    turn = sum(1 for m in messages if m["role"] == "user")
    last = messages[-1]
    if last["role"] == "tool" and "loop" not in _last_user(messages):
        return chat_reply(
            {"role": "assistant", "content": f"turn {turn} saw {last['content']}"}, 10
        )
    return chat_reply(tool_call(f"c{len(messages)}", "lookup", {"n": turn}), 10)


def _last_user(messages: list[dict[str, Any]]) -> str:
    return next(str(m["content"]) for m in reversed(messages) if m["role"] == "user")


def _steps(result: CaseResult) -> list[tuple[str, str | None, list[Any]]]:
    assert result.transcript is not None
    return [
        (s["role"], s["text"], [(c["name"], c["arguments"], c["result"]) for c in s["tool_calls"]])
        for s in result.transcript["steps"]
    ]


def test_each_turn_runs_a_tool_loop_and_graders_see_every_turn(tmp_path: Path) -> None:
    result, seen = grade_one(tmp_path, EVAL.format(max_turns=4), model)
    assert all(
        [t["function"]["name"] for t in request.json()["tools"]] == ["lookup"] for request in seen
    )
    assert len(seen) == 4  # two model calls a turn
    assert _steps(result) == [
        ("user", "first", []),
        ("assistant", None, [("lookup", {"n": 1}, "one")]),
        ("assistant", "turn 1 saw one", []),
        ("user", "second", []),
        ("assistant", None, [("lookup", {"n": 2}, "two")]),
        ("assistant", "turn 2 saw two", []),
    ]
    graders = [(g.name, g.status, g.score) for g in result.graders]
    # turn 1's trajectory is its own call only; the conversation's holds both turns' calls
    assert graders == [
        ("turn-1", "passed", 1.0),
        ("turn-2", "passed", 1.0),
        ("conversation", "passed", 1.0),
    ]
    assert (result.status, result.output) == ("passed", "turn 2 saw two")
    assert result.usage.target is not None and result.usage.target.input == 40


def test_a_tool_loop_that_stops_on_turn_two_keeps_every_step_and_its_cost(
    tmp_path: Path,
) -> None:
    text = EVAL.format(max_turns=3).replace("input: second", "input: second, loop")
    result, seen = grade_one(tmp_path, text, model)
    assert len(seen) == 5  # turn 1's two calls, then turn 2's three, all asking for tools
    assert result.status == "error" and result.error is not None
    assert result.error.startswith("target 'gpt' failed on turn 2: the tool loop reached max_turns")
    steps = _steps(result)
    assert steps[:4] == [
        ("user", "first", []),
        ("assistant", None, [("lookup", {"n": 1}, "one")]),
        ("assistant", "turn 1 saw one", []),
        ("user", "second, loop", []),
    ]
    assert [s[2][0][0] for s in steps[4:]] == ["lookup"] * 3  # the stopped loop's three steps
    assert [g.name for g in result.graders] == ["turn-1"]  # turn 1 keeps its grade
    assert result.usage.target is not None and result.usage.target.input == 50  # 5 calls
