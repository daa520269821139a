"""The arithmetic and input handling behind the RAG graders, free of any I/O so it can be tested.

contextual precision (average precision over the ranked nodes):
    score = (1/R) * sum_k precision@k * r_k,  precision@k = (relevant in top k) / k,
    R = number of relevant nodes, and 0 when R = 0.
contextual recall:
    score = attributable statements / all statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from grader_sdk import (
    Abstain,
    BudgetExceeded,
    GraderInput,
    ProxyInfo,
    Verdict,
    configured_context,
    parse_json_reply,
)
from grader_sdk._record import Record

AGGREGATES = ("weighted", "mean")


class RetrievalGroup(Record):
    """One ranked list of nodes: a tool call's results, or the whole flattened context; its
    ``verdicts`` are filled in as the judge reads the nodes."""

    def __init__(
        self, label: str, nodes: list[str], query: str | None = None, tool: str | None = None
    ) -> None:
        self.label = label
        self.nodes = nodes
        self.query = query
        self.tool = tool
        self.verdicts: list[Any] = []


def precision_at_k(relevance: Sequence[bool]) -> list[float]:
    """precision@k for every rank k = 1..n."""
    out: list[float] = []
    found = 0
    for k, relevant in enumerate(relevance, start=1):
        found += 1 if relevant else 0
        out.append(found / k)
    return out


def average_precision(relevance: Sequence[bool]) -> float:
    """(1/R) * sum of precision@k over the relevant ranks k; 0 when nothing is relevant."""
    total_relevant = sum(1 for r in relevance if r)
    if total_relevant == 0:
        return 0.0
    at_k = precision_at_k(relevance)
    return sum(p for p, r in zip(at_k, relevance, strict=True) if r) / total_relevant


def aggregate(scored: Sequence[tuple[float, int]], how: str = "weighted") -> float:
    """Combine per-list scores: weighted by node count, or a plain mean. Empty lists are skipped."""
    if how not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, not {how!r}")
    present = [(score, size) for score, size in scored if size > 0]
    if not present:
        return 0.0
    if how == "mean":
        return sum(score for score, _ in present) / len(present)
    return sum(score * size for score, size in present) / sum(size for _, size in present)


def recall(attributable: Sequence[bool]) -> float:
    """Share of statements the context supports; there must be at least one statement."""
    if not attributable:
        raise ValueError("recall needs at least one statement")
    return sum(1 for a in attributable if a) / len(attributable)


def retrieval_groups(inp: GraderInput, per_tool_call: bool = False) -> list[RetrievalGroup]:
    """The ranked lists to score.

    ``config.retrieval_context`` wins over tool calls; a list of lists there counts as one group
    per inner list when ``per_tool_call`` is set. Otherwise each expected tool call is a group,
    or all their results flattened in order into one group.
    """
    configured = inp.config.get("retrieval_context")
    if configured is not None:
        nested = isinstance(configured, list) and any(isinstance(x, list) for x in configured)
        if per_tool_call and nested:
            return [
                RetrievalGroup(
                    f"list {i}", configured_context(x if isinstance(x, list) else [x]) or []
                )
                for i, x in enumerate(configured, 1)
            ]
        return [RetrievalGroup("retrieval_context", configured_context(configured) or [])]
    calls = inp.tool_call_results()
    if per_tool_call:
        return [
            RetrievalGroup(f"call {i}", list(c["results"]), c.get("query"), c.get("tool"))
            for i, c in enumerate(calls, 1)
        ]
    return [RetrievalGroup("retrieval_context", [n for c in calls for n in c["results"]])]


def snippet(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"


def format_score(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") if value not in (0.0, 1.0) else f"{value:.1f}"


def check_budget(info: ProxyInfo, needed: int, work: str) -> None:
    """Abstain up front when the grant cannot pay for the judge requests the metric needs; the
    hint counts the calls already spent and what a request costs (a judge panel: one call per
    member), so following it is always enough."""
    if needed > info.remaining:
        at_least = info.call_count + needed * info.calls_per_request
        cost = f" at {info.calls_per_request} calls each" if info.calls_per_request > 1 else ""
        raise Abstain(
            f"not enough judge calls: {work} needs {needed}{cost}, but max_calls is "
            f"{info.max_calls} with {info.max_calls - info.call_count} left; raise "
            f"`target: {{max_calls: ...}}` to at least {at_least} "
            "(a little more leaves room to ask again after unreadable or cut-off replies)",
            {"needed": needed, "remaining": info.remaining, "max_calls": info.max_calls},
        )


def check_payload_budget(inp: GraderInput, needed: int, work: str) -> None:
    """:func:`check_budget` before any request, from the payload's ``grader.max_calls`` (the
    grant is fresh per case; a judge panel's cost shows only in a refusal, see
    :func:`budget_refused`). Nothing to check when the payload names no budget."""
    if inp.max_calls is not None:
        check_budget(ProxyInfo("", 0, inp.max_calls), needed, work)


def budget_refused(exc: BudgetExceeded, needed: int, batch: int, work: str) -> NoReturn:
    """The proxy refused a batch of ``batch`` requests as over budget (it refuses a batch whole,
    before making any call of it): abstain as :func:`check_budget` does, from the refusal's
    numbers, so a grader need not ask for its budget before every case."""
    if exc.limit is not None and exc.used is not None:
        per_request = max(1, (exc.requested or batch) // max(1, batch))
        check_budget(
            ProxyInfo("", exc.used, exc.limit, calls_per_request=per_request), needed, work
        )
    raise Abstain(f"not enough judge calls: {work} needs {needed}; the proxy refused: {exc}")


def _declined(raw: str) -> str | None:
    """The reason of a reply that says it cannot tell (``{"abstain": true, "reason": ..}``, as
    the local judge answers in its uncertain band, docs/local-judge.md), else None."""
    reply = parse_json_reply(raw)
    if isinstance(reply, dict) and reply.get("abstain") is True:
        return str(reply.get("reason") or "no reason given")
    return None


def has_retrieval(inp: GraderInput) -> bool:
    """Whether the case says what was retrieved at all: ``config.retrieval_context`` (even an
    empty list) or at least one expected tool call (even with no results)."""
    return inp.config.get("retrieval_context") is not None or bool(inp.tool_call_results())


NO_RETRIEVAL = (
    "the case has no retrieval context: give `config.retrieval_context` or expected tool calls "
    "whose results are the retrieved passages"
)


def check_verdicts(verdicts: list[Verdict], count: int, item: str, where: str = "") -> None:
    """Abstain unless the judge gave one readable verdict for each of the ``count`` items."""
    if len(verdicts) != count:
        raise Abstain(f"the judge returned {len(verdicts)} verdicts for {count} {item}s")
    unreadable = [i for i, v in enumerate(verdicts, 1) if v.ok is None]
    declined = {i: _declined(verdicts[i - 1].raw) for i in unreadable}
    if unreadable and all(declined.values()):
        said = "; ".join(f"{item} {i}: {declined[i]}" for i in unreadable)
        raise Abstain(
            f"the judge abstained{where} ({said})",
            {"raw": [verdicts[i - 1].raw for i in unreadable]},
        )
    if unreadable:
        why = "; ".join(f"{item} {i}: {verdicts[i - 1].reason}" for i in unreadable[:3])
        raise Abstain(
            f"the judge's reply for {item}(s) {', '.join(map(str, unreadable))}{where} could not "
            f"be read ({why})",
            {"raw": [verdicts[i - 1].raw for i in unreadable]},
        )
