"""Multi-turn tests (docs/agents.md, "Multi-turn conversations"): the target is asked turn by
turn with the conversation so far, over real loopback HTTP; every turn lands in the transcript
and is graded; a target error mid-conversation keeps the turns before it; cache and cassette
hold per turn; AgentV's multi-turn examples run and score by AgentV's turn aggregation."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import evalrun
from evalrun.reporters import write_reports
from evalrun.runner.conversation import aggregate, conversation_text
from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.spec.models import Message
from tests.conftest import ROOT, read_bundle
from tests.targets_helpers import FakeServer, Reply, Seen, openai_error, openai_reply

CORPUS = Path(__file__).parent / "data" / "agentv_corpus"

#: The fake model's replies, by the last user message it is sent.
REPLIES = {
    "My name is Ada.": "Nice to meet you, Ada.",
    "What is my name?": "Your name is Ada.",
    "Spell it backwards.": "adA",
}


def chat_model(seen: Seen) -> Reply:
    """An OpenAI chat model that answers the last user message; 'boom' is a bad request."""
    last = seen.json()["messages"][-1]["content"]
    if last == "boom":
        return openai_error(400, "the fake refuses this turn", "invalid_request_error")
    return openai_reply(REPLIES.get(last, "I do not follow."), prompt_tokens=7, completion_tokens=2)


def write_eval(
    folder: Path, port: int, turns: list[dict[str, Any]] | None, judge_port: int = 0, **extra: Any
) -> Path:
    """``chat.eval.yaml``: one test, asking the fake chat model on ``port``; with
    ``judge_port``, the judge is another fake."""
    (folder / "targets.yaml").write_text(
        textwrap.dedent(
            f"""\
            targets:
              - {{name: bot, kind: openai, model: fake-chat, base_url: "http://127.0.0.1:{port}/v1",
                  api_key_env: FAKE_CHAT_KEY, max_retries: 0}}
              - {{name: sim, kind: openai, model: fake-judge, base_url: "http://127.0.0.1:{judge_port}/v1",
                  api_key_env: FAKE_CHAT_KEY, max_retries: 0}}
            """
        )
    )
    path = folder / "chat.eval.yaml"
    test = {"id": "ada", "input": [{"role": "system", "content": "Be brief."}], "turns": turns}
    test = {k: v for k, v in {**test, **extra}.items() if v is not None}
    path.write_text(json.dumps({"target": "bot", "judge": "sim", "tests": [test]}))
    return path


def turn(text: str, kind: str, value: str) -> dict[str, Any]:
    return {"input": text, "graders": [{"type": kind, "value": value}]}


THREE_TURNS = [
    turn("My name is Ada.", "icontains", "ada"),
    turn("What is my name?", "contains", "Ada"),
    turn("Spell it backwards.", "equals", "adA"),
]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CHAT_KEY", "sk-fake")


def run(path: Path, out: Path, **options: Any) -> tuple[evalrun.RunOutcome, dict[str, Any]]:
    outcome = evalrun.run(path, out=str(out), quiet=True, **options)
    rows, _ = read_bundle(out)
    assert len(rows) == 1
    return outcome, rows[0]


def said(row: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """The transcript's steps without their timings."""
    return [(s["role"], s["text"], s["usage"]) for s in row["transcript"]["steps"]]


def test_each_turn_is_sent_with_the_conversation_so_far(tmp_path: Path, key: None) -> None:
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, THREE_TURNS)
        outcome, row = run(path, tmp_path / "out", no_cache=True)
    sent = [s.json()["messages"] for s in server.seen]
    assert sent == [
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "My name is Ada."},
        ],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "My name is Ada."},
            {"role": "assistant", "content": "Nice to meet you, Ada."},
            {"role": "user", "content": "What is my name?"},
        ],
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "My name is Ada."},
            {"role": "assistant", "content": "Nice to meet you, Ada."},
            {"role": "user", "content": "What is my name?"},
            {"role": "assistant", "content": "Your name is Ada."},
            {"role": "user", "content": "Spell it backwards."},
        ],
    ]
    assert outcome.exit_code == 0 and row["status"] == "passed" and row["score"] == 1.0
    assert [g["name"] for g in row["graders"]] == ["turn-1", "turn-2", "turn-3"]
    assert [g["checks"][0]["text"] for g in row["graders"]] == [
        "turn-1/icontains",
        "turn-2/contains",
        "turn-3/equals",
    ]
    transcript = row["transcript"]
    assert transcript["format"] == "conversation"
    assert [(s["role"], s["text"]) for s in transcript["steps"]] == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
        ("assistant", "Your name is Ada."),
        ("user", "Spell it backwards."),
        ("assistant", "adA"),
    ]
    assert transcript["usage"] == {"input": 21, "output": 6}
    assert row["output"] == "adA"
    assert row["usage"]["target"]["input"] == 21


