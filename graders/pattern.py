"""Pattern judge: does a response carry out ReAct, CoVe, Reflexion or RAG (docs/judge-graders.md)?

``config.runs`` judge calls (default 3) each score six universal dimensions 0..5 (PIF, POI, PC,
CA, SRC, IR), pattern robustness PR 0..1 and three pattern-specific dimensions 0..5. The median
of each dimension over the parsed runs is kept; score = (universal sum + pattern sum) / 45, and
the grader fails outright when a hard gate (POI, PC, CA >= 4, PR >= 0.75) does not hold.

    python -m graders.pattern < payload.json     # config: {pattern: react, runs: 3}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from grader_sdk import Abstain, GraderInput, Reading, script_grader
from grader_sdk._record import Record
from grader_sdk.replies import Dimension, read_scores, scaled_number
from graders._judgekit import (
    MAX_TOKENS,
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
)

SCORED_UNIVERSAL = ("PIF", "POI", "PC", "CA", "SRC", "IR")
DEFAULT_RUNS = 3


class UnknownPattern(ValueError):
    """config.pattern names no pattern the judge definition knows."""


class DimensionDef(Record):
    def __init__(self, code: str, title: str, definition: str, maximum: float = 5.0) -> None:
        self.code = code
        self.title = title
        self.definition = definition
        self.maximum = maximum


class PatternSpec(Record):
    def __init__(
        self,
        key: str,
        name: str,
        phases: list[str],
        notes: str,
        dimensions: list[DimensionDef],
        aliases: list[str] | None = None,
    ) -> None:
        self.key = key
        self.name = name
        self.phases = phases
        self.notes = notes
        self.dimensions = dimensions
        self.aliases = [] if aliases is None else aliases


class PatternJudge(Record):
    def __init__(
        self,
        system_prompt: str,
        template: str,
        reply_schema: str,
        universal: list[DimensionDef],
        patterns: dict[str, PatternSpec],
        gates: dict[str, float],
    ) -> None:
        self.system_prompt = system_prompt
        self.template = template
        self.reply_schema = reply_schema
        self.universal = universal
        self.patterns = patterns
        self.gates = gates

    def resolve(self, name: Any) -> PatternSpec:
        if not isinstance(name, str) or not name.strip():
            raise UnknownPattern(f"config.pattern is required (one of: {', '.join(self.patterns)})")
        wanted = _squash(name)
        for spec in self.patterns.values():
            if wanted in {_squash(a) for a in (spec.key, spec.name, *spec.aliases)}:
                return spec
        raise UnknownPattern(f"unknown pattern '{name}' (known: {', '.join(self.patterns)})")


class RunScores(Record):
    def __init__(
        self,
        universal: dict[str, float],
        pattern: dict[str, float],
        failures: list[str] | None = None,
        confidence: float | None = None,
    ) -> None:
        self.universal = universal
        self.pattern = pattern
        self.failures = [] if failures is None else failures
        self.confidence = confidence


class PatternScore(Record):
    """What the grader found; its fields, in this order, are the result's ``details``."""

    def __init__(
        self,
        pattern: str,
        universal_scores: dict[str, float],
        pattern_scores: dict[str, float],
        overall_universal: float,
        overall_pattern: float,
        combined_score: float,
        max_score: float,
        score: float,
        hard_gates_passed: bool,
        hard_gate_failures: list[str],
        failures: list[str],
        pass_rate: float,
        confidence: float | None,
        runs: int,
        successful_runs: int,
        temperature: float,
        unparsed: list[str] | None = None,
    ) -> None:
        self.pattern = pattern
        self.universal_scores = universal_scores
        self.pattern_scores = pattern_scores
        self.overall_universal = overall_universal
        self.overall_pattern = overall_pattern
        self.combined_score = combined_score
        self.max_score = max_score
        self.score = score
        self.hard_gates_passed = hard_gates_passed
        self.hard_gate_failures = hard_gate_failures
        self.failures = failures
        self.pass_rate = pass_rate
        self.confidence = confidence
        self.runs = runs
        self.successful_runs = successful_runs
        self.temperature = temperature
        self.unparsed = [] if unparsed is None else unparsed


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def load_judge(path: str | None = None) -> PatternJudge:
    data = load_definition("pattern", path)
    universal = [
        DimensionDef(code, spec["title"], spec["definition"].strip(), float(spec.get("max", 5)))
        for code, spec in data["universal"].items()
    ]
    patterns = {
        key: PatternSpec(
            key=key,
            name=spec["name"],
            phases=list(spec["phases"]),
            notes=str(spec.get("notes", "")).strip(),
            dimensions=[
                DimensionDef(code, d["title"], d["definition"].strip())
                for code, d in spec["dimensions"].items()
            ],
            aliases=list(spec.get("aliases") or []),
        )
        for key, spec in data["patterns"].items()
    }
    gates = {str(k): float(v) for k, v in (data.get("hard_gates") or {}).items()}
    return PatternJudge(
        system_prompt=str(data["system_prompt"]),
        template=str(data["template"]),
        reply_schema=str(data.get("reply_schema", "")),
        universal=universal,
        patterns=patterns,
        gates=gates,
    )


