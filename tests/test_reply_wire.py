"""What a judge reply carries on the proxy wire: the normalised finish reason and the provider's
refusal (docs/proxy.md), and how the SDK treats replies that must not be read."""

from __future__ import annotations

from typing import Any

from proxy_helpers import client, run, serve

from evalrun.targets.base import CompletionRequest, CompletionResponse, TokenUsage
from grader_sdk import InvokeResult
from grader_sdk._judge import read_result, reply_plan
from grader_sdk.replies import read_verdict
from proxy.wire import InvokeBatchResponse, InvokeResponse


class StoppingTarget:
    """Answers each question "<finish reason>|<refusal>" with that finish reason and refusal."""

    name = "judge"

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        finish, _, refusal = str(request.messages[-1]["content"]).partition("|")
        return CompletionResponse(
            text="" if refusal else '{"relevant": true}',
            usage=TokenUsage(1, 1),
            finish_reason=finish or None,
            refusal=refusal or None,
        )

    async def aclose(self) -> None:
        return None


PROVIDER_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "STOP": "stop",
    "": "stop",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "SAFETY": "content_filter",
    "refusal": "content_filter",
    "something_new": "stop",
}


def test_invoke_and_batch_carry_the_normalised_finish_reason_and_refusal() -> None:
    async def scenario() -> None:
        async with serve(StoppingTarget()) as proxy:
            grant = proxy.grant("judge", max_calls=40)
            async with client(proxy, grant.token) as http:
                for given, wire in PROVIDER_REASONS.items():
                    body = (await http.post("/invoke", json={"question": given})).json()
                    InvokeResponse.model_validate(body)
                    assert (body["finishReason"], body["refusal"]) == (wire, None), given
                refused = (
                    await http.post("/invoke", json={"question": "stop|I can't help."})
                ).json()
                assert refused["refusal"] == "I can't help." and refused["rawText"] == ""
                batch = await http.post(
                    "/invokeBatch",
                    json={"requests": [{"question": "MAX_TOKENS"}, {"question": "end_turn|no"}]},
                )
                data = batch.json()
                InvokeBatchResponse.model_validate(data)
                assert [(r["finishReason"], r["refusal"]) for r in data["responses"]] == [
                    ("length", None),
                    ("stop", "no"),
                ]

    run(scenario)


def test_the_python_sdk_exposes_finish_reason_and_refusal() -> None:
    result = InvokeResult.from_wire(
        {"rawText": "{", "finishReason": "length", "refusal": None, "output": []}
    )
    assert (result.finish_reason, result.refusal) == ("length", None)
    old_proxy = InvokeResult.from_wire({"rawText": "x"})
    assert (old_proxy.finish_reason, old_proxy.refusal) == (None, None)


def _verdict(text: str) -> Any:
    return read_verdict(text, ["relevant"])


def test_replies_that_must_not_be_read_are_not() -> None:
    cut = InvokeResult(raw_text='{"relevant": true}', finish_reason="length")
    assert "cut off" in read_result(cut, _verdict).problem
    filtered = InvokeResult(raw_text="", finish_reason="content_filter")
    assert "content_filter" in read_result(filtered, _verdict).problem
    refused = InvokeResult(raw_text="", refusal="I can't help with that.")
    assert read_result(refused, _verdict).problem == "the judge refused: I can't help with that."
    assert read_result(InvokeResult(raw_text=" "), _verdict).problem == "the judge's reply is empty"
    assert read_result(InvokeResult(raw_text='{"relevant": false}'), _verdict).value is False


class Info:
    def __init__(self, remaining: int) -> None:
        self.remaining = remaining


def _drive(plan: Any, answers: list[list[InvokeResult]], remaining: int) -> tuple[Any, list]:
    """Run a reply plan by hand: (its readings, the batches it sent)."""
    sent: list = []
    step = plan.send(None)
    try:
        while True:
            kind, requests = step
            if kind == "info":
                step = plan.send(Info(remaining))
            else:
                sent.append(requests)
                step = plan.send(answers.pop(0))
    except StopIteration as stop:
        return stop.value, sent


def test_a_cut_off_reply_is_asked_again_with_four_times_the_room_even_without_retry() -> None:
    request = {"question": "q", "maxTokens": 1000}
    first = [InvokeResult(raw_text='{"relevant": tr', finish_reason="length")]
    second = [InvokeResult(raw_text='{"relevant": true}', finish_reason="stop")]
    readings, sent = _drive(reply_plan([request], _verdict, retry=False), [first, second], 5)
    assert readings[0].value is True
    assert sent[1] == [{"question": "q", "maxTokens": 4000}]


def test_a_reply_cut_off_twice_or_without_budget_abstains_with_that_reason() -> None:
    request = {"question": "q", "maxTokens": 1000}
    cut = [InvokeResult(raw_text="{", finish_reason="length")]
    readings, sent = _drive(reply_plan([request], _verdict), [list(cut), list(cut)], 5)
    assert len(sent) == 2
    assert readings[0].problem.count("cut off") == 2
    readings, sent = _drive(reply_plan([request], _verdict), [list(cut)], 0)
    assert len(sent) == 1 and "cut off" in readings[0].problem


def test_refused_and_filtered_replies_are_not_asked_again() -> None:
    replies = [
        InvokeResult(raw_text="", refusal="no"),
        InvokeResult(raw_text="", finish_reason="content_filter"),
    ]
    readings, sent = _drive(
        reply_plan([{"question": "a"}, {"question": "b"}], _verdict), [replies], 9
    )
    assert len(sent) == 1
    assert [r.ok for r in readings] == [False, False]
