"""Prompt quality: clarity, effectiveness, structure, specificity, completeness, each 0..10.

``config.runs`` judge calls (default 1); the median per dimension over the parsed runs; overall =
mean of the five; grade A/B/C/D/F at 90/80/70/60 percent; pass at overall >= 7.0; score =
overall / 10. Prompts over 18,000 characters are cut to their first 16,000 and last 1,000.

    python -m graders.prompt_quality < payload.json     # config: {subject: input, runs: 1}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grader_sdk import Abstain, GraderInput, Reading, script_grader
from grader_sdk._record import Record, replace
from grader_sdk.replies import Dimension, read_scores, scaled_number
from graders._judgekit import (
    MAX_TOKENS,
    config_number,
    conversation_text,
    dedupe,
    json_schema_format,
    judge_client,
    judge_runs,
    load_definition,
    lookup,
    median,
    render,
    runs_setting,
    strict_object,
    temperature_setting,
    truncate_middle,
)

DIMENSIONS = ("clarity", "effectiveness", "structure", "specificity", "completeness")
MAX_POINTS = 10.0
MAX_IMPROVEMENTS = 5
DEFAULT_GRADES = (("A", 90.0), ("B", 80.0), ("C", 70.0), ("D", 60.0))


class PromptJudge(Record):
    def __init__(
        self,
        system_prompt: str,
        template: str,
        reply_schema: str,
        dimensions: dict[str, str],
        pass_score: float = 7.0,
        grades: tuple[tuple[str, float], ...] = DEFAULT_GRADES,
    ) -> None:
        self.system_prompt = system_prompt
        self.template = template
        self.reply_schema = reply_schema
        self.dimensions = dimensions
        self.pass_score = pass_score
        self.grades = grades


class RunScores(Record):
    def __init__(
        self,
        scores: dict[str, float],
        improvements: list[str] | None = None,
        confidence: float | None = None,
        summary: str = "",
    ) -> None:
        self.scores = scores
        self.improvements = [] if improvements is None else improvements
        self.confidence = confidence
        self.summary = summary


class PromptScore(Record):
    """What the grader found; its fields, in this order, are the result's ``details``."""

    def __init__(
        self,
        scores: dict[str, float],
        overall_score: float,
        score: float,
        grade: str,
        passed: bool,
        improvements: list[str],
        confidence: float | None,
        runs: int,
        successful_runs: int,
        pass_rate: float,
        temperature: float,
        truncated: bool,
        prompt_chars: int,
        summary: str = "",
        unparsed: list[str] | None = None,
    ) -> None:
        self.scores = scores
        self.overall_score = overall_score
        self.score = score
        self.grade = grade
        self.passed = passed
        self.improvements = improvements
        self.confidence = confidence
        self.runs = runs
        self.successful_runs = successful_runs
        self.pass_rate = pass_rate
        self.temperature = temperature
        self.truncated = truncated
        self.prompt_chars = prompt_chars
        self.summary = summary
        self.unparsed = [] if unparsed is None else unparsed


def load_judge(path: str | None = None) -> PromptJudge:
    data = load_definition("prompt_standard", path)
    grades = tuple(
        sorted(
            ((str(k), float(v)) for k, v in (data.get("grades") or {}).items()),
            key=lambda item: -item[1],
        )
    )
    return PromptJudge(
        system_prompt=str(data["system_prompt"]),
        template=str(data["template"]),
        reply_schema=str(data.get("reply_schema", "")),
        dimensions={k: str(v["definition"]).strip() for k, v in data["dimensions"].items()},
        pass_score=float(data.get("pass_score", 7.0)),
        grades=grades or DEFAULT_GRADES,
    )


def grade_for(overall: float, grades: Sequence[tuple[str, float]] = DEFAULT_GRADES) -> str:
    """Letter for an overall 0..10 score: the first grade whose percent threshold is met."""
    percent = round(overall / MAX_POINTS * 100, 9)
    for letter, minimum in sorted(grades, key=lambda item: -item[1]):
        if percent >= minimum:
            return letter
    return "F"


def build_prompt(judge: PromptJudge, prompt: str) -> str:
    listing = "\n".join(f"- {name}: {text}" for name, text in judge.dimensions.items())
    return render(
        judge.template,
        {"dimensions": listing, "prompt": prompt, "reply_schema": judge.reply_schema},
    )


def response_format(dimensions: Sequence[str] = DIMENSIONS) -> dict[str, Any]:
    """The JSON Schema of a prompt review: a 0..10 number per dimension, and the extras."""
    return json_schema_format(
        "prompt_review",
        {
            "scores": strict_object({name: {"type": "number"} for name in dimensions}),
            "improvements": {"type": "array", "items": {"type": "string"}},
            "confidence": {"type": "number"},
            "summary": {"type": "string"},
        },
    )


