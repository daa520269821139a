"""A multi-turn test: the target answers turn by turn with the conversation so far, each turn's
graders grade its reply, the conversation's graders grade the whole, and the turns' scores make
the case's (docs/agents.md, "Multi-turn conversations"; AgentV's ``mode: conversation``).

The target and the graders are the case grader's own (``Answer``, ``Grade``), so a turn is asked
and graded as a single-turn case is: cache, cassette, retries and the judge proxy hold per turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from evalrun.judgecall import JudgeCall
from evalrun.launcher.launch import GraderRun
from evalrun.results.models import CaseResult, GraderOutcome, ProxyUsage, TargetUsage
from evalrun.results.scoring import case_status
from evalrun.safetext import repaired_note
from evalrun.spec.models import GraderSpec, Message, TestCase, Turn
from evalrun.targets import CompletionResponse, TargetError, ToolLoopError
from evalrun.transcripts import Step, Transcript, Usage

#: The target's answer to a case: text, latency (ms), usage, lone surrogates repaired, and the
#: agent's transcript when the target reads one (``CaseGrader._answer``).
Answered = tuple[str | None, float, TargetUsage | None, int, Transcript | None]
Answer = Callable[[TestCase], Awaitable[Answered]]
#: Runs graders on one reply: (graders, the case they see, the output, its transcript).
Grade = Callable[
    [list[GraderSpec], TestCase, str | None, Transcript | None], Awaitable[list[GraderRun]]
]
#: A group of grader results -> its score (the eval's rubric, or the weighted mean).
Score = Callable[[list[GraderOutcome]], float | None]
#: The user's next message, given the conversation so far, or None when the user is done
#: (a simulated user, docs/agents.md); called after the scripted turns.
NextUser = Callable[[list[Message]], Awaitable[str | None]]

#: The format of a conversation's transcript when no turn's target read an agent's stream.
FORMAT = "conversation"


@dataclass
class _Turns:
    """What the conversation has produced so far."""

    history: list[Message]
    steps: list[Step] = field(default_factory=list)
    replies: list[Answered] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    calls: list[JudgeCall] = field(default_factory=list)
    outcomes: dict[int, GraderOutcome] = field(default_factory=dict)
    #: a turn whose tool loop stopped without an answer: what its steps spent
    stopped: CompletionResponse | None = None


async def converse(
    case: TestCase,
    result: CaseResult,
    *,
    answer: Answer,
    grade: Grade,
    score: Score,
    conversation_graders: list[GraderSpec],
    next_user: NextUser | None = None,
) -> list[JudgeCall]:
    """Play ``case.turns``, then ``next_user``'s turns, against the target, filling ``result``
    (always one result: a target error on turn k keeps turns 1..k-1 and their grades, and the
    case is an error)."""
    done = _Turns(history=list(case.input_messages))
    pending: dict[int, asyncio.Task[list[GraderRun]]] = {}
    stop_on_failure = case.on_turn_failure == "stop"
    failed_at: int | None = None
    turns: list[Turn] = list(case.turns or ())
    number = 0
    while True:
        number += 1
        if number <= len(turns):
            turn = turns[number - 1]
        else:
            if next_user is None or failed_at is not None:
                break
            try:
                said = await next_user(done.history)
            except TargetError as exc:
                result.error = f"the simulated user could not write turn {number}: {exc.message}"
                break
            if said is None:
                break
            turn = Turn(input=said)
        if failed_at is not None:
            done.outcomes[number] = _skipped(number, failed_at)
            continue
        for message in turn.input_messages:
            done.history.append(message)
            done.steps.append(Step(role=message.role, text=message.text()))
        turn_case = _turn_case(case, turn, _window(done.history, case))
        try:
            reply = await answer(turn_case)
        except TargetError as exc:
            result.error = (
                f"target '{exc.target or result.target}' failed on turn {number}: {exc.message}"
            )
            if isinstance(exc, ToolLoopError):  # the steps of the turn's loop, and their cost
                done.steps.extend(exc.transcript.steps)
                done.stopped = exc.spent
            break
        _record_reply(done, reply, number, result)
        if not turn.graders:
            continue
        graders = [g.model_copy(update={"name": f"turn-{number}/{g.name}"}) for g in turn.graders]
        task = asyncio.ensure_future(grade(graders, turn_case, reply[0], reply[4]))
        if not stop_on_failure:
            pending[number] = task  # graded while the next turn is asked
            continue
        runs = await task
        done.outcomes[number] = _turn_outcome(number, runs, done, score)
        if done.outcomes[number].status in ("failed", "error"):
            failed_at = number
    graded = await asyncio.gather(*pending.values(), return_exceptions=True)
    for number, turn_runs in zip(pending, graded, strict=True):
        if isinstance(turn_runs, BaseException):
            raise turn_runs  # a bug of ours: the case grader makes it the case's error
        done.outcomes[number] = _turn_outcome(number, turn_runs, done, score)
    _finish(result, done)
    if result.error is None and conversation_graders:
        whole = case.model_copy(update={"turns": None, "expected_output": None, "output": None})
        text = conversation_text(done.history)
        runs = await grade(conversation_graders, whole, text, _transcript(done))
        done.outcomes[0] = _group("conversation", runs, done, score, "the whole conversation")
    outcomes = [done.outcomes[k] for k in sorted(done.outcomes) if k > 0]
    if 0 in done.outcomes:
        outcomes.append(done.outcomes[0])
    result.graders = outcomes
    if result.error is not None:
        return done.calls  # the case is an error; the turns before it keep their grades
    result.score = aggregate([o.score for o in outcomes if o.score is not None], case.aggregation)
    result.status = case_status(outcomes)
    if not outcomes:
        result.error = "no graders apply to this case"
    return done.calls


def target_usage(response: CompletionResponse) -> TargetUsage:
    """A target's answer's cost as a result line keeps it."""
    return TargetUsage(
        input=response.usage.input_tokens,
        output=response.usage.output_tokens,
        total=response.usage.total_tokens,
        cached=response.cached,
        replayed=response.replayed,
        cost_usd=response.cost_usd,
    )


def conversation_id(case: TestCase) -> str | None:
    """AgentV's ``conversation_id`` (kept in the test's metadata by the loader): a label that
    groups the cases of one conversation in the results; it changes nothing a run does."""
    value = case.metadata.get("conversation_id")
    return None if value is None else str(value)


def aggregate(scores: Sequence[float], how: str | None) -> float | None:
    """The case's score from its turns' and the conversation's scores: ``mean`` (the default),
    ``min`` (the weakest turn) or ``max`` (AgentV's turn aggregation, docs/agents.md)."""
    if not scores:
        return None
    if how == "min":
        return min(scores)
    if how == "max":
        return max(scores)
    return sum(scores) / len(scores)


def conversation_text(history: Sequence[Message]) -> str:
    """The conversation as the text the conversation's graders grade: ``role: content`` per
    message, a blank line between (AgentV's form of it)."""
    return "\n\n".join(f"{m.role}: {m.text()}" for m in history)


def _turn_case(case: TestCase, turn: Turn, sent: list[Message]) -> TestCase:
    """The case a turn's target call and graders see: the conversation so far (what is sent)
    as its input, the turn's expected output and graders."""
    update = {"input": sent, "expected_output": turn.expected_output, "graders": turn.graders}
    return case.model_copy(update={**update, "output": None, "turns": None})


def _window(history: list[Message], case: TestCase) -> list[Message]:
    """``window_size: N``: the system messages and the last 2N others, the turn's own message
    among them, as AgentV cuts them (docs/agents.md); unset, the whole conversation."""
    if case.window_size is None:
        return list(history)
    system = [m for m in history if m.role == "system"]
    rest = [m for m in history if m.role != "system"]
    return system + rest[-2 * case.window_size :]


def _record_reply(done: _Turns, reply: Answered, number: int, result: CaseResult) -> None:
    text, latency_ms, usage, repaired, transcript = reply
    done.replies.append(reply)
    done.history.append(Message(role="assistant", content=text or ""))
    if repaired:
        result.warnings.append(repaired_note(repaired, f"the target's answer on turn {number}"))
    if transcript is not None:
        done.formats.append(transcript.format)
        done.steps.extend(transcript.steps)
        last = transcript.steps[-1] if transcript.steps else None
        if last is None or last.role != "assistant" or last.text != transcript.answer:
            done.steps.append(Step(role="assistant", text=transcript.answer))
        return
    step_usage = Usage(usage.input, usage.output) if usage is not None else None
    done.steps.append(
        Step(role="assistant", text=text, duration_ms=round(latency_ms, 1), usage=step_usage)
    )


def _turn_outcome(number: int, runs: list[GraderRun], done: _Turns, score: Score) -> GraderOutcome:
    return _group(f"turn-{number}", runs, done, score, f"turn {number}")


def _group(
    name: str, runs: list[GraderRun], done: _Turns, score: Score, what: str
) -> GraderOutcome:
    """One turn's graders (or the conversation's) as one result: its score is theirs combined,
    its status theirs, and each grader's full result is kept in ``details.graders``."""
    outcomes = [run.result for run in runs]
    for run in runs:
        done.calls += run.judge_calls
    status = case_status(outcomes)
    # scored under the names the file gives them, so an eval's rubric: names a turn's graders
    own_names = [replace(g, name=g.name.removeprefix(f"{name}/")) for g in outcomes]
    reasons = [f"{g.name}: {g.reason}" for g in outcomes if g.reason]
    return GraderOutcome(
        name=name,
        status=status,
        score=score(own_names),
        passed=status == "passed",
        reason="; ".join(reasons) or f"{what}: {status}",
        checks=[
            {"text": g.name, "pass": bool(g.passed), "score": g.score, "reason": g.reason}
            for g in outcomes
        ],
        details={"graders": [g.to_dict() for g in outcomes]},
        duration_ms=round(sum(g.duration_ms for g in outcomes), 1),
        proxy=_proxy_sum(outcomes),
    )


def _skipped(number: int, failed_at: int) -> GraderOutcome:
    """A turn never asked because an earlier one failed (``on_turn_failure: stop``): it scores
    0, as in AgentV."""
    reason = f"skipped: turn {failed_at} failed (on_turn_failure: stop)"
    return GraderOutcome(
        name=f"turn-{number}", status="failed", score=0.0, passed=False, reason=reason
    )


def _proxy_sum(outcomes: list[GraderOutcome]) -> ProxyUsage | None:
    used = [g.proxy for g in outcomes if g.proxy is not None]
    if not used:
        return None
    total = ProxyUsage()
    for usage in used:
        for key in ProxyUsage.__dataclass_fields__:
            setattr(total, key, getattr(total, key) + getattr(usage, key))
    return total


def _transcript(done: _Turns) -> Transcript:
    """Every turn: the user's messages, the target's steps and replies; totals where every
    turn reported them (docs/agents.md)."""
    answers = [reply[0] or "" for reply in done.replies]
    spent = _spent(done)
    usages = [_reply_usage(reply) for reply in spent]
    costs = [_reply_cost(reply) for reply in spent]
    known_usage = [u for u in usages if u is not None]
    usage = None
    if spent and len(known_usage) == len(usages):
        usage = Usage(
            sum(u.input_tokens for u in known_usage), sum(u.output_tokens for u in known_usage)
        )
    known_costs = [c for c in costs if c is not None]
    cost = sum(known_costs) if spent and len(known_costs) == len(costs) else None
    duration = round(sum(reply[1] for reply in spent), 1) if spent else None
    return Transcript(
        format=done.formats[0] if done.formats else FORMAT,
        answer=answers[-1] if answers else "",
        steps=list(done.steps),
        usage=usage,
        cost_usd=cost,
        duration_ms=duration,
    )


def _spent(done: _Turns) -> list[Answered]:
    """Every turn's model calls: the replies, and the steps of a tool loop that stopped."""
    if done.stopped is None:
        return list(done.replies)
    stopped = done.stopped
    usage = target_usage(stopped)
    return [*done.replies, (None, stopped.latency_ms, usage, 0, stopped.transcript)]


def _reply_usage(reply: Answered) -> Usage | None:
    transcript, usage = reply[4], reply[2]
    if transcript is not None:
        return transcript.usage
    return Usage(usage.input, usage.output) if usage is not None else None


def _reply_cost(reply: Answered) -> float | None:
    transcript, usage = reply[4], reply[2]
    if transcript is not None and transcript.cost_usd is not None:
        return transcript.cost_usd
    return usage.cost_usd if usage is not None else None


def _finish(result: CaseResult, done: _Turns) -> None:
    """The result's output (the last reply), transcript, usage and target time."""
    transcript = _transcript(done)
    result.output = transcript.answer if done.replies else None
    result.transcript = transcript.to_dict()
    spent = _spent(done)
    usages = [reply[2] for reply in spent]
    if usages and all(u is not None for u in usages):
        known = [u for u in usages if u is not None]
        costs = [u.cost_usd for u in known]
        result.usage.target = TargetUsage(
            input=sum(u.input for u in known),
            output=sum(u.output for u in known),
            total=sum(u.total for u in known),
            cached=all(u.cached for u in known),
            replayed=all(u.replayed for u in known),
            cost_usd=sum(c for c in costs if c is not None) if None not in costs else None,
        )
    if spent:
        result.timings.target_ms = round(sum(reply[1] for reply in spent), 1)
