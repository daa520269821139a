"""A simulated user: the judge target plays the user of a multi-turn test, in the character
the test describes, writing each next user turn after the scripted ones until it says its stop
phrase or reaches its turn cap (docs/agents.md, "A simulated user").

It asks the judge in the runner's process, through the pool's managed target (its concurrency
limit, retries, cache and cassette, as a grader's judge calls get behind the proxy); its budget
is ``max_turns``, one judge call a turn. Each call is recorded as a grader's are (grader
``simulated-user`` in ``judge-calls.jsonl``) and counts in the case's judge usage.
"""

from __future__ import annotations

import time

from evalrun.judgecall import JudgeCall
from evalrun.results.models import JudgeUsage
from evalrun.spec.models import Message
from evalrun.spec.models import SimulatedUser as Persona
from evalrun.targets import CompletionRequest, Target, TargetError

#: What the judge is told, before the test's own instructions.
ROLE = (
    "You are playing the user of an assistant, to test it. Stay in the character described "
    "below. Each reply of yours is your next message to the assistant and nothing else: no "
    "quotes, no name, no notes on what you are doing. When your goal is reached, or the "
    "conversation cannot go anywhere useful, reply with only this: {stop}\n\n"
    "Your character and your goal:\n{instructions}"
)
#: Its name in ``judge-calls.jsonl``.
NAME = "simulated-user"
#: The judge's cue when the assistant has not spoken yet.
OPENING = "(The assistant is waiting for your first message.)"


class SimulatedUser:
    """Called with the conversation so far; returns the user's next message, or None when the
    user is done (the stop phrase, or the cap reached)."""

    def __init__(
        self, persona: Persona, judge: Target, judge_name: str, case_id: str, repeat: int
    ) -> None:
        self.persona = persona
        self.judge = judge
        self.judge_name = judge_name
        self.case_id, self.repeat = case_id, repeat
        self.written = 0
        #: each judge call it made, for ``judge-calls.jsonl``
        self.calls: list[JudgeCall] = []

    async def __call__(self, history: list[Message]) -> str | None:
        if self.written >= self.persona.max_turns:
            return None
        request = CompletionRequest(
            messages=seen_by_user(history),
            system_prompt=ROLE.format(
                stop=self.persona.stop, instructions=self.persona.instructions
            ),
        )
        record = JudgeCall(
            case_id=self.case_id,
            grader=NAME,
            target=self.judge_name,
            status="error",
            latency_ms=None,
            system_prompt=request.system_prompt,
            question=request.messages[-1]["content"],
            repeat=self.repeat,
        )
        self.calls.append(record)
        started = time.monotonic()
        try:
            response = await self.judge.complete(request)
        except TargetError as exc:
            record.response = exc.message
            raise
        finally:
            record.latency_ms = round((time.monotonic() - started) * 1000, 3)
        record.status, record.response = "ok", response.text
        record.input_tokens, record.output_tokens = (
            response.usage.input_tokens,
            response.usage.output_tokens,
        )
        record.cached, record.replayed = response.cached, response.replayed
        record.cost_usd = response.cost_usd
        text = response.text.strip()
        if self.persona.stop.casefold() in text.casefold():
            return None
        if not text:
            raise TargetError(f"judge '{self.judge_name}' wrote an empty message")
        self.written += 1
        return text

    def count_in(self, usage: JudgeUsage) -> None:
        """Add the judge calls it made to a case's ``usage.judge``."""
        for call in self.calls:
            usage.calls += 1
            usage.input_tokens += call.input_tokens
            usage.output_tokens += call.output_tokens
            usage.cost_usd += call.cost_usd or 0.0


def seen_by_user(history: list[Message]) -> list[dict[str, str]]:
    """The conversation from the simulated user's side: the assistant's replies are what it
    reads (``user``), its own earlier messages what it said (``assistant``); the target's
    system prompt is not its business."""
    swap = {"assistant": "user", "user": "assistant"}
    messages = [{"role": swap[m.role], "content": m.text()} for m in history if m.role in swap]
    if not messages or messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": OPENING})
    return messages
