"""Model targets that use tools (docs/agents.md, "Model targets with tools"): the loop against a
loopback fake model in each provider's wire format, its transcript, the response cache and the
cassette per step, ``max_turns``, and calls evalrun cannot answer (unknown tool, bad arguments,
hostile tool scripts), each a recorded outcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from targets_helpers import FakeServer, Reply, Seen, targets_file
from toolloop_helpers import (
    MULTIPLY_PY,
    TOOLS_YAML,
    Move,
    anthropic_handler,
    gemini_handler,
    next_move,
    openai_handler,
)

from evalrun.runner.tooluse import toolbox
from evalrun.spec.models import EvalFile
from evalrun.targets import (
    CompletionRequest,
    CompletionResponse,
    LimitFactory,
    StoreOptions,
    Target,
    TargetPool,
    Toolbox,
    ToolLoopError,
    run_tool_loop,
)
from evalrun.transcripts import Transcript

KEY = "sk-test-0123456789"
TASK = "What do 3 units of SKU A1 cost? Write the total to total.txt."
ANSWER = "The total is 7.5, written to total.txt."
EXPECTED_CALLS = [
    ("lookup_price", {"sku": "A1"}, {"sku": "A1", "price": 2.5}),
    ("multiply", {"a": 2.5, "b": 3}, 7.5),
    ("write_file", {"path": "total.txt", "content": "7.5"}, "ok"),
]


def _toolbox(folder: Path, tools_yaml: str = TOOLS_YAML) -> Toolbox:
    (folder / "multiply.py").write_text(MULTIPLY_PY)
    spec = EvalFile.model_validate(
        {**yaml.safe_load(tools_yaml), "tests": [{"id": "t", "input": "x"}]}
    )
    return toolbox(spec.tools, folder, secret_names={"PROVIDER_KEY"})


def _target(kind: str, url: str) -> dict[str, Any]:
    common = {"name": "m", "api_key_env": "PROVIDER_KEY", "max_retries": 0}
    if kind == "openai":
        return {**common, "kind": "openai", "model": "gpt-4o-mini", "base_url": url}
    if kind == "azure":
        return {**common, "kind": "azure", "endpoint": url, "deployment": "d"}
    if kind == "anthropic":
        return {**common, "kind": "anthropic", "model": "claude-3-5-haiku", "base_url": url}
    return {**common, "kind": "gemini", "model": "gemini-2.5-flash", "base_url": url}


HANDLERS = {
    "openai": openai_handler,
    "azure": openai_handler,
    "anthropic": anthropic_handler,
    "gemini": gemini_handler,
}


def _offered_names(kind: str, body: dict[str, Any]) -> list[str]:
    """The tools a request offered, read in its provider's own format."""
    if kind in ("openai", "azure"):
        return [t["function"]["name"] for t in body["tools"]]
    if kind == "anthropic":
        assert all("input_schema" in t for t in body["tools"])
        return [t["name"] for t in body["tools"]]
    (declarations,) = body["tools"]
    return [d["name"] for d in declarations["functionDeclarations"]]


@pytest.fixture
def box(tmp_path: Path) -> Toolbox:
    """The task's three tools, answered in ``tmp_path``."""
    return _toolbox(tmp_path)


async def _loop(
    target: Target, box: Toolbox, max_turns: int = 10, prompt: str = TASK
) -> CompletionResponse:
    return await run_tool_loop(target, CompletionRequest.from_prompt(prompt), box, max_turns)


def _run_task(
    handler: Callable[[Seen], Reply],
    box: Toolbox,
    target: Callable[[str], dict[str, Any]] = lambda url: _target("openai", url),
    max_turns: int = 10,
    limit_for: LimitFactory | None = None,
) -> tuple[CompletionResponse, list[Seen]]:
    """The task through the loop, against a fake model at a loopback URL that ``target`` makes
    a target of; the answer and the requests the model was sent."""

    async def main() -> tuple[CompletionResponse, list[Seen]]:
        async with FakeServer(handler) as server:
            config = targets_file(target(server.url))
            pool = TargetPool(config, env={"PROVIDER_KEY": KEY}, limit_for=limit_for)
            try:
                return await _loop(pool.get("m"), box, max_turns), server.seen
            finally:
                await pool.aclose()

    return asyncio.run(main())