def parse_run(text: str, dimensions: Sequence[str] = DIMENSIONS) -> Reading:
    """One judge reply as a Reading of RunScores (docs/judge-graders.md, "How replies are read")."""
    reading = read_scores(text, [Dimension(name, (), 0.0, MAX_POINTS) for name in dimensions])
    if not reading.ok:
        return reading
    data = reading.data if isinstance(reading.data, Mapping) else {}
    raw_improvements = lookup(data, "improvements")
    if isinstance(raw_improvements, str):
        raw_improvements = [raw_improvements]
    if not isinstance(raw_improvements, list):
        raw_improvements = []
    improvements = [str(i) for i in raw_improvements if isinstance(i, str | int | float)]
    confidence, _ = scaled_number(lookup(data, "confidence"), 0.0, 1.0)
    summary = lookup(data, "summary")
    reading.value = RunScores(
        reading.value, improvements, confidence, summary if isinstance(summary, str) else ""
    )
    return reading


def summarise(
    judge: PromptJudge,
    parsed: Sequence[RunScores],
    runs: int,
    temperature: float,
    truncated: bool,
    prompt_chars: int,
    unparsed: Sequence[str] = (),
) -> PromptScore:
    if not parsed:
        raise ValueError("no parsed runs to summarise")
    names = list(judge.dimensions)
    scores = {n: median([r.scores[n] for r in parsed]) for n in names}
    overall = sum(scores.values()) / len(scores)
    confidences = [r.confidence for r in parsed if r.confidence is not None]
    return PromptScore(
        scores=scores,
        overall_score=overall,
        score=overall / MAX_POINTS,
        grade=grade_for(overall, judge.grades),
        passed=overall >= judge.pass_score,
        improvements=dedupe((i for r in parsed for i in r.improvements), MAX_IMPROVEMENTS),
        confidence=median(confidences) if confidences else None,
        runs=runs,
        successful_runs=len(parsed),
        pass_rate=len(parsed) / runs,
        temperature=temperature,
        truncated=truncated,
        prompt_chars=prompt_chars,
        summary=next((r.summary for r in parsed if r.summary), ""),
        unparsed=list(unparsed),
    )


def subject_text(inp: GraderInput) -> str:
    subject = (inp.config or {}).get("subject", "input")
    if subject == "input":
        return conversation_text(inp.input)
    if subject == "output":
        if inp.output is None:
            raise Abstain("config.subject is 'output' but the case has no output")
        return inp.output
    raise ValueError(f"config.subject must be 'input' or 'output', got {subject!r}")


def evaluate(inp: GraderInput, client: Any, judge: PromptJudge | None = None) -> dict[str, Any]:
    config = inp.config or {}
    judge = judge or load_judge(config.get("definitions"))
    if config.get("pass_score") is not None:
        pass_score = config_number(config["pass_score"])
        if pass_score is None:
            raise ValueError(f"config.pass_score must be a number, got {config['pass_score']!r}")
        judge = replace(judge, pass_score=pass_score)
    runs = runs_setting(config, 1)
    temperature = temperature_setting(config, runs)
    prompt = subject_text(inp)
    if not prompt.strip():
        raise Abstain("the prompt to grade is empty")
    shown = truncate_middle(prompt)
    names = tuple(judge.dimensions)
    request = {
        "question": build_prompt(judge, shown),
        "system_prompt": judge.system_prompt,
        "temperature": temperature,
        "max_tokens": MAX_TOKENS,
        "response_format": response_format(names),
    }
    readings, unparsed = judge_runs(
        client, request, runs=runs, max_calls=inp.max_calls, read=lambda t: parse_run(t, names)
    )
    parsed = [r.value for r in readings]
    result = summarise(judge, parsed, runs, temperature, shown != prompt, len(prompt), unparsed)
    return to_grader_output(result, judge.pass_score)


def to_grader_output(result: PromptScore, pass_score: float) -> dict[str, Any]:
    dims = ", ".join(f"{k} {v:g}" for k, v in result.scores.items())
    verdict = "pass" if result.passed else f"below {pass_score:g}"
    reason = (
        f"overall {result.overall_score:.2f}/10, grade {result.grade} ({verdict}); {dims}; "
        f"{result.successful_runs}/{result.runs} runs parsed"
    )
    if result.truncated:
        reason += f"; prompt truncated from {result.prompt_chars} characters"
    return {
        "score": result.score,
        "pass": result.passed,
        "reason": reason,
        "hits": [f"{k} {v:g}/10" for k, v in result.scores.items() if v >= pass_score],
        "misses": [f"{k} {v:g}/10" for k, v in result.scores.items() if v < pass_score],
        "details": result.as_dict(),
    }


@script_grader
def main(inp: GraderInput) -> dict[str, Any]:
    """Runs at once under ``python -m graders.prompt_quality``; importing only defines it."""
    return evaluate(inp, judge_client())