def test_window_size_sends_the_system_prompt_and_the_last_turns(tmp_path: Path, key: None) -> None:
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, THREE_TURNS, window_size=1)
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert server.seen[2].json()["messages"] == [  # the last 2 messages, as AgentV cuts them
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Your name is Ada."},
        {"role": "user", "content": "Spell it backwards."},
    ]
    assert len(row["transcript"]["steps"]) == 6  # the transcript keeps every turn


def test_a_failing_turn_fails_the_case_and_the_score_follows_the_aggregation(
    tmp_path: Path, key: None
) -> None:
    turns = [*THREE_TURNS[:2], turn("Spell it backwards.", "equals", "Ada")]  # turn 3 fails
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, turns, aggregation="min")
        outcome, row = run(path, tmp_path / "out", no_cache=True)
    assert [g["status"] for g in row["graders"]] == ["passed", "passed", "failed"]
    assert (row["status"], row["score"]) == ("failed", 0.0)
    assert outcome.exit_code == 1


def test_on_turn_failure_stop_skips_the_rest_and_scores_them_zero(
    tmp_path: Path, key: None
) -> None:
    turns = [THREE_TURNS[0], turn("What is my name?", "contains", "Bob"), THREE_TURNS[2]]
    with FakeServer(chat_model) as server:  # turn 2 fails
        path = write_eval(tmp_path, server.port, turns, on_turn_failure="stop")
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert server.count == 2  # turn 3 is never sent
    graders = row["graders"]
    assert [(g["name"], g["status"], g["score"]) for g in graders] == [
        ("turn-1", "passed", 1.0),
        ("turn-2", "failed", 0.0),
        ("turn-3", "failed", 0.0),
    ]
    assert graders[2]["reason"] == "skipped: turn 2 failed (on_turn_failure: stop)"
    assert row["score"] == pytest.approx(1 / 3)
    assert len(row["transcript"]["steps"]) == 4


def test_the_evals_rubric_weights_each_turns_graders_by_their_names(
    tmp_path: Path, key: None
) -> None:
    """``rubric:`` names graders as the file does, whichever turn they grade."""
    (tmp_path / "weights.yaml").write_text(
        "criteria:\n  - {name: contains, weight: 3}\n  - {name: equals, weight: 1}\n"
    )
    both = {"input": "What is my name?", "graders": [
        {"type": "contains", "value": "Ada"}, {"type": "equals", "value": "Bob"}]}  # fmt: skip
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, [both])
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "rubric": str(tmp_path / "weights.yaml")}))
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert row["graders"][0]["score"] == 0.75  # 3 of 4 by weight, not the plain mean 0.5
    assert row["score"] == 0.75


def test_a_target_error_mid_conversation_keeps_the_turns_before_it(
    tmp_path: Path, key: None
) -> None:
    turns = [THREE_TURNS[0], turn("boom", "contains", "Ada"), THREE_TURNS[2]]
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, turns)
        outcome, row = run(path, tmp_path / "out", no_cache=True)
    assert server.count == 2
    assert row["status"] == "error" and row["score"] is None
    assert row["error"].startswith("target 'bot' failed on turn 2: ")
    assert "the fake refuses this turn" in row["error"]
    assert [g["name"] for g in row["graders"]] == ["turn-1"]  # graded before the error
    assert row["graders"][0]["status"] == "passed"
    steps = [(s["role"], s["text"]) for s in row["transcript"]["steps"]]
    assert steps == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "boom"),
    ]
    assert row["output"] == "Nice to meet you, Ada."
    assert outcome.exit_code == 3  # an error beyond --max-errors 0: never a success