def _calls(transcript: Transcript | None) -> list[tuple[str, Any, Any]]:
    assert transcript is not None
    return [(c.name, c.arguments, c.result) for c in transcript.tool_calls]


def _without_times(transcript: Transcript | None) -> dict[str, Any]:
    """The transcript with its measured durations left out: a replay takes no time."""
    assert transcript is not None
    data = transcript.to_dict()
    data["duration_ms"] = None
    for step in data["steps"]:
        step["duration_ms"] = None
        for call in step["tool_calls"]:
            call["duration_ms"] = None
    return data


#: the default run keeps the three wire formats; azure's body is openai's (slow)
@pytest.mark.parametrize(
    "kind", ["openai", pytest.param("azure", marks=pytest.mark.slow), "anthropic", "gemini"]
)
def test_a_three_tool_task_completes_through_the_loop_in_each_wire_format(
    kind: str, box: Toolbox
) -> None:
    response, seen = _run_task(HANDLERS[kind], box, lambda url: _target(kind, url))
    assert response.text == ANSWER
    assert _calls(response.transcript) == EXPECTED_CALLS
    assert len(seen) == 4  # three tool turns and the answer
    for request in seen:
        assert _offered_names(kind, request.json()) == ["lookup_price", "multiply", "write_file"]
    transcript = response.transcript
    assert transcript is not None and transcript.format == "tool-loop"
    assert transcript.answer == ANSWER
    assert [s.role for s in transcript.steps] == ["assistant"] * 4
    assert transcript.steps[0].text == "Looking up the price."
    assert all(not c.is_error for c in transcript.tool_calls)
    steps_usage = [
        (s.usage.input_tokens, s.usage.output_tokens) for s in transcript.steps if s.usage
    ]
    assert len(steps_usage) == 4
    totals = (sum(i for i, _ in steps_usage), sum(o for _, o in steps_usage))
    assert (response.usage.input_tokens, response.usage.output_tokens) == totals
    assert transcript.usage is not None
    assert (transcript.usage.input_tokens, transcript.usage.output_tokens) == totals
    assert totals[1] > 0 and len(set(steps_usage)) == 4  # each step's own usage
    assert all(s.duration_ms is not None and s.duration_ms >= 0 for s in transcript.steps)
    script_call = transcript.tool_calls[1]
    assert script_call.duration_ms is not None and script_call.duration_ms > 0
    assert transcript.summary()["tool_calls"] == {"lookup_price": 1, "multiply": 1, "write_file": 1}


def test_each_step_is_cached_and_recorded_and_a_replay_calls_nothing(
    tmp_path: Path, box: Toolbox
) -> None:
    cassette = tmp_path / "cassette.jsonl"
    cache = tmp_path / "cache"
    env = {"PROVIDER_KEY": KEY}

    async def main() -> tuple[list[CompletionResponse], int]:
        out = []
        async with FakeServer(openai_handler) as server:
            config = targets_file(_target("openai", server.url))
            for stores in (StoreOptions(cache_dir=cache, record=cassette), StoreOptions(cache)):
                pool = TargetPool(config, stores, env=env)
                try:
                    out.append(await _loop(pool.get("m"), box))
                finally:
                    await pool.aclose()
            calls = server.count
        # the server is gone: a replay that made a call would fail
        pool = TargetPool(config, StoreOptions(replay=cassette), env={})
        try:
            out.append(await _loop(pool.get("m"), box))
        finally:
            await pool.aclose()
        return out, calls

    (live, cached, replayed), calls = asyncio.run(main())
    assert calls == 4  # only the live run reached the model, one call per step
    assert len(cassette.read_text().splitlines()) == 4
    assert not live.cached and cached.cached and replayed.replayed
    assert _without_times(live.transcript) == _without_times(cached.transcript)
    assert _without_times(live.transcript) == _without_times(replayed.transcript)
    assert replayed.text == ANSWER


