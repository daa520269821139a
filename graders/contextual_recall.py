"""Contextual recall: does the retrieved context hold everything the expected answer states?

One judge call splits the expected answer (``criteria``, else the reference answer) into
statements; then ``mode: per-item`` asks one call per statement (one batch) whether the
retrieval context supports it, and ``mode: batched`` one call with every statement numbered
(graders/_rag_batched.py). score = attributable / total. Run as
``python -m graders.contextual_recall``.

config:
  retrieval_context: [str]     the nodes, instead of the expected tool calls' results
  tools: [str]                 only these tools' calls count as retrieval
  judge_target: str            send the judge calls to this target instead of the default
  mode: per-item | batched     one attribution call per statement (default), or one for all
"""

from __future__ import annotations

from typing import Any

from grader_sdk import (
    Abstain,
    BudgetExceeded,
    GraderInput,
    GraderResult,
    JudgeReplyError,
    ProtocolError,
    TargetClient,
    Verdict,
    extract_statements,
    judge_attribution,
    script_grader,
)
from graders._rag import (
    NO_RETRIEVAL,
    budget_refused,
    check_payload_budget,
    check_verdicts,
    format_score,
    has_retrieval,
    recall,
    snippet,
)
from graders._rag_batched import (
    ATTRIBUTION_KEY,
    attribution_batch_request,
    judge_batched,
    judge_mode,
)


def score_statements(
    statements: list[str], verdicts: list[Verdict], context: list[str]
) -> GraderResult:
    """Turn attribution verdicts into the grader result (hits name the supporting node)."""
    result = GraderResult(score=recall([bool(v.ok) for v in verdicts]))
    rows = []
    for statement, verdict in zip(statements, verdicts, strict=True):
        node = verdict.node if verdict.ok else None
        node_text = context[node - 1] if node else None
        rows.append(
            {
                "statement": statement,
                "attributable": bool(verdict.ok),
                "node": node,
                "node_text": node_text,
                "reason": verdict.reason,
                "confidence": verdict.confidence,
            }
        )
        if verdict.ok:
            where = f"node {node}: {snippet(node_text, 100)}" if node_text else "context"
            result.hit(f"{statement} (supported by {where})")
        else:
            result.miss(f"{statement} (not in the retrieval context)")
    supported = sum(1 for r in rows if r["attributable"])
    result.reason = (
        f"{supported} of {len(rows)} statements of the expected answer are supported by the "
        f"retrieval context: recall {format_score(result.score or 0.0)}."
    )
    result.details = {
        "statements": rows,
        "context_size": len(context),
        # per-item verdicts in the shape of a case's `labels:` (docs/judges.md)
        "verdicts": {"attributable": {r["statement"]: r["attributable"] for r in rows}},
    }
    return result


def _judge_each(
    client: TargetClient, statements: list[str], context: list[str], options: dict[str, Any]
) -> list[Verdict]:
    """Per-item mode: one attribution call per statement, in one batch."""
    try:
        return judge_attribution(client, statements, context, **options)
    except BudgetExceeded as exc:  # refused whole, before any call of it
        work = f"judging {len(statements)} statements (after 1 extraction call)"
        budget_refused(exc, len(statements), len(statements), work)
    except ProtocolError as exc:
        raise Abstain(f"the judge did not answer once per statement: {exc}") from None


def _judge_all(
    client: TargetClient, statements: list[str], context: list[str], target: str | None
) -> list[Verdict]:
    """Batched mode: one attribution call with every statement numbered."""
    request = attribution_batch_request(statements, context, target)
    try:
        reading = judge_batched(client, request, len(statements), ATTRIBUTION_KEY, len(context))
    except BudgetExceeded as exc:
        budget_refused(exc, 1, 1, f"judging {len(statements)} statements in one batched call")
    except ProtocolError as exc:
        raise Abstain(f"the judge did not answer the batched request: {exc}") from None
    if not reading.ok:
        raise Abstain(
            f"the judge's batched verdicts could not be read ({reading.explain()})",
            {"raw": [reading.raw]},
        )
    return list(reading.value)


@script_grader
def grade(inp: GraderInput) -> GraderResult:
    mode = judge_mode(inp.config)
    expected = inp.expected_text()
    if not expected:
        raise Abstain(
            "no expected answer: give the case `criteria` or an expected assistant message"
        )
    if not has_retrieval(inp):
        raise Abstain(NO_RETRIEVAL)
    context = inp.retrieval_context()
    if not context:
        return GraderResult(
            score=0.0,
            reason="The retrieval context is empty, so no statement of the expected answer is "
            "supported: score 0.",
            misses=[expected],
            details={"statements": [], "context_size": 0},
        )
    options: dict[str, Any] = {"target": inp.config.get("judge_target")}
    work = "extracting statements and judging them"
    check_payload_budget(inp, 2, work)
    client = TargetClient.from_env()
    try:
        statements = extract_statements(client, expected, reserve=1, **options)
    except BudgetExceeded as exc:
        budget_refused(exc, 2, 1, work)
    except JudgeReplyError as exc:
        raise Abstain(str(exc), {"raw": exc.raw}) from None
    except ProtocolError as exc:
        raise Abstain(f"the judge did not answer the statements request: {exc}") from None
    if not statements:
        raise Abstain("the judge found no factual statements in the expected answer")
    if mode == "batched":
        verdicts = _judge_all(client, statements, context, inp.config.get("judge_target"))
    else:
        verdicts = _judge_each(client, statements, context, options)
    check_verdicts(verdicts, len(statements), "statement")
    return score_statements(statements, verdicts, context)