def test_the_cache_answers_each_turn_it_has_seen(tmp_path: Path, key: None) -> None:
    cache = tmp_path / "cache"
    two = THREE_TURNS[:2]
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, two)
        _, first = run(path, tmp_path / "out1", cache_dir=str(cache))
        assert server.count == 2 and first["usage"]["target"]["cached"] is False
        _, again = run(path, tmp_path / "out2", cache_dir=str(cache))
        assert server.count == 2  # both turns from the cache
        assert again["usage"]["target"]["cached"] is True
        assert said(again) == said(first)
        write_eval(tmp_path, server.port, THREE_TURNS)
        _, longer = run(path, tmp_path / "out3", cache_dir=str(cache))
    assert server.count == 3  # only the new third turn was sent
    assert longer["usage"]["target"]["cached"] is False
    assert longer["status"] == "passed"


def test_a_cassette_records_and_replays_every_turn(tmp_path: Path, key: None) -> None:
    cassette = tmp_path / "chat.cassette"
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, THREE_TURNS)
        _, recorded = run(path, tmp_path / "out1", no_cache=True, record=str(cassette))
    assert server.count == 3
    _, replayed = run(path, tmp_path / "out2", no_cache=True, replay=str(cassette))  # server gone
    assert replayed["status"] == "passed"
    assert replayed["usage"]["target"]["replayed"] is True
    assert said(replayed) == said(recorded)


