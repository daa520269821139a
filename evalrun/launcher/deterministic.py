"""Graders that need no process and no judge (the ``check`` kinds of ``evalrun/spec/kinds.py``).
They produce the same ``GraderOutcome`` a script grader would."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalrun.launcher.field_accuracy import score_fields
from evalrun.results.models import GraderOutcome
from evalrun.spec.models import GraderSpec, Message
from evalrun.transcripts import Transcript
from evalrun.transcripts.agentv_trajectory import score_agentv
from evalrun.transcripts.metrics import check_metrics, read_limits
from evalrun.transcripts.skills import judge_skills, read_expectation, read_trigger, skill_uses
from evalrun.transcripts.tool_assertions import ASSERTIONS, trajectory_steps
from evalrun.transcripts.trajectory import Call, ShareVerdict, check_minimums, match_trajectory
from evalrun.transcripts.trajectory_config import read_trajectory_config


def run_deterministic(
    spec: GraderSpec,
    output: str | None,
    transcript: Transcript | None = None,
    expected: list[Message] | None = None,
) -> GraderOutcome:
    """``transcript``: what the agent did, for the checks that read it (docs/agents.md);
    ``expected``: the test's expected answer, for the checks that compare with it."""
    result = GraderOutcome(
        name=spec.name or spec.type, status="error", weight=spec.weight, threshold=spec.threshold
    )
    if spec.kind.runs == "unsupported":
        result.reason = spec.kind.why  # an error, never a silent score (docs/eval-files.md)
        return result
    if output is None:
        result.status, result.reason = "unscored", "there is no output to check"
        return result
    outcome: tuple[bool, str] | Scored
    try:
        if spec.type in EXPECTED_CHECKS:
            outcome = EXPECTED_CHECKS[spec.type](spec, output, expected or [])
        else:
            outcome = _check(spec, output, transcript)
    except ValueError as exc:
        result.reason = str(exc)
        return result
    if isinstance(outcome, Scored):
        return _scored(result, outcome)
    ok, reason = outcome
    if spec.negate:
        ok, reason = not ok, f"not ({reason})"
    result.passed = ok
    result.score = 1.0 if ok else 0.0
    result.status = "passed" if ok else "failed"
    result.reason = reason
    (result.hits if ok else result.misses).append(reason)
    return result


@dataclass(frozen=True)
class Scored:
    """A check's verdict as a score from 0 to 1 (passing at the grader's threshold) with the
    assertions it is made of. The check has applied ``negate`` itself, since AgentV's rule for it
    differs by grader (docs/agents.md)."""

    score: float
    reason: str
    checks: list[dict[str, Any]] = field(default_factory=list)


def _scored(result: GraderOutcome, outcome: Scored) -> GraderOutcome:
    result.score = outcome.score
    result.passed = outcome.score >= result.threshold
    result.status = "passed" if result.passed else "failed"
    result.reason = outcome.reason
    result.checks = outcome.checks
    for check in outcome.checks:
        (result.hits if check["pass"] else result.misses).append(check["text"])
    return result


def _values(spec: GraderSpec) -> list[str]:
    return [str(v) for v in spec.value] if isinstance(spec.value, list) else [str(spec.value)]


#: a check reads the output and, if it wants, the agent's transcript (None without one); it
#: passes or fails, or gives a ``Scored`` verdict
Check = Callable[[GraderSpec, str, Transcript | None], tuple[bool, str] | Scored]

#: a check that compares the output with the test's expected answer (its messages)
ExpectedCheck = Callable[[GraderSpec, str, list[Message]], Scored]

#: type -> its check: the ``check`` kinds of ``evalrun/spec/kinds.py`` (a test keeps them equal
#: to the keys of both tables together).
CHECKS: dict[str, Check] = {}
EXPECTED_CHECKS: dict[str, ExpectedCheck] = {}


def deterministic_check(*types: str) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        CHECKS.update(dict.fromkeys(types, check))
        return check

    return register


