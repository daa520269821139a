"""Batched judging for the RAG graders: one judge call carries every item of a list, numbered.

Precision sends every retrieved passage of a ranked list in one request, recall every statement
(docs/contextual-precision.md and docs/contextual-recall.md, "Judge modes"). The reply must give
exactly one verdict per number under a strict JSON schema; a reply that leaves a number out,
gives one twice, names one that does not exist or cannot be read is asked again once (budget
permitting) and otherwise makes the grader abstain with the reason. Verdict values are read by
``grader_sdk.replies``, the same rules as the per-item replies, so a score is never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from grader_sdk import Verdict, judge_replies
from grader_sdk._judge import FIRST_MAX_TOKENS, _schema
from grader_sdk.replies import Reading, as_bool, parse_json_reply, scaled_number

MODES = ("per-item", "batched")
DEFAULT_MODE = "per-item"

RELEVANCE_KEY = "relevant"
ATTRIBUTION_KEY = "attributable"

BATCH_RELEVANCE_SYSTEM = (
    "You grade the passages a search system returned for a user's question. For every numbered "
    "passage, decide on its own whether it is relevant: it carries information that helps "
    "answer the question (or backs the expected answer, when one is given). Sharing a topic or "
    "a keyword without helping to answer is not enough, and a passage's place in the list does "
    "not matter.\n"
    "Give exactly one verdict for every passage number, each number once, in order, as one JSON "
    'object and nothing else: {"verdicts": [{"number": <passage number>, "relevant": true or '
    'false, "reason": "<one short sentence>", "confidence": <0 to 1>}, ...]}'
)

BATCH_ATTRIBUTION_SYSTEM = (
    "You check a numbered list of statements against numbered retrieved passages. A statement "
    "is attributable when the passages say it, or plainly imply it, alone or together; use the "
    "passages only, never your own knowledge, and treat a statement that is only partly backed "
    "as not attributable.\n"
    "Give exactly one verdict for every statement number, each number once, in order, as one "
    'JSON object and nothing else: {"verdicts": [{"number": <statement number>, "attributable": '
    'true or false, "node": <number of the passage that backs it best, or null>, "reason": '
    '"<one short sentence>", "confidence": <0 to 1>}, ...]}'
)


def judge_mode(config: dict[str, Any]) -> str:
    """The grader's ``config.mode``: ``per-item`` (default) or ``batched``."""
    mode = config.get("mode", DEFAULT_MODE)
    if mode not in MODES:
        raise ValueError(f"config.mode must be one of {', '.join(MODES)}, not {mode!r}")
    return str(mode)


def _numbered(tag: str, items: Sequence[str]) -> str:
    body = "\n".join(f"[{i}] {text}" for i, text in enumerate(items, 1))
    return f"<{tag}>\n{body}\n</{tag}>"


