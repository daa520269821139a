"""Answer quality: coherence, fluency, relevance, groundedness, similarity (docs/judge-graders.md).

One judge call per dimension (sent as one batch). Each judge picks a choice on a 1..5 scale that
maps to 0, .25, .5, .75, 1; the score is the (weighted) mean of the dimensions whose reply could
be read. Unreadable replies are reported and left out; if none can be read, the grader abstains.

    python -m graders.quality < payload.json
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grader_sdk import (
    Abstain,
    GraderInput,
    Reading,
    UnsupportedRequest,
    node_text,
    script_grader,
)
from grader_sdk._record import Record
from grader_sdk.replies import read_rating
from graders._judgekit import (
    MAX_TOKENS,
    check_budget,
    config_number,
    conversation_text,
    json_schema_format,
    judge_client,
    load_definition,
    lookup,
    render,
    send_batch,
    shorten,
)

DIMENSIONS = ("coherence", "fluency", "relevance", "groundedness", "similarity")
INPUT_LABELS = {"context": "no context", "expected": "no expected answer"}


class Dimension(Record):
    def __init__(
        self,
        name: str,
        system_prompt: str,
        template: str,
        requires: tuple[str, ...] = (),
        description: str = "",
    ) -> None:
        self.name = name
        self.system_prompt = system_prompt
        self.template = template
        self.requires = requires
        self.description = description


class Definitions(Record):
    def __init__(
        self,
        dimensions: dict[str, Dimension],
        scale: dict[str, float],
        weights: dict[str, float],
        reply_format: str = "",
    ) -> None:
        self.dimensions = dimensions
        self.scale = scale
        self.weights = weights
        self.reply_format = reply_format


class Material(Record):
    """What the templates are filled with."""

    def __init__(self, input: str, output: str, context: str = "", expected: str = "") -> None:
        self.input = input
        self.output = output
        self.context = context
        self.expected = expected

    def has(self, requirement: str) -> bool:
        return bool(getattr(self, requirement, "").strip())


class DimensionResult(Record):
    def __init__(
        self,
        name: str,
        choice: str | None,
        score: float | None,
        reason: str = "",
        raw: str = "",
        problem: str = "",
    ) -> None:
        self.name = name
        self.choice = choice
        self.score = score
        self.reason = reason
        self.raw = raw
        self.problem = problem


class Outcome(Record):
    def __init__(
        self,
        score: float | None,
        results: list[DimensionResult],
        skipped: dict[str, str] | None = None,
        weights: dict[str, float] | None = None,
    ) -> None:
        self.score = score
        self.results = results
        self.skipped = {} if skipped is None else skipped
        self.weights = {} if weights is None else weights


def load_definitions(path: str | None = None) -> Definitions:
    data = load_definition("quality", path)
    scale = {str(k): float(v) for k, v in (data.get("scale") or {}).items()}
    dims = {
        name: Dimension(
            name=name,
            system_prompt=str(spec.get("system_prompt", "")),
            template=str(spec["template"]),
            requires=tuple(spec.get("requires") or ()),
            description=str(spec.get("description", "")),
        )
        for name, spec in (data.get("dimensions") or {}).items()
    }
    weights = {str(k): float(v) for k, v in (data.get("weights") or {}).items()}
    return Definitions(dims, scale, weights, str(data.get("reply_format", "")))


def parse_choice(
    text: str, labels: Sequence[str] = ("1", "2", "3", "4", "5"), dimension: str = ""
) -> Reading:
    """The judge's choice as a Reading whose value is the label (docs/judge-graders.md, "How
    replies are read"): whole-number labels only, read by ``grader_sdk.replies.read_rating``."""
    numbers = [int(label) for label in labels if label.isdigit()]
    if not numbers or len(numbers) != len(labels):
        return Reading(problem="the scale's choices are not whole numbers", raw=text)
    reading = read_rating(
        text, min(numbers), max(numbers), names=(dimension,) if dimension else (), integer=True
    )
    if reading.ok:
        label = str(int(reading.value))
        if label not in labels:
            return Reading(problem=f"{label} is not one of the choices", raw=text)
        reading.value = label
    return reading


def reason_of(reading: Reading) -> str:
    data = reading.data if isinstance(reading.data, Mapping) else {}
    for key in ("reason", "reasoning", "explanation", "rationale"):
        value = lookup(data, key)
        if isinstance(value, str):
            return value.strip()
    return ""