def _check(
    spec: GraderSpec, output: str, transcript: Transcript | None
) -> tuple[bool, str] | Scored:
    check = CHECKS.get(spec.type)
    if check is None:
        raise ValueError(f"'{spec.type}' is not a deterministic grader")
    return check(spec, output, transcript)


@deterministic_check("contains", "icontains")
def _contains(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    fold = (lambda s: s.casefold()) if spec.type == "icontains" else (lambda s: s)
    missing = [v for v in _values(spec) if fold(v) not in fold(output)]
    if missing:
        return False, "output lacks " + ", ".join(repr(v) for v in missing)
    return True, "output contains " + ", ".join(repr(v) for v in _values(spec))


@deterministic_check("contains-all", "icontains-all", "contains-any", "icontains-any")
def _contains_some(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    """AgentV's list checks: ``-all`` needs every value, ``-any`` one; ``i`` ignores case."""
    fold = (lambda s: s.casefold()) if spec.type.startswith("i") else (lambda s: s)
    values = _values(spec)
    found = [v for v in values if fold(v) in fold(output)]
    if spec.type.endswith("-all"):
        missing = [v for v in values if v not in found]
        if missing:
            return False, "output lacks " + ", ".join(repr(v) for v in missing)
        return True, "output contains " + ", ".join(repr(v) for v in values)
    if found:
        return True, "output contains " + ", ".join(repr(v) for v in found)
    return False, "output contains none of " + ", ".join(repr(v) for v in values)


@deterministic_check("starts-with", "ends-with")
def _starts_or_ends(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    """The output starts or ends with one of the values (both without surrounding whitespace)."""
    text = output.strip()
    test = text.startswith if spec.type == "starts-with" else text.endswith
    where = "starts" if spec.type == "starts-with" else "ends"
    hit = next((v for v in _values(spec) if test(v.strip())), None)
    if hit is not None:
        return True, f"output {where} with {hit!r}"
    values = ", ".join(repr(v) for v in _values(spec))
    return False, f"output does not {where[:-1]} with {values}"


@deterministic_check("regex")
def _regex(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    found = re.search(str(spec.value), output)  # compiled when the file was validated
    return bool(found), f"regex {spec.value!r} {'matches' if found else 'does not match'}"


@deterministic_check("equals")
def _equals(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    same = output.strip() == str(spec.value).strip()
    return same, "output equals the value" if same else "output differs from the value"


@deterministic_check("is-json")
def _is_json(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    try:
        json.loads(output)
    except json.JSONDecodeError as exc:
        return False, f"output is not JSON: {exc.msg} at line {exc.lineno}"
    return True, "output is valid JSON"


@deterministic_check("json-schema")
def _json_schema(spec: GraderSpec, output: str, _: Transcript | None) -> tuple[bool, str]:
    """The standard's verdict, every error named by its path (docs/eval-files.md)."""
    from evalrun.spec.jsonschema_check import output_errors  # slow import: only here

    try:
        document = json.loads(output)
    except json.JSONDecodeError as exc:
        return False, f"output is not JSON: {exc.msg}"
    problems = output_errors(document, spec.schema_ or {})
    if problems:
        return False, "; ".join(problems)
    return True, "output matches the schema"


@deterministic_check("tool-trajectory")
def _tool_trajectory(
    spec: GraderSpec, output: str, transcript: Transcript | None
) -> tuple[bool, str] | Scored:
    """The agent's tool calls against ``config.expected``, or AgentV's ``minimums``
    (docs/agents.md, "The tool-trajectory grader")."""
    transcript = _needs_transcript(spec, transcript)
    config = read_trajectory_config(spec.config)  # checked when the file loaded too
    actual = [Call(c.name, c.arguments, duration_ms=c.duration_ms) for c in transcript.tool_calls]
    if config.minimums:
        verdict = check_minimums(config.minimums, transcript.tool_calls)
    elif config.rules == "agentv" and config.mode == "any-order":
        verdict = ShareVerdict(1.0, "no minimums given (AgentV's any_order reads only those)", [])
    elif config.rules == "agentv":
        verdict = score_agentv(config.mode, config.expected, actual, config.args)
    else:
        result = match_trajectory(config.expected, actual, config.mode, config.args)
        return result.passed, result.reason
    if spec.negate:
        return Scored(1 - verdict.score, f"not ({verdict.reason})", verdict.checks)
    return Scored(verdict.score, verdict.reason, verdict.checks)


def _needs_transcript(spec: GraderSpec, transcript: Transcript | None) -> Transcript:
    """The transcript, said missing first: without one no config could make the check run."""
    if transcript is None:
        raise ValueError(
            f"{spec.type} needs the agent's transcript (a cli target's transcript:): it "
            "needs a transcript this target gives none of"
        )
    return transcript


@deterministic_check("execution-metrics")
def _execution_metrics(spec: GraderSpec, output: str, transcript: Transcript | None) -> Scored:
    """The share of the limits the run kept to; ``negate`` scores 1 minus that, as AgentV
    does (docs/agents.md, "execution-metrics")."""
    transcript = _needs_transcript(spec, transcript)
    verdict = check_metrics(read_limits(spec.config), transcript)
    checks = verdict.assertions
    if spec.negate:
        checks = [{"text": f"not ({c['text']})", "pass": not c["pass"]} for c in checks]
        return Scored(1 - verdict.score, "not (" + verdict.reason + ")", checks)
    return Scored(verdict.score, verdict.reason, checks)


@deterministic_check("skill-used", "skill-trigger")
def _skill_used(spec: GraderSpec, output: str, transcript: Transcript | None) -> Scored:
    """The skills the agent used against ``value`` (``not-skill-used``: ones it must not use);
    AgentV 4.x's ``skill-trigger`` names one in ``skill`` with ``should_trigger`` (docs/agents.md,
    "skill-used and skill-trigger")."""
    transcript = _needs_transcript(spec, transcript)
    value: Any
    if spec.type == "skill-trigger":
        value, forbidden = read_trigger(spec.config, spec.negate)
    else:
        value = spec.value if spec.value is not None else spec.config.get("value")
        forbidden = spec.negate
    verdict = judge_skills(read_expectation(value), skill_uses(transcript), forbidden=forbidden)
    score = 1.0 if verdict.passed else 0.0
    return Scored(score, verdict.reason, [{"text": verdict.reason, "pass": verdict.passed}])


@deterministic_check(*ASSERTIONS)
def _trajectory_assertion(spec: GraderSpec, output: str, transcript: Transcript | None) -> Scored:
    """AgentV's ``trajectory:`` assertions on the tool calls; ``negate`` is AgentV's
    ``inverse`` (docs/agents.md, "AgentV's trajectory assertions"). Without a transcript, an
    AgentV file's assertion (``no_transcript: fail``) scores 0 as AgentV does."""
    if transcript is None and spec.config.get("no_transcript") == "fail":
        reason = f"no trace data for {spec.type}: the case has no transcript (scored 0)"
        return Scored(0.0, reason, [{"text": reason, "pass": False}])
    transcript = _needs_transcript(spec, transcript)
    value = spec.value if spec.value is not None else spec.config.get("value")
    assertion = ASSERTIONS[spec.type]
    verdict = assertion(value, trajectory_steps(transcript), inverse=spec.negate)
    score = 1.0 if verdict.passed else 0.0
    return Scored(score, verdict.reason, [{"text": verdict.reason, "pass": verdict.passed}])


def _field_accuracy(spec: GraderSpec, output: str, expected: list[Message]) -> Scored:
    """AgentV's field-accuracy: the output's JSON fields against the last expected assistant
    message's content (docs/eval-files.md, "field-accuracy"). ``negate`` scores 1 minus it."""
    answers = [m.content for m in expected if m.role == "assistant" and m.content]
    score, reason, checks = score_fields(spec.config, output, answers[-1] if answers else None)
    if spec.negate:
        checks = [{"text": f"not ({c['text']})", "pass": not c["pass"]} for c in checks]
        return Scored(1 - score, f"not ({reason})", checks)
    return Scored(score, reason, checks)


EXPECTED_CHECKS["field-accuracy"] = _field_accuracy