def _format(name: str, key: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The strict JSON Schema of a batched reply: a list of numbered verdicts
    (docs/judge-graders.md, "Asking for structure")."""
    item = {"number": {"type": "integer"}, key: {"type": "boolean"}, **extra}
    item |= {"reason": {"type": "string"}, "confidence": {"type": "number"}}
    verdict = {
        "type": "object",
        "properties": item,
        "required": list(item),
        "additionalProperties": False,
    }
    return _schema(name, {"verdicts": {"type": "array", "items": verdict}})


RELEVANCE_BATCH_FORMAT = _format("relevance_verdicts", RELEVANCE_KEY, {})
ATTRIBUTION_BATCH_FORMAT = _format(
    "attribution_verdicts", ATTRIBUTION_KEY, {"node": {"type": ["integer", "null"]}}
)


def _request(
    question: str,
    system: str,
    task: dict[str, Any],
    response_format: dict[str, Any],
    target: str | None,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "question": question,
        "systemPrompt": system,
        "task": task,
        "temperature": 0.0,
        "maxTokens": FIRST_MAX_TOKENS,
        "responseFormat": response_format,
    }
    if target is not None:
        request["target"] = target
    return request


def relevance_batch_request(
    query: str, passages: Sequence[str], expected: str | None, target: str | None = None
) -> dict[str, Any]:
    """One request judging every passage of a ranked list (typed task ``relevance-batch``)."""
    parts = [f"<question>\n{query}\n</question>"]
    if expected:
        parts.append(f"<expected_answer>\n{expected}\n</expected_answer>")
    parts.append(_numbered("passages", passages))
    parts.append(f"Give one verdict for each of the {len(passages)} passages.")
    task = {"kind": "relevance-batch", "query": query, "passages": list(passages)}
    return _request(
        "\n\n".join(parts), BATCH_RELEVANCE_SYSTEM, task, RELEVANCE_BATCH_FORMAT, target
    )


def attribution_batch_request(
    statements: Sequence[str], context: Sequence[str], target: str | None = None
) -> dict[str, Any]:
    """One request judging every statement against the context (typed task
    ``attribution-batch``)."""
    question = (
        f"{_numbered('passages', context)}\n\n{_numbered('statements', statements)}\n\n"
        f"Give one verdict for each of the {len(statements)} statements."
    )
    task = {"kind": "attribution-batch", "statements": list(statements), "context": list(context)}
    return _request(question, BATCH_ATTRIBUTION_SYSTEM, task, ATTRIBUTION_BATCH_FORMAT, target)


def _item_verdict(item: dict[str, Any], key: str, context_size: int) -> Verdict | str:
    """The verdict of one numbered entry, or why it cannot be read. An entry that says it cannot
    tell (``"abstain": true``, docs/local-judge.md) is a verdict with ``ok`` None."""
    raw = json.dumps(item, ensure_ascii=False)
    reason = item.get("reason")
    reason = reason.strip() if isinstance(reason, str) else ""
    confidence, _ = scaled_number(item.get("confidence"), 0.0, 1.0)
    if item.get("abstain") is True:
        return Verdict(None, reason or "no reason given", None, None, raw)
    ok = as_bool(item.get(key))
    if ok is None:
        return f"its '{key}' is {item.get(key)!r}, not true or false"
    node = item.get("node")
    if not (isinstance(node, int) and not isinstance(node, bool) and 1 <= node <= context_size):
        node = None
    return Verdict(ok, reason, node if ok else None, confidence, raw)


def read_numbered(raw: str, count: int, key: str, context_size: int = 0) -> Reading:
    """Read a batched reply: ``value`` is one Verdict per number 1..count, in order, or the
    reading has a problem (missing, repeated or unknown numbers, an unreadable entry)."""
    reply = parse_json_reply(raw)
    entries = reply.get("verdicts") if isinstance(reply, dict) else None
    if not isinstance(entries, list):
        return Reading(problem="the reply has no 'verdicts' list", raw=raw)
    by_number: dict[int, Verdict] = {}
    problems: list[str] = []
    for position, entry in enumerate(entries, 1):
        number = entry.get("number") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(number, int) or isinstance(number, bool):
            problems.append(f"entry {position} has no integer 'number'")
            continue
        if not 1 <= number <= count:
            problems.append(f"number {number} is not one of 1..{count}")
        elif number in by_number:
            problems.append(f"number {number} is given twice")
        else:
            verdict = _item_verdict(entry, key, context_size)
            if isinstance(verdict, str):
                problems.append(f"number {number}: {verdict}")
            else:
                by_number[number] = verdict
    missing = [n for n in range(1, count + 1) if n not in by_number]
    if missing:
        problems.append(f"no verdict for number(s) {', '.join(map(str, missing))}")
    if problems:
        return Reading(problem="; ".join(problems[:3]), raw=raw, data=reply)
    verdicts = [by_number[n] for n in range(1, count + 1)]
    return Reading(verdicts, source="json", data=reply, raw=raw)


def judge_batched(
    client: Any, request: dict[str, Any], count: int, key: str, context_size: int = 0
) -> Reading:
    """Send one batched request (asked again once for an unreadable or cut-off reply, budget
    permitting) and read it."""
    [reading] = judge_replies(
        client, [request], lambda raw: read_numbered(raw, count, key, context_size)
    )
    return reading
