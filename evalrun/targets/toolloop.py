"""The tool loop of a model target: offer the case's tools, answer the model's tool calls with
their mocked results, call again with the exchange appended, until the model answers without a
tool call or ``max_turns`` model calls are spent (docs/agents.md, "Model targets with tools").

Each model call goes through the target's own ``complete`` (a ``ManagedTarget``: its limit,
retries, response cache and cassette hold for every step), and every step lands in the case's
transcript, the model the agent readers build, so the trace graders read it unchanged.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    Target,
    TargetError,
    TokenUsage,
)
from evalrun.targets.toolmocks import Toolbox, parse_arguments
from evalrun.transcripts import Step, ToolCall, Transcript, Usage

#: the transcript's ``format`` for a tool loop's run (docs/agents.md, "The transcript")
FORMAT = "tool-loop"


class ToolLoopError(TargetError):
    """The loop stopped without an answer (a model call failed, or ``max_turns`` was reached);
    ``spent`` holds what the steps made so far cost and their transcript, for the case's
    result."""

    def __init__(self, message: str, spent: CompletionResponse, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.spent = spent

    @property
    def transcript(self) -> Transcript:
        assert self.spent.transcript is not None
        return self.spent.transcript


class _Run:
    """The steps of one loop and the totals of its model calls."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.steps: list[Step] = []
        self.responses: list[CompletionResponse] = []

    def add(self, response: CompletionResponse) -> Step:
        self.responses.append(response)
        usage = response.usage
        step = Step(
            role="assistant",
            text=response.text or None,
            duration_ms=round(response.latency_ms, 1),
            usage=Usage(usage.input_tokens, usage.output_tokens),
            cost_usd=response.cost_usd,
        )
        self.steps.append(step)
        return step

    def usage(self) -> TokenUsage:
        return TokenUsage(
            sum(r.usage.input_tokens for r in self.responses),
            sum(r.usage.output_tokens for r in self.responses),
        )

    def cost(self) -> float | None:
        """The sum, or None when a step's cost is unknown (never a partial sum)."""
        costs = [r.cost_usd for r in self.responses]
        return None if not costs or None in costs else sum(c for c in costs if c is not None)

    def summed(self, last: CompletionResponse) -> CompletionResponse:
        """``last`` (the answer, or where the loop stopped) with the whole run's usage, cost
        and transcript; its latency is the loop's, tool calls included."""
        transcript = self.transcript(last.text)
        return replace(
            last,
            usage=self.usage(),
            cached=bool(self.responses) and all(r.cached for r in self.responses),
            replayed=bool(self.responses) and all(r.replayed for r in self.responses),
            latency_ms=transcript.duration_ms or 0.0,
            cost_usd=self.cost(),
            repaired=sum(r.repaired for r in self.responses),
            transcript=transcript,
        )

    def transcript(self, answer: str) -> Transcript:
        usage = self.usage()
        return Transcript(
            format=FORMAT,
            answer=answer,
            steps=self.steps,
            usage=Usage(usage.input_tokens, usage.output_tokens),
            cost_usd=self.cost(),
            duration_ms=round((time.perf_counter() - self.started) * 1000, 1),
        )


async def run_tool_loop(
    target: Target, request: CompletionRequest, toolbox: Toolbox, max_turns: int
) -> CompletionResponse:
    """The final answer, with the run's totals and its transcript; ``ToolLoopError`` (a
    ``TargetError``) when there is none."""
    run = _Run()
    messages = list(request.messages)
    for turn in range(1, max_turns + 1):
        step_request = replace(
            request,
            messages=list(messages),
            tools=toolbox.offered(),
            tool_choice=toolbox.choice_for(turn),
        )
        try:
            response = await target.complete(step_request)
        except TargetError as exc:
            raise ToolLoopError(
                f"{exc.message} (model call {turn} of the tool loop)",
                run.summed(CompletionResponse(text="")),
                status=exc.status,
                target=exc.target,
            ) from exc
        step = run.add(response)
        calls = _with_ids(response.tool_calls or [], turn)
        if not calls:
            return run.summed(response)
        for call in calls:
            function = call.get("function") or {}
            arguments, _ = parse_arguments(function.get("arguments"))
            step.tool_calls.append(
                ToolCall(name=str(function.get("name") or ""), arguments=arguments, id=call["id"])
            )
        if turn == max_turns:
            asked = ", ".join(c.name for c in step.tool_calls)
            raise ToolLoopError(
                f"the tool loop reached max_turns ({max_turns} model calls) and the model still "
                f"asks for tools ({asked[:200]}): raise max_turns or check the task",
                run.summed(response),
                target=getattr(target, "name", None),
            )
        messages.append(
            {"role": "assistant", "content": response.text or None, "tool_calls": calls}
        )
        for call, record in zip(calls, step.tool_calls, strict=True):
            raw = (call.get("function") or {}).get("arguments")
            record.arguments, answer = await toolbox.answer(record.name, raw, call["id"])
            record.result, record.is_error = answer.result, answer.is_error
            record.duration_ms = answer.duration_ms
            turn_of_tool = {"role": "tool", "tool_call_id": call["id"], "content": answer.content}
            if answer.is_error:  # Anthropic and Gemini mark it; OpenAI's format cannot
                turn_of_tool["is_error"] = True
            messages.append(turn_of_tool)
    raise AssertionError("unreachable: the last turn returns or raises")


def _with_ids(calls: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The calls, each with an id (a provider that sends none gets one fixed by its place, so
    a replayed run asks the same next request)."""
    out = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        out.append(call if call.get("id") else {**call, "id": f"call_{turn}_{index + 1}"})
    return out