def test_conversation_graders_grade_the_whole_conversation(tmp_path: Path, key: None) -> None:
    whole = "user: What is my name?\n\nassistant: Your name is Ada."
    with FakeServer(chat_model) as server:
        graders = [{"type": "contains", "value": whole}]
        path = write_eval(tmp_path, server.port, THREE_TURNS, graders=graders)
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert [g["name"] for g in row["graders"]][-1] == "conversation"
    assert row["graders"][-1]["status"] == "passed", row["graders"][-1]
    assert row["score"] == 1.0


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("turns: []", "tests[0].turns: List should have at least 1 item"),
        ("turns: [{input: '  '}]", "tests[0].turns[0].input: Value error, each turn needs a non-empty input"),
        ("aggregation: min", "'aggregation' needs 'turns'"),
        ("turns: [{input: hi}]\n    aggregation: median", "tests[0].aggregation: Input should be 'mean', 'min' or 'max'"),
        ("turns: [{input: hi}]\n    expected_output: x", "a multi-turn test takes no 'expected_output'"),
    ],
)  # fmt: skip
def test_bad_conversation_keys_are_errors_at_their_key(
    tmp_path: Path, body: str, problem: str
) -> None:
    path = tmp_path / "bad.eval.yaml"
    path.write_text(
        "graders: [{type: contains, value: x}]\ntests:\n  - id: a\n    input: q\n    " + body
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert f"{path}:" in str(caught.value)
    assert problem in str(caught.value)


def test_agentv_turns_need_mode_conversation(tmp_path: Path) -> None:
    path = tmp_path / "suite.eval.yaml"
    path.write_text(
        "name: x\ntests:\n  - id: a\n    input: q\n    turns: [{input: hi, assert: [Greets]}]\n"
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert f"{path}:5: tests[0].turns: 'turns' needs mode: conversation" in str(caught.value)


@pytest.mark.parametrize(
    ("how", "expected"), [(None, 0.5), ("mean", 0.5), ("min", 0.0), ("max", 1.0)]
)
def test_aggregation_follows_agentv(how: str | None, expected: float) -> None:
    assert aggregate([1.0, 0.0, 0.5], how) == expected
    assert aggregate([], how) is None


def test_conversation_text_is_role_colon_content() -> None:
    history = [Message(role="system", content="S"), Message(role="user", content="U")]
    assert conversation_text(history) == "system: S\n\nuser: U"


def agentv_targets(folder: Path) -> Path:
    """A turn-aware mock model for AgentV's multi-turn examples, and a scripted judge whose
    verdicts depend on the rubric item (and, for one item, on seeing the earlier turns)."""
    path = folder / "targets.yaml"
    bot = {
        r"What is 15% of 200\?": "15% of 200 = 0.15 x 200 = 30.",
        r"Now double that result\.": "Double the previous answer: 30 x 2 = 60.",
        r"What were the original numbers I asked about\?": "You asked about 15% of 200.",
        r"What is the capital of France\?": "Paris is the capital of France.",
        r"What country is it in\?": "Paris is in France.",
        r"What is 2 \+ 2\?": "2 + 2 = 5.",
        r"Multiply that by 3\.": "15.",
        r"Write a Python function that adds two numbers\.": "def add(a, b):\n    return a + b",
        r"Now add type hints to the function\.": "def add(a: int, b: int) -> int: ...",
        r"somewhere warm in December\.": "Try Cancun or Bangkok.",
        r"I prefer beaches over cities\.": "Then Cancun's beaches suit you.",
        r"Sarah.*#98765.*can you add gift wrapping\?": "Done, Sarah: #98765 ships express.",
        r"WAN.*What if it happens again\?": "If it drops again, we send a technician.",
    }
    fail = '{"pass": false, "score": 0, "reason": "no"}'
    judge = [
        (r"<rubric_item>\s*Answers with 4", fail),
        (r"<rubric_item>\s*Confirms Paris is in France", '{"pass": false, "score": 0.4}'),
        (r"<rubric_item>\s*Does not suggest purely urban", fail),
        (r"<rubric_item>\s*References the previous answer of 30.*<earlier_turns>.*= 30\.", "{\"pass\": true, \"score\": 1}"),
        (r"<rubric_item>\s*References the previous answer of 30", fail),
    ]  # fmt: skip
    targets = {
        "targets": [
            {
                "name": "bot",
                "kind": "mock",
                "default": "I do not follow.",
                "rules": [{"match": f"{m}\\s*\\Z", "response": r} for m, r in bot.items()],
            },
            {
                "name": "judge",
                "kind": "mock",
                "default": '{"pass": true, "score": 1, "reason": "yes"}',
                "rules": [{"match": m, "response": r} for m, r in judge],
            },
        ]
    }
    path.write_text(json.dumps(targets))
    return path


#: Each test's score by AgentV's rules on the scripted replies and verdicts above: the mean (or
#: min) of the turns' and the conversation's scores; a turn after a failed one scores 0.
LIVE_SCORES = {
    "58f316ca2": {
        "context-retention": 1.0,
        "weakest-link-scoring": 0.7,
        "stop-on-failure": 1 / 3,
        "mixed-assertions": 1.0,
        "conversation-coherence": 2.5 / 3,
    },
    "14bca459e": {  # criteria are not graders; test 5's assertions are the conversation's
        "context-retention": 1.0,
        "weakest-link-scoring": 0.7,
        "stop-on-failure": 0.0,
        "mixed-assertions": 1.0,
        "conversation-coherence": 2.5 / 3,
    },
}
LIVE = {
    "58f316ca2": "58f316ca2/examples/features/multi-turn-conversation-live/evals/suite.yaml",
    "14bca459e": "14bca459e/examples/features/multi-turn-conversation-live/evals/dataset.eval.yaml",
}


@pytest.mark.slow
@pytest.mark.parametrize("commit", sorted(LIVE))
def test_agentv_live_conversations_score_as_agentv_aggregates(tmp_path: Path, commit: str) -> None:
    """Slow (a judged grader per turn); test_each_turn_is_sent... covers the turn loop."""
    targets = agentv_targets(tmp_path)
    out = tmp_path / "out"
    evalrun.run(CORPUS / LIVE[commit], out=str(out), quiet=True, targets=str(targets),
                target="bot", judge="judge", no_cache=True)  # fmt: skip
    rows = {row["id"]: row for row in read_bundle(out)[0]}
    scores = {case: rows[case]["score"] for case in LIVE_SCORES[commit]}
    assert scores == pytest.approx(LIVE_SCORES[commit]), rows
    stopped = rows["stop-on-failure"]
    assert [g["name"] for g in stopped["graders"]][:2] == ["turn-1", "turn-2"]
    assert stopped["graders"][1]["reason"].startswith("skipped: turn 1 failed")
    assert len(stopped["transcript"]["steps"]) == 2  # turn 2 was never asked
    assert rows["stop-on-failure"]["status"] == "failed"
    assert rows["context-retention"]["status"] == "passed"
    assert len(rows["context-retention"]["transcript"]["steps"]) == 6


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        "58f316ca2/examples/features/multi-turn-conversation/evals/suite.yaml",
        "14bca459e/examples/features/multi-turn-conversation/evals/dataset.eval.yaml",
    ],
)
def test_agentv_scripted_conversations_run_as_one_request(tmp_path: Path, path: str) -> None:
    """AgentV's scripted multi-turn example: the earlier turns are the input, so the target
    answers once, seeing all of them (the bot's rule needs the whole history to match)."""
    targets = agentv_targets(tmp_path)
    out = tmp_path / "out"
    evalrun.run(CORPUS / path, out=str(out), quiet=True, targets=str(targets), target="bot",
                judge="judge", no_cache=True)  # fmt: skip
    rows = {row["id"]: row for row in read_bundle(out)[0]}
    assert rows["support-context-retention"]["output"] == "Done, Sarah: #98765 ships express."
    assert rows["support-context-retention"]["status"] == "passed"
    assert rows["support-troubleshooting-flow"]["output"].startswith("If it drops again")
    assert all(row["score"] == 1.0 for row in rows.values()), rows