def _describe(dims: Sequence[DimensionDef], show_range: bool) -> str:
    lines = []
    for d in dims:
        scale = f" [0..{d.maximum:g}]" if show_range and d.maximum != 5 else ""
        lines.append(f"- {d.code} ({d.title}){scale}: {d.definition}")
    return "\n".join(lines)


def build_prompt(judge: PatternJudge, spec: PatternSpec, task: str, response: str) -> str:
    return render(
        judge.template,
        {
            "pattern": spec.name,
            "phases": " -> ".join(spec.phases),
            "pattern_notes": spec.notes,
            "universal": _describe(judge.universal, show_range=True),
            "specific": _describe(spec.dimensions, show_range=False),
            "task": task or "(not given)",
            "response": response,
            "reply_schema": judge.reply_schema,
        },
    )


def _dimensions(dims: Sequence[DimensionDef]) -> list[Dimension]:
    """Reader dimensions: each code, with its title as another name it may be given under."""
    return [Dimension(d.code, (d.title,), 0.0, d.maximum) for d in dims]


def response_format(judge: PatternJudge, spec: PatternSpec) -> dict[str, Any]:
    """The JSON Schema of an audit for ``spec`` (its codes as number fields)."""
    numbers = {"type": "number"}
    return json_schema_format(
        f"{spec.key}_pattern_audit",
        {
            "universal": strict_object({d.code: numbers for d in judge.universal}),
            "pattern": strict_object({d.code: numbers for d in spec.dimensions}),
            "failures": {"type": "array", "items": {"type": "string"}},
            "confidence": numbers,
            "reason": {"type": "string"},
        },
    )


def parse_run(text: str, judge: PatternJudge, spec: PatternSpec) -> Reading:
    """One judge reply as a Reading of RunScores (docs/judge-graders.md, "How replies are read")."""
    universal_dims = _dimensions(judge.universal)
    reading = read_scores(text, [*universal_dims, *_dimensions(spec.dimensions)])
    if not reading.ok:
        return reading
    codes = {d.code for d in universal_dims}
    data = reading.data if isinstance(reading.data, Mapping) else {}
    failures_raw = lookup(data, "failures")
    failures = [str(f) for f in failures_raw] if isinstance(failures_raw, list) else []
    confidence, _ = scaled_number(lookup(data, "confidence"), 0.0, 1.0)
    reading.value = RunScores(
        {k: v for k, v in reading.value.items() if k in codes},
        {k: v for k, v in reading.value.items() if k not in codes},
        failures,
        confidence,
    )
    return reading


