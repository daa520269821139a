"""Answer quality: coherence, fluency, relevance, groundedness, similarity (docs/judge-graders.md).

One judge call per dimension (sent as one batch). Each judge picks a choice on a 1..5 scale that
maps to 0, .25, .5, .75, 1; the score is the (weighted) mean of the dimensions whose reply could
be read. Unreadable replies are reported and left out; if none can be read, the grader abstains.

    python -m graders.quality < payload.json
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grader_sdk import (
    Abstain,
    GraderInput,
    UnsupportedRequest,
    node_text,
    parse_json_reply,
    script_grader,
)
from graders._judgekit import (
    as_number,
    check_budget,
    conversation_text,
    judge_client,
    load_definition,
    render,
    send_batch,
    shorten,
)

DIMENSIONS = ("coherence", "fluency", "relevance", "groundedness", "similarity")
INPUT_LABELS = {"context": "no context", "expected": "no expected answer"}
_JSON_KEYS = ("choice", "score", "rating", "grade", "verdict", "answer")
_LABEL_WORDS = r"(?:choice|score|rating|grade|verdict|answer)"
# "Score: 4", "rating of **4**", "Final score - 4/5"; not "Score: 10/10" or "4/10" or "4.5".
_LABELLED = re.compile(
    rf"(?i)\b{_LABEL_WORDS}\b[^0-9\n]{{0,16}}?(?<![\d.])(\d+)"
    r"(?!\d|\.\d|\s*(?:/|out\s+of)\s*(?!5\b)\d)"
)
_OUT_OF_FIVE = re.compile(r"(?i)(?<![\d.])(\d+)\s*(?:/|out\s+of)\s*5(?!\d|\.\d)")
_BARE = re.compile(r"(?i)(\d+)(?:\s*(?:/|out\s+of)\s*5)?")
_DECORATION = " \t*_#>`'\"[]().:"


@dataclass
class Dimension:
    name: str
    system_prompt: str
    template: str
    requires: tuple[str, ...] = ()
    description: str = ""


@dataclass
class Definitions:
    dimensions: dict[str, Dimension]
    scale: dict[str, float]
    weights: dict[str, float]
    reply_format: str = ""


@dataclass
class Material:
    """What the templates are filled with."""

    input: str
    output: str
    context: str = ""
    expected: str = ""

    def has(self, requirement: str) -> bool:
        return bool(getattr(self, requirement, "").strip())


@dataclass
class DimensionResult:
    name: str
    choice: str | None
    score: float | None
    reason: str = ""
    raw: str = ""


@dataclass
class Outcome:
    score: float | None
    results: list[DimensionResult]
    skipped: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)


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
    text: str, labels: Sequence[str] = ("1", "2", "3", "4", "5")
) -> tuple[str | None, str]:
    """(choice, reason) from a judge reply; choice None when the reply names no valid label.

    Tried in order: a JSON object's choice/score/rating field (or a 0..1 ``similarity``), a
    labelled or bare choice on one of the last three non-empty lines (last line first), and a
    labelled choice anywhere in the text if it is the only one named.
    """
    data = parse_json_reply(text) if text.strip() else None
    if isinstance(data, Mapping):
        reason = str(data.get("reason") or data.get("reasoning") or data.get("explanation") or "")
        for key in _JSON_KEYS:
            for actual, value in data.items():
                if isinstance(actual, str) and actual.lower() == key:
                    choice = _label_of_value(value, labels)
                    if choice is not None:
                        return choice, reason
        similarity = as_number(data.get("similarity"))
        if similarity is not None and 0.0 <= similarity <= 1.0 and len(labels) > 1:
            return labels[round(similarity * (len(labels) - 1))], reason
    elif isinstance(data, int | float) and not isinstance(data, bool):
        choice = _label_of_value(data, labels)
        if choice is not None:
            return choice, ""
    return _choice_from_text(text, labels), ""


def _label_of_value(value: Any, labels: Sequence[str]) -> str | None:
    if isinstance(value, str):
        return _line_choice(value, labels) or _bare_choice(value, labels)
    number = as_number(value)
    if number is None or number != int(number):
        return None
    label = str(int(number))
    return label if label in labels else None


def _line_choice(line: str, labels: Sequence[str]) -> str | None:
    """The last labelled ("Score: 4") or scale-anchored ("4 out of 5") choice on a line."""
    for pattern in (_LABELLED, _OUT_OF_FIVE):
        found = [m.group(1) for m in pattern.finditer(line) if m.group(1) in labels]
        if found:
            return found[-1]
    return None


def _bare_choice(line: str, labels: Sequence[str]) -> str | None:
    match = _BARE.fullmatch(line.strip(_DECORATION))
    return match.group(1) if match and match.group(1) in labels else None


def _choice_from_text(text: str, labels: Sequence[str]) -> str | None:
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines[-3:]):
        choice = _line_choice(line, labels) or _bare_choice(line, labels)
        if choice is not None:
            return choice
    named = {m.group(1) for m in _LABELLED.finditer(text)}
    if len(named) == 1 and (only := named.pop()) in labels:
        return only
    return None


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
    }
    if dimension.name == "similarity":
        request["task"] = {
            "kind": "similarity",
            "output": material.output,
            "expected": material.expected,
        }
    return request


def weights_for(config: Mapping[str, Any], definitions: Definitions) -> dict[str, float]:
    weights = config.get("weights")
    if weights is None:
        return dict(definitions.weights)
    if not isinstance(weights, Mapping):
        raise ValueError(f"config.weights must map dimension names to numbers, got {weights!r}")
    out: dict[str, float] = {}
    for name, value in weights.items():
        number = as_number(value)
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


def ask_judge(client: Any, requests: list[dict[str, Any]], max_calls: int | None) -> list[Any]:
    """Replies in request order, None where the judge refused the request.

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
    replies: list[Any] = [None] * len(requests)

    def run(indexes: list[int]) -> None:
        try:
            answers = send_batch(client, [requests[i] for i in indexes], None)
        except UnsupportedRequest:
            if all(requests[i].get("task") for i in indexes):
                raise
            return
        for index, answer in zip(indexes, answers, strict=True):
            replies[index] = answer

    if len(groups) == 1:
        run(groups[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            for future in [pool.submit(run, g) for g in groups]:
                future.result()
    return replies


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
    replies = ask_judge(client, requests, inp.max_calls)
    labels = tuple(definitions.scale)
    results = []
    for name, reply in zip(names, replies, strict=True):
        if reply is None:
            results.append(DimensionResult(name, None, None, "", UNSUPPORTED))
            continue
        choice, reason = parse_choice(reply.raw_text, labels)
        value = definitions.scale[choice] if choice is not None else None
        results.append(DimensionResult(name, choice, value, reason, shorten(reply.raw_text)))
    outcome = Outcome(aggregate(results, weights), results, skipped, weights)
    if outcome.score is None:
        raise Abstain(
            "no judge reply could be parsed for any dimension ("
            + ", ".join(f"{r.name}: {shorten(r.raw, 80)!r}" for r in results)
            + ")"
        )
    return to_grader_output(outcome, labels[-1])


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