def test_conversation_id_labels_the_result_and_agentvs_layout(tmp_path: Path, key: None) -> None:
    """AgentV's ``conversation_id`` groups results: the line carries it, and AgentV's layout
    puts it on the index row and in grading.json with the turns counted."""
    with FakeServer(chat_model) as server:
        path = write_eval(tmp_path, server.port, THREE_TURNS, conversation_id="onboarding")
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert row["conversation_id"] == "onboarding"
    write_reports(tmp_path / "out", ("agentv",))
    index = json.loads((tmp_path / "out" / "index.jsonl").read_text())
    assert index["conversation_id"] == "onboarding"
    grading = json.loads((tmp_path / "out" / index["grading_path"]).read_text())
    assert grading["metadata"]["conversation"] == {"turns": 3, "conversation_id": "onboarding"}
    assert [c["assertion"]["name"] for c in grading["component_results"]] == [
        "turn-1",
        "turn-2",
        "turn-3",
    ]


def scripted_user(*lines: str) -> Callable[[Seen], Reply]:
    """A fake judge playing the user: its replies in order (a 500 once they run out)."""
    said = list(lines)

    def reply(seen: Seen) -> Reply:
        if not said:
            return openai_error(500, "the script ran out", "server_error")
        return openai_reply(said.pop(0), prompt_tokens=5, completion_tokens=4)

    return reply


PERSONA = {"instructions": "You are Ada. Find out whether the assistant remembers your name."}


def test_a_simulated_user_talks_until_its_turn_cap(tmp_path: Path, key: None) -> None:
    user = scripted_user("What is my name?", "Spell it backwards.", "Never sent.")
    with FakeServer(chat_model) as server, FakeServer(user) as judge:
        graders = [{"type": "contains", "value": "assistant: adA"}]
        path = write_eval(
            tmp_path, server.port, [THREE_TURNS[0]], judge.port, graders=graders,
            simulated_user={**PERSONA, "max_turns": 2},
        )  # fmt: skip
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert judge.count == 2 and server.count == 3  # the cap: no third judge call
    assert said(row)[::2] == [
        ("user", "My name is Ada.", None),
        ("user", "What is my name?", None),
        ("user", "Spell it backwards.", None),
    ]
    assert row["output"] == "adA"
    assert [g["name"] for g in row["graders"]] == ["turn-1", "conversation"]
    assert row["status"] == "passed"
    assert row["usage"]["judge"]["calls"] == 2
    logged = [json.loads(line) for line in (tmp_path / "out" / "judge-calls.jsonl").open()]
    assert [(c["grader"], c["target"], c["status"], c["response"]) for c in logged] == [
        ("simulated-user", "sim", "ok", "What is my name?"),
        ("simulated-user", "sim", "ok", "Spell it backwards."),
    ]
    first, second = (s.json() for s in judge.seen)
    assert first["messages"][0]["role"] == "system"
    assert "Find out whether the assistant remembers your name." in first["messages"][0]["content"]
    assert "Be brief." not in json.dumps(first)  # the target's system prompt is not the user's
    assert first["messages"][1:] == [
        {"role": "assistant", "content": "My name is Ada."},
        {"role": "user", "content": "Nice to meet you, Ada."},
    ]
    assert second["messages"][-2:] == [
        {"role": "assistant", "content": "What is my name?"},
        {"role": "user", "content": "Your name is Ada."},
    ]