def median_per_key(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    return {k: median([row[k] for row in rows if k in row]) for k in keys}


def gate_failures(universal: Mapping[str, float], gates: Mapping[str, float]) -> list[str]:
    failures = []
    for code, minimum in gates.items():
        value = universal.get(code)
        if value is None or value < minimum:
            shown = "missing" if value is None else f"{value:g}"
            failures.append(f"hard gate {code} >= {minimum:g} failed ({shown})")
    return failures


def summarise(
    judge: PatternJudge,
    spec: PatternSpec,
    parsed: Sequence[RunScores],
    runs: int,
    temperature: float,
    unparsed: Sequence[str] = (),
) -> PatternScore:
    if not parsed:
        raise ValueError("no parsed runs to summarise")
    universal = median_per_key([r.universal for r in parsed])
    pattern = median_per_key([r.pattern for r in parsed])
    overall_universal = sum(universal[c] for c in SCORED_UNIVERSAL if c in universal)
    overall_pattern = sum(pattern.values())
    scored_max = sum(d.maximum for d in judge.universal if d.code in SCORED_UNIVERSAL)
    max_score = scored_max + sum(d.maximum for d in spec.dimensions)
    combined = overall_universal + overall_pattern
    gates = gate_failures(universal, judge.gates)
    confidences = [r.confidence for r in parsed if r.confidence is not None]
    return PatternScore(
        pattern=spec.key,
        universal_scores=universal,
        pattern_scores=pattern,
        overall_universal=overall_universal,
        overall_pattern=overall_pattern,
        combined_score=combined,
        max_score=max_score,
        score=combined / max_score if max_score else 0.0,
        hard_gates_passed=not gates,
        hard_gate_failures=gates,
        failures=dedupe(f for r in parsed for f in r.failures),
        pass_rate=len(parsed) / runs,
        confidence=median(confidences) if confidences else None,
        runs=runs,
        successful_runs=len(parsed),
        temperature=temperature,
        unparsed=list(unparsed),
    )


def subject_texts(inp: GraderInput) -> tuple[str, str]:
    """(task shown to the judge, response under judgement) per config.subject."""
    subject = (inp.config or {}).get("subject", "output")
    task = inp.question or conversation_text(inp.input)
    if subject == "input":
        return "", conversation_text(inp.input)
    if subject != "output":
        raise ValueError(f"config.subject must be 'output' or 'input', got {subject!r}")
    if inp.output is None:
        raise Abstain("no candidate output to grade (set config.subject: input to grade the input)")
    return task, inp.output


def evaluate(inp: GraderInput, client: Any, judge: PatternJudge | None = None) -> dict[str, Any]:
    config = inp.config or {}
    judge = judge or load_judge(config.get("definitions"))
    spec = judge.resolve(config.get("pattern"))
    runs = runs_setting(config, DEFAULT_RUNS)
    temperature = temperature_setting(config, runs)
    task, response = subject_texts(inp)
    if not response.strip():
        raise Abstain("the text to grade is empty")
    request = {
        "question": build_prompt(judge, spec, task, response),
        "system_prompt": judge.system_prompt,
        "temperature": temperature,
        "max_tokens": MAX_TOKENS,
        "response_format": response_format(judge, spec),
    }
    readings, unparsed = judge_runs(
        client,
        request,
        runs=runs,
        max_calls=inp.max_calls,
        read=lambda text: parse_run(text, judge, spec),
    )
    parsed = [r.value for r in readings]
    return to_grader_output(
        summarise(judge, spec, parsed, runs, temperature, unparsed), judge.gates
    )


def to_grader_output(result: PatternScore, gates: Mapping[str, float]) -> dict[str, Any]:
    dims = ", ".join(
        f"{k} {v:g}" for k, v in {**result.universal_scores, **result.pattern_scores}.items()
    )
    reason = (
        f"{result.pattern}: {result.combined_score:g}/{result.max_score:g} "
        f"(universal {result.overall_universal:g}, pattern {result.overall_pattern:g}); "
        f"{dims}; {result.successful_runs}/{result.runs} runs parsed"
    )
    if result.hard_gate_failures:
        reason += "; " + "; ".join(result.hard_gate_failures)
    out: dict[str, Any] = {
        "score": result.score,
        "reason": reason,
        "hits": [
            f"hard gate {code} >= {minimum:g} held ({result.universal_scores[code]:g})"
            for code, minimum in gates.items()
            if code in result.universal_scores and result.universal_scores[code] >= minimum
        ],
        "misses": [*result.hard_gate_failures, *result.failures[:10]],
        "details": result.as_dict(),
    }
    if not result.hard_gates_passed:
        out["pass"] = False
    return out


@script_grader
def main(inp: GraderInput) -> dict[str, Any]:
    """Runs at once under ``python -m graders.pattern``; importing only defines it."""
    return evaluate(inp, judge_client())
