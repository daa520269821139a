"""Batched judging for the RAG graders: one judge call carries every item of a list, numbered.

Precision sends every retrieved passage of a ranked list in one request; recall sends the
expected answer and the passages in one request that both splits the answer into statements and
judges each (docs/contextual-precision.md and docs/contextual-recall.md, "Judge modes"). The
reply must give exactly one verdict per number under a strict JSON schema; a reply that leaves a
number out, gives one twice, names one that does not exist or cannot be read is asked again once
(budget permitting) and otherwise makes the grader abstain with the reason. Verdict values are
read by ``grader_sdk.replies``, the same rules as the per-item replies, so a score is never a
guess.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from grader_sdk import Verdict, judge_replies
from grader_sdk._judge import FIRST_MAX_TOKENS, _schema
from grader_sdk.replies import (
    Reading,
    as_bool,
    parse_json_reply,
    scaled_number,
    statement_key,
)

MODES = ("per-item", "batched")
DEFAULT_MODE = "batched"

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

RECALL_BATCH_SYSTEM = (
    "You check whether retrieved passages hold every fact of an expected answer. First split "
    "the expected answer into its distinct factual statements: one fact each, standing on its "
    "own (name the subject instead of a pronoun), adding nothing, leaving out opinions, "
    "questions and filler, duplicates merged. Then decide for each statement whether it is "
    "attributable: the numbered passages say it, or plainly imply it, alone or together. Use "
    "the passages only, never your own knowledge; a statement only partly backed is not "
    "attributable.\n"
    "Number the statements from 1 in the answer's order and reply with one JSON object and "
    'nothing else: {"verdicts": [{"number": <statement number>, "statement": "<the '
    'statement>", "attributable": true or false, "node": <number of the passage that backs it '
    'best, or null>, "reason": "<one short sentence>", "confidence": <0 to 1>}, ...]}'
)


def judge_mode(config: dict[str, Any]) -> str:
    """The grader's ``config.mode``: ``batched`` (default, docs/contextual-precision.md) or
    ``per-item``."""
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
RECALL_BATCH_FORMAT = _format(
    "recall_verdicts",
    ATTRIBUTION_KEY,
    {"statement": {"type": "string"}, "node": {"type": ["integer", "null"]}},
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


def recall_batch_request(
    expected: str, context: Sequence[str], target: str | None = None
) -> dict[str, Any]:
    """One request that splits the expected answer into statements and judges each against the
    context (typed task ``recall-batch``): the statement split joined to the verdicts."""
    question = (
        f"{_numbered('passages', context)}\n\n<expected_answer>\n{expected}\n</expected_answer>"
        "\n\nSplit the expected answer into statements and give one verdict for each."
    )
    task = {"kind": "recall-batch", "text": expected, "context": list(context)}
    return _request(question, RECALL_BATCH_SYSTEM, task, RECALL_BATCH_FORMAT, target)


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


def _verdicts_list(raw: str) -> tuple[Any, list[Any] | None]:
    reply = parse_json_reply(raw)
    entries = reply.get("verdicts") if isinstance(reply, dict) else None
    return reply, entries if isinstance(entries, list) else None


def _by_number(
    entries: list[Any], count: int, key: str, context_size: int, problems: list[str]
) -> dict[int, tuple[Verdict, dict[str, Any]]]:
    """Each readable entry's verdict (and the entry) under its number; what is wrong with the
    others, and any number of 1..count left without a verdict, is added to ``problems``."""
    by_number: dict[int, tuple[Verdict, dict[str, Any]]] = {}
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
                by_number[number] = (verdict, entry)
    missing = [n for n in range(1, count + 1) if n not in by_number]
    if missing:
        problems.append(f"no verdict for number(s) {', '.join(map(str, missing))}")
    return by_number


def read_numbered(raw: str, count: int, key: str, context_size: int = 0) -> Reading:
    """Read a batched reply: ``value`` is one Verdict per number 1..count, in order, or the
    reading has a problem (missing, repeated or unknown numbers, an unreadable entry)."""
    reply, entries = _verdicts_list(raw)
    if entries is None:
        return Reading(problem="the reply has no 'verdicts' list", raw=raw)
    problems: list[str] = []
    by_number = _by_number(entries, count, key, context_size, problems)
    if problems:
        return Reading(problem="; ".join(problems[:3]), raw=raw, data=reply)
    verdicts = [by_number[n][0] for n in range(1, count + 1)]
    return Reading(verdicts, source="json", data=reply, raw=raw)


def read_recall(raw: str, context_size: int) -> Reading:
    """Read the joined recall reply: ``value`` is ``(statements, verdicts)``, numbered 1..n
    without a gap, each entry naming its statement. A statement given twice is merged when both
    verdicts agree (as the statement split merges duplicates), else the reply is unreadable."""
    reply, entries = _verdicts_list(raw)
    if entries is None:
        return Reading(problem="the reply has no 'verdicts' list", raw=raw)
    if not entries:
        return Reading(problem="the reply lists no statements", raw=raw, data=reply)
    problems: list[str] = []
    by_number = _by_number(entries, len(entries), ATTRIBUTION_KEY, context_size, problems)
    statements: list[str] = []
    verdicts: list[Verdict] = []
    first: dict[str, tuple[int, Verdict]] = {}
    for number, (verdict, entry) in sorted(by_number.items()):
        text = entry.get("statement")
        if not isinstance(text, str) or not text.strip():
            problems.append(f"number {number} has no 'statement'")
            continue
        seen = first.setdefault(statement_key(text), (number, verdict))
        if seen[0] != number:
            if seen[1].ok != verdict.ok:
                problems.append(f"number {number} repeats statement {seen[0]} with another verdict")
            continue
        statements.append(text.strip())
        verdicts.append(verdict)
    if problems:
        return Reading(problem="; ".join(problems[:3]), raw=raw, data=reply)
    return Reading((statements, verdicts), source="json", data=reply, raw=raw)


def judge_batched(client: Any, request: dict[str, Any], read: Callable[[str], Reading]) -> Reading:
    """Send one batched request (asked again once for an unreadable or cut-off reply, budget
    permitting) and read it with ``read``."""
    [reading] = judge_replies(client, [request], read)
    return reading