def test_a_simulated_user_stops_at_its_stop_phrase(tmp_path: Path, key: None) -> None:
    user = scripted_user("My name is Ada.", "Thanks, that is all. DONE")
    with FakeServer(chat_model) as server, FakeServer(user) as judge:
        graders = [{"type": "contains", "value": "Ada"}]
        path = write_eval(tmp_path, server.port, None, judge.port, graders=graders,
                          simulated_user=PERSONA)  # fmt: skip
        _, row = run(path, tmp_path / "out", no_cache=True)
    assert judge.count == 2 and server.count == 1
    assert judge.seen[0].json()["messages"][-1]["content"].startswith("(The assistant is waiting")
    assert said(row) == [
        ("user", "My name is Ada.", None),
        ("assistant", "Nice to meet you, Ada.", {"input": 7, "output": 2}),
    ]
    assert row["status"] == "passed"


def test_a_failing_simulated_user_ends_the_case_as_an_error(tmp_path: Path, key: None) -> None:
    user = scripted_user("What is my name?")  # its second call is a 500
    with FakeServer(chat_model) as server, FakeServer(user) as judge:
        graders = [{"type": "contains", "value": "Ada"}]
        path = write_eval(tmp_path, server.port, [THREE_TURNS[0]], judge.port, graders=graders,
                          simulated_user=PERSONA)  # fmt: skip
        outcome, row = run(path, tmp_path / "out", no_cache=True)
    assert row["status"] == "error" and outcome.exit_code == 3
    assert row["error"].startswith("the simulated user could not write turn 3: ")
    assert [g["name"] for g in row["graders"]] == ["turn-1"]
    assert len(row["transcript"]["steps"]) == 4


@pytest.mark.slow
def test_the_multi_turn_example_in_the_docs_runs_as_shown(tmp_path: Path) -> None:
    """docs/agents.md's example is evals/multi-turn/support.eval.yaml, and runs offline:
    two scripted turns, then the simulated customer's one message and its stop phrase. Slow (a
    judged grader's process); the simulated user's default tests use loopback fakes."""
    page = (ROOT / "docs" / "agents.md").read_text()
    section = page.split("### An example", 1)[1]
    shown = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    example = ROOT / "evals" / "multi-turn" / "support.eval.yaml"
    assert example.read_text().split("\n", 1)[1] == shown  # after the schema line
    outcome, row = run(example, tmp_path / "out", no_cache=True)
    assert outcome.exit_code == 0
    assert [(g["name"], g["score"]) for g in row["graders"]] == [
        ("turn-1", 1.0),
        ("turn-2", 1.0),
        ("conversation", 1.0),
    ]
    users = [text for role, text, _ in said(row) if role == "user"]
    assert users == [
        "My order #4417 has not arrived.",
        "Can you send it express instead?",
        "Will that cost me anything?",
    ]
    assert row["output"] == "No, the express upgrade for order #4417 is free."
    assert row["usage"]["judge"]["calls"] == 4  # 2 rubric items, 2 simulated-user messages


#: A scripted agent: it reads the conversation on stdin and, on the last message, looks the
#: name up with a tool before it answers (evalrun's JSONL transcript, docs/agents.md).
AGENT = """\
import json, sys
last = sys.stdin.read().rsplit("\\n\\n", 1)[-1]
events = []
if last == "What is my name?":
    events.append({"type": "tool_call", "id": "c1", "name": "recall", "arguments": {"key": "name"}})
    events.append({"type": "tool_result", "id": "c1", "result": "Ada"})
events.append({"type": "final", "text": "Ada" if events else "Noted.", "usage": {"input": 9, "output": 1}})
print("\\n".join(json.dumps(e) for e in events))
"""