def test_a_replay_missing_a_step_fails_with_the_steps_before_it_kept(
    tmp_path: Path, box: Toolbox
) -> None:
    cassette = tmp_path / "cassette.jsonl"

    async def main() -> None:
        async with FakeServer(openai_handler) as server:
            config = targets_file(_target("openai", server.url))
            pool = TargetPool(config, StoreOptions(record=cassette), env={"PROVIDER_KEY": KEY})
            await _loop(pool.get("m"), box)
            await pool.aclose()
        lines = cassette.read_text().splitlines()
        cassette.write_text("\n".join(lines[:2]) + "\n")  # the third step was never recorded
        pool = TargetPool(config, StoreOptions(replay=cassette), env={})
        try:
            with pytest.raises(ToolLoopError, match="model call 3 of the tool loop") as caught:
                await _loop(pool.get("m"), box)
        finally:
            await pool.aclose()
        assert "no recorded response" in caught.value.message
        assert [c.name for c in caught.value.transcript.tool_calls] == ["lookup_price", "multiply"]

    asyncio.run(main())


def test_max_turns_stops_the_loop_with_a_clear_error_and_keeps_the_transcript(
    box: Toolbox,
) -> None:
    seen: list[Seen] = []

    def model(request: Seen) -> Reply:
        seen.append(request)
        return openai_handler(request)

    with pytest.raises(ToolLoopError) as caught:
        _run_task(model, box, max_turns=2)
    assert len(seen) == 2
    error = caught.value
    assert "max_turns (2 model calls)" in error.message and "(multiply)" in error.message
    assert error.target == "m"
    assert (error.spent.usage.input_tokens, error.spent.usage.output_tokens) == (201, 20)
    steps = error.transcript.steps
    assert len(steps) == 2
    (lookup,) = steps[0].tool_calls
    assert (lookup.name, lookup.result) == ("lookup_price", {"sku": "A1", "price": 2.5})
    (pending,) = steps[1].tool_calls  # asked for, never run
    assert (pending.name, pending.arguments, pending.result) == (
        "multiply",
        {"a": 2.5, "b": 3},
        None,
    )


class RawOpenAIModel:
    """An OpenAI-format fake whose calls are given as raw (name, arguments text) pairs, one
    turn each, then an answer; it keeps the tool messages it was sent."""

    def __init__(self, turns: list[tuple[str, str]]) -> None:
        self.turns = turns
        self.tool_messages: list[dict[str, Any]] = []

    def __call__(self, seen: Seen) -> Reply:
        body = seen.json()
        tools = [m for m in body["messages"] if m["role"] == "tool"]
        self.tool_messages = tools
        if len(tools) == len(self.turns):
            return openai_handler(seen, mind=lambda _results: Move(text="done"))
        name, raw = self.turns[len(tools)]
        reply = openai_handler(seen, mind=lambda _results: Move([(name, {})]))
        reply.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = raw
        return reply


def test_calls_evalrun_cannot_answer_get_error_results_and_the_loop_goes_on(
    box: Toolbox,
) -> None:
    model = RawOpenAIModel(
        [
            ("delete_everything", "{}"),
            ("lookup_price", '{"sku": '),
            ("lookup_price", '["A1"]'),
            ("multiply", '{"a": "two", "b": 3}'),
            ("lookup_price", '{"sku": "ZZ"}'),
        ]
    )
    response, _ = _run_task(model, box)
    assert response.text == "done"
    assert response.transcript is not None
    calls = response.transcript.tool_calls
    assert [c.is_error for c in calls] == [True, True, True, True, False]
    assert calls[0].result == (
        "unknown tool 'delete_everything': the tools are lookup_price, multiply, write_file"
    )
    assert calls[1].arguments == '{"sku": '  # kept as the model sent it
    assert "the arguments are not valid JSON" in calls[1].result
    assert calls[2].result == "tool 'lookup_price': the arguments must be a JSON object"
    assert calls[3].result.startswith(
        "tool 'multiply': the arguments do not fit its parameters: a:"
    )
    assert calls[4].result == {"error": "unknown sku"}  # the static fallback, not an error
    # the model was told each outcome, as the content of its tool message
    assert [m["content"] for m in model.tool_messages] == [
        *(str(c.result) for c in calls[:4]),
        '{"error": "unknown sku"}',
    ]


