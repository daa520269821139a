"""A judge panel: one call goes to every member, and their verdicts are combined (docs/judges.md).

Combination works on what the built-in graders ask for, a JSON object (they send a JSON Schema):
each member's reply is read as JSON, and every field is combined on its own, recursively through
objects and lists. Booleans and short strings go by majority, numbers (choice scales) by the
median. Explanations are not votes: a field named like ``reason`` or ``confidence`` (or a string
longer than 40 characters) takes the median (numbers) or the first member's text.
A field where the members do not all agree is a *split*; the panel's agreement is the share of
members that gave the winning value, over the field with the least agreement. Below the panel's
``min_agreement`` the panel abstains: it answers with a refusal naming the split fields, which
makes the built-in graders abstain with that reason. Replies that are not JSON (a plain "yes"
from a yes/no prompt) are combined as whole normalised texts by majority.

A panel call costs what goes upstream against the grader's ``max_calls``
(``calls_per_request``: one per member, a nested panel the sum of its members), and the
judge-call record keeps each member's reply and the agreement.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from evalrun.targets.base import (
    CompletionRequest,
    CompletionResponse,
    Target,
    TargetError,
    TokenUsage,
)
from evalrun.targets.config import TargetConfig

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
#: fields that explain a verdict rather than give one
NOT_VERDICTS = frozenset(
    {"reason", "reasons", "reasoning", "explanation", "rationale", "justification", "feedback",
     "comment", "comments", "notes", "evidence", "confidence"}
)  # fmt: skip


@dataclass
class Combined:
    value: Any
    agreement: float = 1.0
    splits: list[str] = field(default_factory=list)


def _as_json(text: str) -> Any:
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    try:
        return json.loads(candidate.strip())
    except json.JSONDecodeError:
        start, end = candidate.find("{"), candidate.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(candidate[start : end + 1])
            except json.JSONDecodeError:
                return None
        return None


def _majority(values: list[Any]) -> tuple[Any, float]:
    counts = Counter(json.dumps(v, sort_keys=True) for v in values)
    winner, votes = counts.most_common(1)[0]
    return json.loads(winner), votes / len(values)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _median(values: list[Any]) -> Any:
    median = statistics.median(values)
    return int(median) if float(median).is_integer() else median


def combine(values: list[Any], path: str = "") -> Combined:
    """Combine the members' values for one field (and everything below it)."""
    key = path.rsplit(".", 1)[-1].split("[")[0].lower()
    if key in NOT_VERDICTS or all(isinstance(v, str) and len(v) > 40 for v in values):
        return Combined(_median(values) if all(map(_is_number, values)) else values[0])
    if all(isinstance(v, dict) for v in values):
        out: dict[str, Any] = {}
        agreement, splits = 1.0, []
        for key in dict.fromkeys(k for v in values for k in v):
            present = [v[key] for v in values if key in v]
            part = combine(present, f"{path}.{key}" if path else key)
            out[key] = part.value
            agreement = min(agreement, part.agreement * len(present) / len(values))
            splits += part.splits
        return Combined(out, agreement, splits)
    if all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1:
        parts = [
            combine(list(items), f"{path}[{i}]")
            for i, items in enumerate(zip(*values, strict=True))
        ]
        return Combined(
            [p.value for p in parts],
            min((p.agreement for p in parts), default=1.0),
            [s for p in parts for s in p.splits],
        )
    if all(map(_is_number, values)):
        value = _median(values)
        agreement = sum(v == value for v in values) / len(values)
    else:
        value, agreement = _majority(values)
    return Combined(value, agreement, [path or "reply"] if agreement < 1 else [])


class PanelTarget:
    """Targets called as one; members are the pool's own managed targets (their limits,
    retries and cache apply to each member call)."""

    def __init__(self, config: TargetConfig, members: list[Target]) -> None:
        self.name = config.name
        self.config = config
        self.members = members
        self.min_agreement = float(config.extra("min_agreement", 0.0))

    @property
    def calls_per_request(self) -> int:
        """The upstream calls one request makes: one per member, and a member that is itself
        a panel costs its own members (docs/judges.md, "Judge panels")."""
        return sum(int(getattr(m, "calls_per_request", 1)) for m in self.members)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        replies = await asyncio.gather(
            *(m.complete(request) for m in self.members), return_exceptions=True
        )
        failed = [
            f"{m.name}: {getattr(r, 'message', r)}"
            for m, r in zip(self.members, replies, strict=True)
            if isinstance(r, BaseException)
        ]
        if failed:
            raise TargetError(f"panel '{self.name}': a member failed ({'; '.join(failed)})")
        responses: list[CompletionResponse] = list(replies)  # type: ignore[arg-type]
        parsed = [_as_json(r.text) for r in responses]
        if all(isinstance(p, dict) for p in parsed):
            combined = combine(parsed)
            text = json.dumps(combined.value)
        else:
            combined = combine([" ".join(r.text.lower().split()).rstrip(".") for r in responses])
            winner = next(
                r.text
                for r in responses
                if " ".join(r.text.lower().split()).rstrip(".") == combined.value
            )
            text = winner
        panel = {
            "members": [
                {"target": m.name, "reply": r.text}
                for m, r in zip(self.members, responses, strict=True)
            ],
            "agreement": round(combined.agreement, 4),
            "splits": combined.splits,
        }
        usage = TokenUsage(
            sum(r.usage.input_tokens for r in responses),
            sum(r.usage.output_tokens for r in responses),
        )
        costs = [r.cost_usd for r in responses if r.cost_usd is not None]
        response = CompletionResponse(
            text=text,
            usage=usage,
            finish_reason="stop",
            model=f"panel:{'+'.join(m.name for m in self.members)}",
            cached=all(r.cached for r in responses),
            cost_usd=sum(costs) if costs else None,
            panel=panel,
        )
        if combined.agreement < self.min_agreement:
            response.text = ""
            response.refusal = (
                f"the judge panel split (agreement {combined.agreement:.2f} < "
                f"{self.min_agreement:.2f}) on {', '.join(combined.splits)}"
            )
        return response

    async def aclose(self) -> None:
        return None