def test_an_agents_turns_keep_their_tool_calls(tmp_path: Path) -> None:
    """A ``cli`` agent answers each turn with a transcript: the conversation's transcript holds
    every turn's steps, and a turn's graders read that turn's calls."""
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "targets.yaml").write_text(
        json.dumps(
            {"targets": [{"name": "agent", "kind": "cli", "transcript": "jsonl",
                          "command": [sys.executable, "-I", "-S", str(tmp_path / "agent.py")]}]}
        )
    )  # fmt: skip
    used = {"type": "trajectory:tool-used", "value": "recall"}
    path = tmp_path / "agent.eval.yaml"
    test = {
        "id": "recall",
        "turns": [
            {"input": "My name is Ada.", "graders": [{**used, "negate": True}]},
            {"input": "What is my name?", "graders": [used, {"type": "equals", "value": "Ada"}]},
        ],
    }
    path.write_text(json.dumps({"target": "agent", "tests": [test]}))
    _, row = run(path, tmp_path / "out", no_cache=True)
    assert [(g["name"], g["status"]) for g in row["graders"]] == [
        ("turn-1", "passed"),
        ("turn-2", "passed"),
    ]
    transcript = row["transcript"]
    assert transcript["format"] == "jsonl"
    steps = [
        (s["role"], s["text"], [c["name"] for c in s["tool_calls"]]) for s in transcript["steps"]
    ]
    assert steps == [
        ("user", "My name is Ada.", []),
        ("assistant", "Noted.", []),
        ("user", "What is my name?", []),
        ("assistant", None, ["recall"]),
        ("assistant", "Ada", []),
    ]
    assert transcript["usage"] == {"input": 18, "output": 2}


def test_agentv_turns_load_with_their_graders_and_expected_output(tmp_path: Path) -> None:
    path = tmp_path / "suite.eval.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: turns
            tests:
              - id: a
                mode: conversation
                aggregation: min
                turns:
                  - input: hi
                    expected_output: {content: hello}
                    assert: [Greets back, Is brief, {type: contains, value: hello}]
                  - input: [{type: text, value: bye}]
                    expected_output: goodbye
            """
        )
    )
    case = next(iter(load_eval(path).tests))
    assert case.aggregation == "min" and case.input == []
    first, second = case.turns or []
    assert [m.text() for m in first.expected_messages] == ["hello"]
    assert first.expected_messages[0].role == "assistant"
    assert [(g.type, g.weight, g.config.get("rubric")) for g in first.graders] == [
        ("llm-rubric", 1.0, ["Greets back", "Is brief"]),
        ("contains", 1.0, None),
    ]
    assert [m.text() for m in second.expected_messages] == ["goodbye"] and not second.graders
    assert [(m.role, m.text()) for m in second.input_messages] == [("user", "bye")]  # parts


def test_in_a_matrix_whose_judge_follows_each_target_every_column_gets_its_simulated_user(
    tmp_path: Path,
) -> None:
    """No judge named, two targets: each column's target also plays its simulated user
    (docs/results.md, "A matrix run"), so each column's conversation has the simulated turn."""
    (tmp_path / "targets.yaml").write_text(
        "targets:\n"
        + "".join(
            f"  - {{name: {n}, kind: mock, default: 'from {n}', rules: "
            f"[{{match: 'What now\\?', response: 'user of {n} asks'}}]}}\n"
            for n in ("a", "b")
        )
    )
    (tmp_path / "m.eval.yaml").write_text(
        textwrap.dedent(
            """\
            tests:
              - id: talk
                turns:
                  - input: hello
                simulated_user: {instructions: "What now?", max_turns: 1}
                graders: [{type: contains, value: from}]
            """
        )
    )
    out = tmp_path / "out"
    evalrun.run(
        tmp_path / "m.eval.yaml",
        target=["a", "b"],
        targets=tmp_path / "targets.yaml",
        out=out,
        quiet=True,
        sandbox="none",
    )
    rows, _ = read_bundle(out)
    assert sorted(row["target"] for row in rows) == ["a", "b"]
    for row in rows:
        name = row["target"]
        users = [s["text"] for s in row["transcript"]["steps"] if s["role"] == "user"]
        assert users == ["hello", f"user of {name} asks"], row
        assert row["status"] == "passed"
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert sorted(c["target"] for c in calls if c["grader"] == "simulated-user") == ["a", "b"]