def _script_box(folder: Path, body: str, timeout: float = 30) -> Toolbox:
    (folder / "tool.py").write_text(body)
    tools = f"""\
tools:
  - name: probe
    command: [python, tool.py]
    timeout: {timeout}
"""
    return _toolbox(folder, tools)


HOSTILE = {
    "crashes": (
        "import sys\nsys.stderr.write('boom: no such record')\nsys.exit(3)",
        "tool 'probe': its script exited with status 3: boom: no such record",
    ),
    "prints garbage": (
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe not json')",
        "tool 'probe': its script printed no JSON",
    ),
    "prints plain text": ("print('sunny')", "tool 'probe': its script printed no JSON"),
    "floods stdout": (
        "import sys\nwhile True: sys.stdout.write('x' * 65536)",
        "tool 'probe': its script printed more than 1,000,000 bytes (killed)",
    ),
    "hangs": (
        "import time\ntime.sleep(60)",
        "tool 'probe': its script gave no answer within 0.5s (process group killed)",
    ),
    "is killed by a signal": (
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "tool 'probe': its script exited with status -9",
    ),
}


#: the default run keeps a crash and garbage; each other script costs a process (slow)
@pytest.mark.parametrize(
    "behaviour",
    [
        b if b in ("crashes", "prints garbage") else pytest.param(b, marks=pytest.mark.slow)
        for b in sorted(HOSTILE)
    ],
)
def test_a_hostile_tool_script_is_an_error_result_that_says_why(
    behaviour: str, tmp_path: Path
) -> None:
    script, reason = HOSTILE[behaviour]
    box = _script_box(tmp_path, script, timeout=0.5 if behaviour == "hangs" else 30)
    arguments, answer = asyncio.run(box.answer("probe", '{"q": 1}', "call_1"))
    assert arguments == {"q": 1}
    assert answer.is_error
    assert answer.result.startswith(reason), answer.result
    assert answer.duration_ms is not None


def test_a_tool_script_reads_the_call_and_cannot_see_the_run_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROVIDER_KEY", KEY)
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    script = (
        "import json, os, sys\ncall = json.load(sys.stdin)\n"
        "print(json.dumps({'call': call, 'key': os.environ.get('PROVIDER_KEY'),"
        " 'setting': os.environ.get('HARMLESS_SETTING'), 'cwd': os.getcwd()}))"
    )
    box = _script_box(tmp_path, script)
    _, answer = asyncio.run(box.answer("probe", '{"q": 1}', "call_7"))
    assert not answer.is_error, answer.result
    assert answer.result == {
        "call": {"name": "probe", "arguments": {"q": 1}, "id": "call_7"},
        "key": None,
        "setting": "visible",
        "cwd": str(tmp_path.resolve()),
    }


def test_a_missing_tool_program_is_an_error_result(tmp_path: Path) -> None:
    tools = "tools:\n  - name: probe\n    command: [./no-such-program]\n"
    _, answer = asyncio.run(_toolbox(tmp_path, tools).answer("probe", "{}", "c"))
    assert answer.is_error and answer.result.startswith("tool 'probe': its script could not start")


