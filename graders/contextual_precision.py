"""Contextual precision: does the retriever rank the relevant nodes first?

One relevance verdict per retrieved node, then average precision over the ranks (see
graders/_rag.py). ``mode: per-item`` asks one judge call per node (one batch per ranked list);
``mode: batched`` asks one call per ranked list with every node numbered (graders/_rag_batched.py).
Run as ``python -m graders.contextual_precision``.

config:
  retrieval_context: [str] | [[str]]   the nodes, instead of the expected tool calls' results
  per_tool_call: bool                   score each tool call's list on its own, then combine
  aggregate: weighted | mean            how per-list scores combine (default weighted by size)
  include_expected: bool                show the judge the expected answer (default true)
  tools: [str]                          only these tools' calls count as retrieval
  judge_target: str                     send the judge calls to this target instead of the default
  mode: batched | per-item              one call per ranked list (default), or one judge call per node
"""

from __future__ import annotations

from functools import partial
from typing import Any

from grader_sdk import (
    Abstain,
    BudgetExceeded,
    GraderInput,
    GraderResult,
    ProtocolError,
    TargetClient,
    judge_relevance,
    script_grader,
)
from graders._rag import (
    AGGREGATES,
    NO_RETRIEVAL,
    RetrievalGroup,
    aggregate,
    average_precision,
    budget_refused,
    check_payload_budget,
    check_verdicts,
    format_score,
    has_retrieval,
    precision_at_k,
    retrieval_groups,
    snippet,
)
from graders._rag_batched import (
    RELEVANCE_KEY,
    judge_batched,
    judge_mode,
    read_numbered,
    relevance_batch_request,
)


def score_groups(groups: list[RetrievalGroup], per_tool_call: bool, how: str) -> GraderResult:
    """Turn judged groups (``group.verdicts`` filled) into the grader result."""
    result = GraderResult()
    group_details: list[dict[str, Any]] = []
    scored: list[tuple[float, int]] = []
    for group in groups:
        flags = [bool(v.ok) for v in group.verdicts]
        ap = average_precision(flags)
        at_k = precision_at_k(flags)
        scored.append((ap, len(group.nodes)))
        prefix = _prefix(group) if per_tool_call else ""
        nodes = []
        for rank, (node, verdict, p_at_k) in enumerate(
            zip(group.nodes, group.verdicts, at_k, strict=True), 1
        ):
            nodes.append(
                {
                    "rank": rank,
                    "text": node,
                    "relevant": bool(verdict.ok),
                    "precision_at_k": round(p_at_k, 6),
                    "reason": verdict.reason,
                    "confidence": verdict.confidence,
                }
            )
            label = f"{prefix}#{rank} {snippet(node)}"
            if verdict.ok:
                result.hit(f"{label} (relevant; precision@{rank} = {p_at_k:.2f})")
            else:
                result.miss(f"{label} (not relevant)")
        group_details.append(
            {
                "label": group.label,
                "tool": group.tool,
                "query": group.query,
                "score": ap,
                "relevant": sum(flags),
                "total": len(flags),
                "nodes": nodes,
            }
        )
    result.score = aggregate(scored, how) if per_tool_call else scored[0][0]
    result.reason = _reason(group_details, per_tool_call, how, result.score)
    result.details = {
        "mode": "per_tool_call" if per_tool_call else "flat",
        "aggregate": how if per_tool_call else None,
        "relevant": sum(g["relevant"] for g in group_details),
        "total": sum(g["total"] for g in group_details),
        "groups": group_details,
        # per-item verdicts in the shape of a case's `labels:` (docs/judges.md)
        "verdicts": {"relevant": [n["relevant"] for g in group_details for n in g["nodes"]]},
    }
    if not per_tool_call:
        result.details["nodes"] = group_details[0]["nodes"]
    return result


def _prefix(group: RetrievalGroup) -> str:
    return f"[{group.label}: {group.query}] " if group.query else f"[{group.label}] "