def material_of(inp: GraderInput) -> Material:
    config = inp.config or {}
    question = inp.question or conversation_text(inp.input)
    context_value = config.get("context")
    if context_value is None:
        context_value = inp.retrieval_context()
    if isinstance(context_value, str):
        context = context_value
    elif isinstance(context_value, list):
        passages = [node_text(p) or "" for p in context_value]
        if len(passages) > 1:
            passages = [f"[{i}] {p}" for i, p in enumerate(passages, start=1)]
        context = "\n".join(passages)
    else:
        context = ""
    expected = config.get("expected")
    if expected is None:
        expected = inp.reference_answer or ""
    return Material(question or "", inp.output or "", context, str(expected))


def select_dimensions(
    requested: Any, definitions: Definitions, material: Material
) -> tuple[list[str], dict[str, str]]:
    """(dimensions to run, {skipped dimension: why}); an unknown name is a config error."""
    if requested is None:
        names = [d for d in DIMENSIONS if d in definitions.dimensions]
    elif isinstance(requested, str):
        names = [requested]
    elif isinstance(requested, list) and all(isinstance(n, str) for n in requested):
        names = list(dict.fromkeys(requested))
    else:
        raise ValueError(f"config.dimensions must be a list of names, got {requested!r}")
    unknown = [n for n in names if n not in definitions.dimensions]
    if unknown:
        known = ", ".join(definitions.dimensions)
        raise ValueError(f"unknown quality dimension(s) {', '.join(unknown)} (known: {known})")
    selected: list[str] = []
    skipped: dict[str, str] = {}
    for name in names:
        missing = [r for r in definitions.dimensions[name].requires if not material.has(r)]
        if missing:
            skipped[name] = ", ".join(INPUT_LABELS.get(r, f"no {r}") for r in missing)
        else:
            selected.append(name)
    return selected, skipped


def build_request(
    dimension: Dimension, definitions: Definitions, material: Material
) -> dict[str, Any]:
    values = {
        "input": material.input,
        "output": material.output,
        "context": material.context,
        "expected": material.expected,
        "reply_format": definitions.reply_format,
    }
    request: dict[str, Any] = {
        "question": render(dimension.template, values),
        "system_prompt": dimension.system_prompt or None,
        "temperature": 0.0,
        "max_tokens": MAX_TOKENS,
        "response_format": response_format(definitions),
    }
    if dimension.name == "similarity":
        request["task"] = {
            "kind": "similarity",
            "output": material.output,
            "expected": material.expected,
        }
    return request


def response_format(definitions: Definitions) -> dict[str, Any]:
    """The JSON Schema of one dimension's reply: a reason and one of the scale's choices."""
    return json_schema_format(
        "quality_choice",
        {
            "reason": {"type": "string"},
            "choice": {"type": "string", "enum": list(definitions.scale)},
        },
    )


def weights_for(config: Mapping[str, Any], definitions: Definitions) -> dict[str, float]:
    weights = config.get("weights")
    if weights is None:
        return dict(definitions.weights)
    if not isinstance(weights, Mapping):
        raise ValueError(f"config.weights must map dimension names to numbers, got {weights!r}")
    out: dict[str, float] = {}
    for name, value in weights.items():
        number = config_number(value)
        if number is None or number < 0:
            raise ValueError(f"config.weights.{name} must be a number >= 0, got {value!r}")
        out[str(name)] = number
    return out


def aggregate(results: Sequence[DimensionResult], weights: Mapping[str, float]) -> float | None:
    """Weighted mean of the scored dimensions (weight 1 when unnamed); plain mean if all are 0."""
    scored = [r for r in results if r.score is not None]
    if not scored:
        return None
    total = sum(weights.get(r.name, 1.0) for r in scored)
    if total <= 0:
        return sum(r.score or 0.0 for r in scored) / len(scored)
    return sum(weights.get(r.name, 1.0) * (r.score or 0.0) for r in scored) / total


UNSUPPORTED = "(the judge target answers only typed tasks)"