def test_results_match_on_arguments_in_order_and_a_tool_without_a_match_says_so(
    tmp_path: Path,
) -> None:
    tools = """\
tools:
  - name: weather
    results:
      - arguments: {city: Paris}
        result: sunny
      - arguments: {city: Oslo, unit: C}
        result: {temp: -3}
      - arguments: {city: Atlantis}
        result: no such city
        is_error: true
"""
    box = _toolbox(tmp_path, tools)

    def answer(arguments: dict[str, Any]) -> tuple[Any, bool]:
        _, got = asyncio.run(box.answer("weather", json.dumps(arguments), "c"))
        return got.result, got.is_error

    assert answer({"city": "Paris", "unit": "F"}) == ("sunny", False)  # extra arguments allowed
    assert answer({"city": "Oslo", "unit": "C"}) == ({"temp": -3}, False)
    assert answer({"city": "Atlantis"}) == ("no such city", True)
    result, is_error = answer({"city": "Oslo"})
    assert (
        is_error
        and result == 'tool \'weather\': no mocked result for these arguments ({"city": "Oslo"})'
    )


def test_a_test_gives_a_suite_tool_its_own_mock_and_adds_tools() -> None:
    from evalrun.spec.tools import tools_for

    spec = EvalFile.model_validate(
        yaml.safe_load(
            TOOLS_YAML
            + """\
max_turns: 4
tests:
  - id: t
    input: x
    max_turns: 2
    tools:
      - name: lookup_price
        result: {price: 9}
      - {type: function, function: {name: now, description: The time.}, result: "12:00"}
"""
        )
    )
    (test,) = spec.tests  # type: ignore[misc]
    tools = {t.name: t for t in tools_for(spec.tools, test.tools)}
    assert list(tools) == ["lookup_price", "multiply", "write_file", "now"]
    lookup = tools["lookup_price"]
    assert lookup.description == "The unit price of a product, by SKU."  # kept from the suite
    assert lookup.results == [] and lookup.result == {"price": 9}  # the test's mock, whole
    assert tools["now"].description == "The time." and tools["now"].result == "12:00"
    assert (spec.max_turns, test.max_turns) == (4, 2)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("[{name: a}, {name: a}]", "tool 'a' is declared twice"),
        ("[{name: 'no spaces'}]", "must be 1 to 64 letters"),
        ("[{name: a, parameters: {type: string}}]", "parameters must be a JSON Schema of type"),
        ("[{name: a, parameters: {type: object, properties: 3}}]", "not a valid JSON Schema"),
        ("[{name: a, command: [x], result: 1}]", "give 'result' or 'command'"),
        ("[{name: a, mock: 1}]", "Extra inputs are not permitted"),
        ("[{type: retrieval, function: {name: a}}]", "only function tools"),
    ],
)
def test_tools_an_eval_file_cannot_offer_are_refused_when_it_loads(
    tools: str, message: str, tmp_path: Path
) -> None:
    from evalrun.spec.loader import EvalFileError, load_eval

    path = tmp_path / "t.eval.yaml"
    path.write_text(f"target: m\ntools: {tools}\ntests:\n  - id: t\n    input: x\n")
    with pytest.raises(EvalFileError, match=message) as caught:
        load_eval(path)
    assert "t.eval.yaml:2" in str(caught.value)


def test_next_move_is_the_script_the_fakes_share() -> None:
    """The fake model's script itself: it needs every earlier result to go on."""
    assert next_move([]).calls == [("lookup_price", {"sku": "A1"})]
    assert next_move(['{"price": 2}']).calls == [("multiply", {"a": 2, "b": 3})]
    assert next_move(["{}", "6"]).calls == [("write_file", {"path": "total.txt", "content": "6"})]
    assert next_move(["{}", "6", "ok"]).text == "The total is 6, written to total.txt."


