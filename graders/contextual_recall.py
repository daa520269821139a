"""Contextual recall: does the retrieved context hold everything the expected answer states?

``mode: per-item`` asks one judge call to split the expected answer (``criteria``, else the
reference answer) into statements, then one call per statement (one batch) whether the
retrieval context supports it; ``mode: batched`` asks one call that does both, every statement
numbered (graders/_rag_batched.py). score = attributable / total. Run as
``python -m graders.contextual_recall``.

config:
  retrieval_context: [str]     the nodes, instead of the expected tool calls' results
  tools: [str]                 only these tools' calls count as retrieval
  judge_target: str            send the judge calls to this target instead of the default
  mode: batched | per-item     one call for all (default), or a split call and one per statement
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
from graders._rag_batched import judge_batched, judge_mode, read_recall, recall_batch_request


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


def _judge_joined(
    client: TargetClient, expected: str, context: list[str], target: str | None
) -> tuple[list[str], list[Verdict]]:
    """Batched mode: one call splits the expected answer and judges every statement."""
    request = recall_batch_request(expected, context, target)
    try:
        reading = judge_batched(client, request, lambda raw: read_recall(raw, len(context)))
    except BudgetExceeded as exc:
        budget_refused(exc, 1, 1, "splitting and judging the statements in one batched call")
    except ProtocolError as exc:
        raise Abstain(f"the judge did not answer the batched request: {exc}") from None
    if not reading.ok:
        raise Abstain(
            f"the judge's batched statements and verdicts could not be read ({reading.explain()})",
            {"raw": [reading.raw]},
        )
    statements, verdicts = reading.value
    return list(statements), list(verdicts)


def _split_and_judge(
    client: TargetClient, expected: str, context: list[str], options: dict[str, Any]
) -> tuple[list[str], list[Verdict]]:
    """Per-item mode: one call for the statements, then one per statement."""
    work = "extracting statements and judging them"
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
    return statements, _judge_each(client, statements, context, options)


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
    target = inp.config.get("judge_target")
    if mode == "batched":
        check_payload_budget(inp, 1, "splitting and judging the statements in one batched call")
        statements, verdicts = _judge_joined(TargetClient.from_env(), expected, context, target)
    else:
        check_payload_budget(inp, 2, "extracting statements and judging them")
        statements, verdicts = _split_and_judge(
            TargetClient.from_env(), expected, context, {"target": target}
        )
    check_verdicts(verdicts, len(statements), "statement")
    return score_statements(statements, verdicts, context)