def _reason(groups: list[dict[str, Any]], per_tool_call: bool, how: str, score: float) -> str:
    def one(group: dict[str, Any]) -> str:
        ranks = [n["rank"] for n in group["nodes"] if n["relevant"]]
        if not ranks:
            return f"none of the {group['total']} nodes is relevant, so precision is 0"
        terms = " + ".join(f"{n['precision_at_k']:.2f}" for n in group["nodes"] if n["relevant"])
        where = ", ".join(str(r) for r in ranks)
        return (
            f"relevant at rank{'s' if len(ranks) > 1 else ''} {where} of {group['total']}; "
            f"(1/{len(ranks)}) * ({terms}) = {format_score(group['score'])}"
        )

    if not per_tool_call:
        text = one(groups[0])
        return text[0].upper() + text[1:] + "."
    parts = [f"{g['label']}: {one(g)}" for g in groups if g["total"]]
    return f"{'; '.join(parts)}. {how.capitalize()} over tool calls: {format_score(score)}."


def _judge_nodes(
    inp: GraderInput,
    groups: list[RetrievalGroup],
    question: str,
    expected: str | None,
    target: str | None,
) -> None:
    """Per-item mode: one judge call per node, one batch per ranked list."""
    total = sum(len(g.nodes) for g in groups)
    work = f"judging {total} retrieved nodes"
    check_payload_budget(inp, total, work)
    client = TargetClient.from_env()
    left = total
    for group in groups:
        try:
            group.verdicts = judge_relevance(
                client, question, group.nodes, expected=expected, target=target
            )
        except BudgetExceeded as exc:
            work = work if left == total else f"judging the {left} retrieved nodes left"
            budget_refused(exc, left, len(group.nodes), work)
        except ProtocolError as exc:
            raise Abstain(f"the judge did not answer once per node: {exc}") from None
        check_verdicts(group.verdicts, len(group.nodes), "node", f" of {group.label}")
        left -= len(group.nodes)


def _judge_lists(
    inp: GraderInput,
    groups: list[RetrievalGroup],
    question: str,
    expected: str | None,
    target: str | None,
) -> None:
    """Batched mode: one judge call per ranked list, every node numbered in it."""
    work = f"judging {len(groups)} ranked list{'s' if len(groups) > 1 else ''} in batched mode"
    check_payload_budget(inp, len(groups), work)
    client = TargetClient.from_env()
    left = len(groups)
    for group in groups:
        request = relevance_batch_request(question, group.nodes, expected, target)
        try:
            read = partial(read_numbered, count=len(group.nodes), key=RELEVANCE_KEY)
            reading = judge_batched(client, request, read)
        except BudgetExceeded as exc:
            budget_refused(exc, left, 1, work)
        except ProtocolError as exc:
            raise Abstain(f"the judge did not answer the batched request: {exc}") from None
        if not reading.ok:
            raise Abstain(
                f"the judge's batched verdicts for {group.label} could not be read "
                f"({reading.explain()})",
                {"raw": [reading.raw]},
            )
        group.verdicts = list(reading.value)
        check_verdicts(group.verdicts, len(group.nodes), "node", f" of {group.label}")
        left -= 1


@script_grader
def grade(inp: GraderInput) -> GraderResult:
    config = inp.config
    per_tool_call = bool(config.get("per_tool_call", False))
    how = str(config.get("aggregate", "weighted"))
    if how not in AGGREGATES:
        raise ValueError(f"config.aggregate must be one of {AGGREGATES}, not {how!r}")
    mode = judge_mode(config)
    if not has_retrieval(inp):
        raise Abstain(NO_RETRIEVAL)
    groups = [g for g in retrieval_groups(inp, per_tool_call) if g.nodes]
    total = sum(len(g.nodes) for g in groups)
    if total == 0:
        return GraderResult(
            score=0.0,
            reason="The retrieval context is empty, so there is nothing relevant to rank: score 0.",
            details={
                "mode": "per_tool_call" if per_tool_call else "flat",
                "total": 0,
                "groups": [],
            },
        )
    question = inp.question.strip()
    if not question:
        raise Abstain("no question to judge relevance against (the input has no user message)")

    expected = inp.expected_text() if config.get("include_expected", True) else None
    target = config.get("judge_target")
    if mode == "batched":
        _judge_lists(inp, groups, question, expected, target)
    else:
        _judge_nodes(inp, groups, question, expected, target)
    return score_groups(groups, per_tool_call, how)