def ask_judge(
    client: Any,
    requests: list[dict[str, Any]],
    max_calls: int | None,
    reads: Sequence[Callable[[str], Reading]],
) -> list[Reading | None]:
    """One Reading per request, in order; None where the judge refused the request.

    Requests carrying a typed task go in their own batch, concurrently with the free-text one:
    a judge that answers only typed tasks (the local embedding judge) refuses the free-text
    batch, and similarity is still scored without spending extra calls.
    """
    check_budget(len(requests), max_calls)
    groups = [
        [i for i, r in enumerate(requests) if not r.get("task")],
        [i for i, r in enumerate(requests) if r.get("task")],
    ]
    groups = [g for g in groups if g]
    readings: list[Reading | None] = [None] * len(requests)

    def run(indexes: list[int]) -> None:
        try:
            answers = send_batch(
                client, [requests[i] for i in indexes], None, [reads[i] for i in indexes]
            )
        except UnsupportedRequest:
            if all(requests[i].get("task") for i in indexes):
                raise
            return
        for index, answer in zip(indexes, answers, strict=True):
            readings[index] = answer

    if len(groups) == 1:
        run(groups[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            for future in [pool.submit(run, g) for g in groups]:
                future.result()
    return readings


def evaluate(
    inp: GraderInput, client: Any, definitions: Definitions | None = None
) -> dict[str, Any]:
    """Grade one case; raises Abstain when nothing can be scored."""
    config = inp.config or {}
    definitions = definitions or load_definitions(config.get("definitions"))
    if inp.output is None:
        raise Abstain("no candidate output to grade")
    material = material_of(inp)
    names, skipped = select_dimensions(config.get("dimensions"), definitions, material)
    weights = weights_for(config, definitions)
    if not names:
        why = "; ".join(f"{n}: {w}" for n, w in skipped.items()) or "no dimensions selected"
        raise Abstain(f"no quality dimension can be judged ({why})")
    requests = [build_request(definitions.dimensions[n], definitions, material) for n in names]
    labels = tuple(definitions.scale)
    reads = [_reader(labels, name) for name in names]
    readings = ask_judge(client, requests, inp.max_calls, reads)
    results = []
    for name, reading in zip(names, readings, strict=True):
        if reading is None:
            results.append(DimensionResult(name, None, None, "", UNSUPPORTED))
        elif not reading.ok:
            results.append(
                DimensionResult(name, None, None, "", shorten(reading.raw), reading.explain())
            )
        else:
            choice = reading.value
            results.append(
                DimensionResult(
                    name,
                    choice,
                    definitions.scale[choice],
                    reason_of(reading),
                    shorten(reading.raw),
                )
            )
    outcome = Outcome(aggregate(results, weights), results, skipped, weights)
    if outcome.score is None:
        raise Abstain(
            "no judge reply could be read for any dimension ("
            + "; ".join(f"{r.name}: {r.problem or r.raw}" for r in results)
            + ")"
        )
    return to_grader_output(outcome, labels[-1])


def _reader(labels: Sequence[str], name: str) -> Callable[[str], Reading]:
    return lambda text: parse_choice(text, labels, name)


def to_grader_output(outcome: Outcome, top: str) -> dict[str, Any]:
    parsed = [r for r in outcome.results if r.score is not None]
    refused = [r.name for r in outcome.results if r.score is None and r.raw == UNSUPPORTED]
    unparsed = [r.name for r in outcome.results if r.score is None and r.raw != UNSUPPORTED]
    parts = [f"{r.name} {r.choice}/{top}" for r in parsed]
    if unparsed:
        parts.append(f"unparseable reply, left out: {', '.join(unparsed)}")
    if refused:
        parts.append(f"the judge answers typed tasks only, left out: {', '.join(refused)}")
    if outcome.skipped:
        parts.append("skipped: " + "; ".join(f"{n} ({w})" for n, w in outcome.skipped.items()))
    return {
        "score": outcome.score,
        "reason": "; ".join(parts),
        "hits": [f"{r.name}: {r.choice}/{top}" for r in parsed if (r.score or 0) >= 0.5],
        "misses": [f"{r.name}: {r.choice}/{top}" for r in parsed if (r.score or 0) < 0.5],
        "details": {
            "dimensions": {
                r.name: {"choice": r.choice, "score": r.score, "reason": r.reason, "raw": r.raw}
                for r in outcome.results
            },
            "unparsed": [r.name for r in outcome.results if r.score is None],
            "problems": {r.name: r.problem for r in outcome.results if r.problem},
            "skipped": outcome.skipped,
            "weights": {r.name: outcome.weights.get(r.name, 1.0) for r in parsed},
            # per-item verdicts in the shape of a case's `labels:` (docs/judges.md)
            "verdicts": {"quality": {r.name: r.choice for r in parsed}},
        },
    }


@script_grader
def main(inp: GraderInput) -> dict[str, Any]:
    """Runs at once under ``python -m graders.quality``; importing only defines it."""
    return evaluate(inp, judge_client())
