"""A simulated user: the judge target plays the user of a multi-turn test, in the character
the test describes, writing each next user turn after the scripted ones until it says its stop
phrase or reaches its turn cap (docs/agents.md, "A simulated user").

It asks the judge in the runner's process, through the pool's managed target (its concurrency
limit, retries, cache and cassette, as a grader's judge calls get behind the proxy); its budget
is ``max_turns``, one judge call a turn, and its calls count in the case's judge usage.
"""

from __future__ import annotations

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
#: The judge's cue when the assistant has not spoken yet.
OPENING = "(The assistant is waiting for your first message.)"


class SimulatedUser:
    """Called with the conversation so far; returns the user's next message, or None when the
    user is done (the stop phrase, or the cap reached)."""

    def __init__(self, persona: Persona, judge: Target, judge_name: str) -> None:
        self.persona = persona
        self.judge = judge
        self.judge_name = judge_name
        self.written = 0
        self._usage = JudgeUsage()

    async def __call__(self, history: list[Message]) -> str | None:
        if self.written >= self.persona.max_turns:
            return None
        request = CompletionRequest(
            messages=seen_by_user(history),
            system_prompt=ROLE.format(
                stop=self.persona.stop, instructions=self.persona.instructions
            ),
        )
        response = await self.judge.complete(request)
        self._usage.calls += 1
        self._usage.input_tokens += response.usage.input_tokens
        self._usage.output_tokens += response.usage.output_tokens
        self._usage.cost_usd += response.cost_usd or 0.0
        text = response.text.strip()
        if self.persona.stop.casefold() in text.casefold():
            return None
        if not text:
            raise TargetError(f"judge '{self.judge_name}' wrote an empty message")
        self.written += 1
        return text

    def count_in(self, usage: JudgeUsage) -> None:
        """Add the judge calls it made to a case's ``usage.judge``."""
        usage.calls += self._usage.calls
        usage.input_tokens += self._usage.input_tokens
        usage.output_tokens += self._usage.output_tokens
        usage.cost_usd += self._usage.cost_usd


def seen_by_user(history: list[Message]) -> list[dict[str, str]]:
    """The conversation from the simulated user's side: the assistant's replies are what it
    reads (``user``), its own earlier messages what it said (``assistant``); the target's
    system prompt is not its business."""
    swap = {"assistant": "user", "user": "assistant"}
    messages = [{"role": swap[m.role], "content": m.text()} for m in history if m.role in swap]
    if not messages or messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": OPENING})
    return messages