def test_an_error_result_is_marked_in_the_formats_that_have_a_mark() -> None:
    """Anthropic's ``tool_result`` takes ``is_error``; Gemini's ``functionResponse`` reads an
    ``error`` key; OpenAI's tool message has neither, so only the text goes."""
    from evalrun.targets.providers.anthropic import messages_body
    from evalrun.targets.providers.gemini import generate_body
    from evalrun.targets.providers.openai import chat_messages

    call = {"id": "c1", "type": "function", "function": {"name": "probe", "arguments": "{}"}}
    failed = {"role": "tool", "tool_call_id": "c1", "content": "boom", "is_error": True}
    request = CompletionRequest(
        messages=[
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            failed,
        ]
    )
    anthropic = messages_body("claude", request)["messages"][-1]["content"]
    assert anthropic == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "boom", "is_error": True}
    ]
    (part,) = generate_body(request)["contents"][-1]["parts"]
    assert part == {"functionResponse": {"name": "probe", "response": {"error": "boom"}}}
    assert chat_messages(request)[-1] == {"role": "tool", "content": "boom", "tool_call_id": "c1"}
    ok = CompletionRequest(messages=[*request.messages[:2], {**failed, "is_error": False}])
    assert "is_error" not in messages_body("claude", ok)["messages"][-1]["content"][0]
    (part,) = generate_body(ok)["contents"][-1]["parts"]
    assert part["functionResponse"]["response"] == {"result": "boom"}


@pytest.mark.slow  # importing litellm takes seconds
def test_the_three_tool_task_completes_through_a_litellm_target(box: Toolbox) -> None:
    pytest.importorskip("litellm")

    def target(url: str) -> dict[str, Any]:
        return {
            "name": "m",
            "kind": "litellm",
            "model": "openai/gpt-4o-mini",
            "base_url": f"{url}/v1",
            "api_key_env": "PROVIDER_KEY",
            "max_retries": 0,
        }

    response, seen = _run_task(openai_handler, box, target)
    assert response.text == ANSWER
    assert _calls(response.transcript) == EXPECTED_CALLS
    assert [s.path for s in seen] == ["/v1/chat/completions"] * 4
    assert all(_offered_names("openai", s.json()) == ["lookup_price", "multiply", "write_file"]
               for s in seen)  # fmt: skip


def test_every_step_is_retried_and_held_under_the_target_limit(box: Toolbox) -> None:
    """A step that fails once with a retryable error is retried like any call, and each try is
    counted by the target's concurrency limit."""
    failed: list[int] = []

    def flaky(seen: Seen) -> Reply:
        results = [m for m in seen.json()["messages"] if m["role"] == "tool"]
        if len(results) == 2 and not failed:  # the third step's first try
            failed.append(1)
            return Reply(503, {"error": {"message": "overloaded"}}, {"retry-after": "0"})
        return openai_handler(seen)

    class CountingLimit:
        entered = 0

        async def __aenter__(self) -> None:
            CountingLimit.entered += 1

        async def __aexit__(self, *exc: object) -> None:
            return None

    response, seen = _run_task(
        flaky,
        box,
        lambda url: {**_target("openai", url), "max_retries": 1},
        limit_for=lambda _c: CountingLimit(),
    )
    assert response.text == ANSWER and _calls(response.transcript) == EXPECTED_CALLS
    assert len(seen) == 5 and CountingLimit.entered == 5


def test_several_calls_in_one_step_are_answered_in_order(box: Toolbox) -> None:
    sent: list[list[dict[str, Any]]] = []

    def mind(results: list[str]) -> Move:
        if not results:
            return Move([("lookup_price", {"sku": "A1"}), ("lookup_price", {"sku": "B2"})])
        return Move(text=" | ".join(results))

    def model(seen: Seen) -> Reply:
        sent.append(seen.json()["messages"])
        return openai_handler(seen, mind=mind)

    response, _ = _run_task(model, box)
    assert response.text == '{"sku": "A1", "price": 2.5} | {"error": "unknown sku"}'
    assert response.transcript is not None and len(response.transcript.steps) == 2
    first = response.transcript.steps[0]
    assert [(c.id, c.arguments) for c in first.tool_calls] == [
        ("call_0_0", {"sku": "A1"}),
        ("call_0_1", {"sku": "B2"}),
    ]
    assistant, *tools = sent[1][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0_0", "call_0_1"]
    assert [(t["role"], t["tool_call_id"]) for t in tools] == [
        ("tool", "call_0_0"),
        ("tool", "call_0_1"),
    ]
