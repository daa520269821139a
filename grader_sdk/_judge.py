"""Judge helpers: one prompt for LLM judges plus the typed task for non-LLM judges, per item.

Each helper sends its whole list as one ``invokeBatch`` with a JSON Schema response format,
reads every reply by the rules of ``grader_sdk.replies``, and asks again once (in one more
batch, budget permitting): with more room (``max_tokens``) for a reply cut off at the token
limit, which is never read, and with a reminder for a reply it could not read (so a response
cache cannot hand back the same unreadable reply). Refused or filtered replies are not re-asked.

The logic is written once as a generator that yields the proxy calls it needs; a blocking and an
asyncio driver run it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from typing import Any

from grader_sdk._errors import BudgetExceeded, JudgeReplyError, ProtocolError, ProxyError
from grader_sdk._record import Record
from grader_sdk.replies import (
    Reading,
    read_statements,
    read_verdict,
    reply_problem,
    scaled_number,
)

RELEVANCE_SYSTEM = (
    "You judge search results for a question-answering system. Decide whether ONE retrieved "
    "passage is relevant to the user's question: relevant means it contains information that "
    "helps answer the question (or supports the expected answer, when one is shown). A passage "
    "that only shares the topic or a keyword, without helping to answer, is not relevant. "
    "Judge the passage on its own merits, not by its position in the list.\n"
    'Reply with one JSON object and nothing else: {"relevant": true or false, '
    '"reason": "<one short sentence>", "confidence": <number between 0 and 1>}'
)

ATTRIBUTION_SYSTEM = (
    "You check whether a statement is backed by retrieved passages. The statement is "
    "attributable when the numbered passages state it, or plainly imply it, alone or together. "
    "Use only the passages, not your own knowledge; a statement that is only partly supported "
    "is not attributable.\n"
    'Reply with one JSON object and nothing else: {"attributable": true or false, "node": '
    "<number of the passage that supports it best, or null>, "
    '"reason": "<one short sentence>", "confidence": <number between 0 and 1>}'
)

STATEMENTS_SYSTEM = (
    "You split a text into its distinct factual statements. Each statement asserts one fact, "
    "stands on its own (name the subject instead of using pronouns) and keeps the text's "
    "meaning; add nothing, and leave out opinions, questions and filler. Merge duplicates.\n"
    'Reply with one JSON object and nothing else: {"statements": ["<statement>", ...]}'
)

RETRY_REMINDER = (
    "\n\nNote: your previous reply to this request could not be read. Reply again with only "
    "the JSON object described, with no other text."
)

_REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "justification")
_RELEVANCE_KEYS = ("relevant", "is_relevant", "relevance")
_ATTRIBUTION_KEYS = ("attributable", "is_attributable", "attributed", "supported")
_NODE_KEYS = ("node", "node_index", "passage", "supporting_node", "source", "index")

#: max_tokens of a first judge call, and the most a retry after a cut-off reply asks for.
FIRST_MAX_TOKENS = 2048
RETRY_MAX_TOKENS = 16_384


def _schema(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    """A strict JSON Schema response format (docs/judge-graders.md, "Asking for structure")."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "strict": True,
            "schema": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


RELEVANCE_FORMAT = _schema(
    "relevance_verdict",
    {
        "relevant": {"type": "boolean"},
        "reason": {"type": "string"},
        "confidence": {"type": "number"},
    },
)
ATTRIBUTION_FORMAT = _schema(
    "attribution_verdict",
    {
        "attributable": {"type": "boolean"},
        "node": {"type": ["integer", "null"]},
        "reason": {"type": "string"},
        "confidence": {"type": "number"},
    },
)
STATEMENTS_FORMAT = _schema(
    "statements", {"statements": {"type": "array", "items": {"type": "string"}}}
)


class Verdict(Record):
    """One judged item. ``ok`` is None when the judge's reply could not be read (``reason``
    then says why)."""

    def __init__(
        self,
        ok: bool | None,
        reason: str = "",
        node: int | None = None,
        confidence: float | None = None,
        raw: str = "",
    ) -> None:
        self.ok = ok
        self.reason = reason
        self.node = node
        self.confidence = confidence
        self.raw = raw


# --- reading (the rules are grader_sdk.replies) ----------------------------------------------


def _field(obj: Any, keys: Sequence[str]) -> Any:
    if not isinstance(obj, dict):
        return None
    lowered = {str(k).lower(): v for k, v in obj.items()}
    return next((lowered[k.lower()] for k in keys if k.lower() in lowered), None)


def _confidence(obj: Any) -> float | None:
    number, _ = scaled_number(_field(obj, ("confidence", "certainty")), 0.0, 1.0)
    return number


def _verdict(reading: Reading, node_of: Callable[[Any], int | None] | None = None) -> Verdict:
    if not reading.ok:
        return Verdict(None, reading.explain(), None, None, reading.raw)
    data = reading.data if isinstance(reading.data, dict) else {}
    reason = _field(data, _REASON_KEYS)
    if not isinstance(reason, str):
        reason = "" if reading.source == "json" else reading.raw.strip()[:500]
    node = node_of(data) if reading.value and node_of is not None else None
    return Verdict(reading.value, reason.strip(), node, _confidence(data), reading.raw)


def read_relevance(reply: str) -> Verdict:
    return _verdict(read_verdict(reply, _RELEVANCE_KEYS))


def read_attribution(reply: str, context_size: int) -> Verdict:
    return _verdict(
        read_verdict(reply, _ATTRIBUTION_KEYS),
        lambda obj: _node_number(_field(obj, _NODE_KEYS), context_size),
    )


def _node_number(value: Any, size: int) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, str):
        digits = "".join(ch if ch.isdigit() else " " for ch in value).split()
        value = int(digits[0]) if digits else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= size else None


# --- requests --------------------------------------------------------------------------------


def relevance_system(query: str, expected: str | None = None) -> str:
    """The system message of every relevance call of one list: the instructions, the question
    and the expected answer, the same for every passage, so a provider's prompt cache can reuse
    it (docs/judge-graders.md, "Shared prefix first")."""
    parts = [RELEVANCE_SYSTEM, f"<question>\n{query}\n</question>"]
    if expected:
        parts.append(f"<expected_answer>\n{expected}\n</expected_answer>")
    return "\n\n".join(parts)


def relevance_prompt(passage: str) -> str:
    """The user message of one relevance call: only the passage varies, and it comes last."""
    return (
        f"<passage>\n{passage}\n</passage>\n\n"
        "Is this passage relevant to the question? Reply with the JSON object only."
    )


def attribution_system(context: Sequence[str]) -> str:
    """The system message of every attribution call of one case: the instructions and the
    numbered passages, the same for every statement."""
    numbered = "\n".join(f"[{i}] {passage}" for i, passage in enumerate(context, 1))
    return f"{ATTRIBUTION_SYSTEM}\n\n<passages>\n{numbered}\n</passages>"


def attribution_prompt(statement: str) -> str:
    """The user message of one attribution call: only the statement varies."""
    return (
        f"<statement>\n{statement}\n</statement>\n\n"
        "Can the statement be attributed to the passages? Reply with the JSON object only."
    )


def statements_prompt(text: str) -> str:
    return (
        f"<text>\n{text}\n</text>\n\n"
        "List the distinct factual statements in this text. Reply with the JSON object only."
    )


def relevance_requests(
    query: str,
    passages: Sequence[str],
    expected: str | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    siblings = list(passages)
    system = relevance_system(query, expected)
    return [
        _request(
            relevance_prompt(passage),
            system,
            {"kind": "relevance", "query": query, "passage": passage, "siblings": siblings},
            RELEVANCE_FORMAT,
            options,
        )
        for passage in passages
    ]


def attribution_requests(
    statements: Sequence[str], context: Sequence[str], **options: Any
) -> list[dict[str, Any]]:
    ctx = list(context)
    system = attribution_system(ctx)
    return [
        _request(
            attribution_prompt(statement),
            system,
            {"kind": "attribution", "statement": statement, "context": ctx},
            ATTRIBUTION_FORMAT,
            options,
        )
        for statement in statements
    ]


def statements_request(text: str, **options: Any) -> dict[str, Any]:
    return _request(
        statements_prompt(text),
        STATEMENTS_SYSTEM,
        {"kind": "statements", "text": text},
        STATEMENTS_FORMAT,
        options,
    )


def _request(
    question: str,
    system: str,
    task: dict[str, Any],
    response_format: dict[str, Any],
    options: dict[str, Any],
) -> dict[str, Any]:
    """One wire request; ``options`` may override (or, given None, drop) the defaults."""
    request: dict[str, Any] = {"question": question, "systemPrompt": system, "task": task}
    for key, wire, default in (
        ("temperature", "temperature", 0.0),
        ("target", "target", None),
        ("max_tokens", "maxTokens", FIRST_MAX_TOKENS),
        ("response_format", "responseFormat", response_format),
    ):
        value = options.get(key, default)
        if value is not None:
            request[wire] = value
    return request


# --- one plan, two drivers -------------------------------------------------------------------

#: What a plan asks its driver for: ("batch", requests), ("retry", requests) or ("info", None).
#: A driver sends back the answer, or throws the ProxyError the call raised into the plan.
Step = tuple[str, Any]
Plan = Generator[Step, Any, Any]


def read_result(result: Any, read: Callable[[str], Reading]) -> Reading:
    """Read one invoke result, unless it must not be read (cut off, filtered, refused, empty)."""
    text = getattr(result, "raw_text", "") or ""
    problem = reply_problem(
        text, getattr(result, "finish_reason", None), getattr(result, "refusal", None)
    )
    return Reading(problem=problem, raw=text) if problem else read(text)


def _cut_off(result: Any) -> bool:
    return getattr(result, "finish_reason", None) == "length"


def _second_try(request: dict[str, Any], result: Any) -> dict[str, Any] | None:
    """The request to send again for an unusable reply, or None when asking again is futile."""
    if _cut_off(result):
        room = request.get("maxTokens") or request.get("max_tokens") or FIRST_MAX_TOKENS
        if room >= RETRY_MAX_TOKENS:
            return None
        retry = {k: v for k, v in request.items() if k != "max_tokens"}
        return {**retry, "maxTokens": min(RETRY_MAX_TOKENS, room * 4)}
    if getattr(result, "refusal", None) or getattr(result, "finish_reason", None) == (
        "content_filter"
    ):
        return None
    question = request.get("question", "")
    return {**request, "question": question + RETRY_REMINDER}


Reader = Callable[[str], Reading]


def reply_plan(
    requests: list[dict[str, Any]],
    read: Reader | Sequence[Reader],
    retry: bool = True,
    reserve: int = 0,
) -> Plan:
    """Ask once; ask again once, budget permitting, for each reply that was cut off (always,
    with more room) or could not be read (when ``retry``). One Reading per request, in order;
    ``read`` is one reader for all, or one per request.

    A failed budget lookup or a budget refusal of the retry keeps the first readings.
    """
    readers = [read] * len(requests) if callable(read) else list(read)
    if len(readers) != len(requests):
        raise ValueError(f"{len(readers)} readers for {len(requests)} requests")
    results = yield ("batch", requests)
    if len(results) != len(requests):
        raise ProtocolError(f"judge answered {len(results)} of {len(requests)} requests")
    out = [read_result(r, f) for r, f in zip(results, readers, strict=True)]
    again: list[tuple[int, dict[str, Any]]] = []
    for i, (reading, result) in enumerate(zip(out, results, strict=True)):
        if reading.ok or not (retry or _cut_off(result)):
            continue
        request = _second_try(requests[i], result)
        if request is not None:
            again.append((i, request))
    if not again:
        return out
    try:
        info = yield ("info", None)
    except ProxyError:
        return out
    again = again[: max(0, info.remaining - reserve)]
    if not again:
        return out
    try:
        retried = yield ("retry", [request for _, request in again])
    except BudgetExceeded:
        return out
    if len(retried) != len(again):
        raise ProtocolError(f"judge answered {len(retried)} of {len(again)} retried requests")
    for (i, _), result in zip(again, retried, strict=True):
        reading = read_result(result, readers[i])
        if not reading.ok:
            first = out[i]
            reading = Reading(
                problem=f"{first.problem}; asked again: {reading.problem}",
                raw=f"{first.raw}\n--- retry ---\n{reading.raw}",
            )
        out[i] = reading
    return out


#: Batches are split so no request body nears the proxy's size limit (siblings repeat per item).
MAX_BATCH_BYTES = 512_000


def chunk_requests(
    requests: list[dict[str, Any]], limit: int = MAX_BATCH_BYTES
) -> list[list[dict[str, Any]]]:
    """Consecutive groups of requests whose JSON stays under ``limit`` bytes (one group if small)."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for request in requests:
        item = len(json.dumps(request).encode("utf-8")) + 1
        if chunks[-1] and size + item > limit:
            chunks.append([])
            size = 0
        chunks[-1].append(request)
        size += item
    return chunks


def _batch(client: Any, requests: list[dict[str, Any]]) -> list[Any]:
    return [r for chunk in chunk_requests(requests) for r in client.invoke_batch(chunk)]


async def _abatch(client: Any, requests: list[dict[str, Any]]) -> list[Any]:
    return [r for chunk in chunk_requests(requests) for r in await client.invoke_batch(chunk)]


def drive(client: Any, plan: Plan) -> Any:
    """Run a plan with a blocking client."""
    feed, answer = plan.send, None
    try:
        while True:
            kind, requests = feed(answer)
            try:
                answer = client.info() if kind == "info" else _batch(client, requests)
                feed = plan.send
            except ProxyError as exc:
                feed, answer = plan.throw, exc
    except StopIteration as stop:
        return stop.value


async def adrive(client: Any, plan: Plan) -> Any:
    """Run a plan with an asyncio client."""
    feed, answer = plan.send, None
    try:
        while True:
            kind, requests = feed(answer)
            try:
                answer = await (client.info() if kind == "info" else _abatch(client, requests))
                feed = plan.send
            except ProxyError as exc:
                feed, answer = plan.throw, exc
    except StopIteration as stop:
        return stop.value


def judge_replies(
    client: Any,
    requests: list[dict[str, Any]],
    read: Reader | Sequence[Reader],
    *,
    retry: bool = True,
    reserve: int = 0,
) -> list[Reading]:
    """Send ``requests`` as one batch and read each reply with ``read`` (a grader_sdk.replies
    reader), asking again as ``reply_plan`` describes. For custom graders too."""
    return drive(client, reply_plan(requests, read, retry, reserve))


def _relevance_plan(
    query: str, passages: Sequence[str], expected: str | None, retry: bool, options: dict[str, Any]
) -> Plan:
    if not passages:
        return []
    requests = relevance_requests(query, passages, expected, **options)
    readings = yield from reply_plan(
        requests, lambda raw: read_verdict(raw, _RELEVANCE_KEYS), retry
    )
    return [_verdict(r) for r in readings]


def _attribution_plan(
    statements: Sequence[str], context: Sequence[str], retry: bool, options: dict[str, Any]
) -> Plan:
    if not statements:
        return []
    requests = attribution_requests(statements, context, **options)
    size = len(context)
    readings = yield from reply_plan(
        requests, lambda raw: read_verdict(raw, _ATTRIBUTION_KEYS), retry
    )
    return [_verdict(r, lambda obj: _node_number(_field(obj, _NODE_KEYS), size)) for r in readings]


def _statements_plan(text: str, retry: bool, reserve: int, options: dict[str, Any]) -> Plan:
    readings = yield from reply_plan(
        [statements_request(text, **options)], read_statements, retry, reserve
    )
    reading = readings[0]
    if not reading.ok:
        raise JudgeReplyError(
            f"the judge's list of statements could not be read ({reading.explain()})",
            raw=reading.raw,
        )
    return list(reading.value)  # read_statements has de-duplicated them


def judge_relevance(
    client: Any,
    query: str,
    passages: Sequence[str],
    *,
    expected: str | None = None,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    """One relevance verdict per passage, in order (options: target, temperature, max_tokens,
    response_format; None drops the default)."""
    return drive(client, _relevance_plan(query, passages, expected, retry, options))


def judge_attribution(
    client: Any,
    statements: Sequence[str],
    context: Sequence[str],
    *,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    """One verdict per statement: is it supported by ``context``, and by which passage (1-based)."""
    return drive(client, _attribution_plan(statements, context, retry, options))


def extract_statements(
    client: Any, text: str, *, retry: bool = True, reserve: int = 0, **options: Any
) -> list[str]:
    """The distinct factual statements of ``text``; raises JudgeReplyError if unreadable.

    ``reserve`` keeps that many calls of the budget back when deciding whether to retry.
    """
    return drive(client, _statements_plan(text, retry, reserve, options))


async def ajudge_relevance(
    client: Any,
    query: str,
    passages: Sequence[str],
    *,
    expected: str | None = None,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    return await adrive(client, _relevance_plan(query, passages, expected, retry, options))


async def ajudge_attribution(
    client: Any,
    statements: Sequence[str],
    context: Sequence[str],
    *,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    return await adrive(client, _attribution_plan(statements, context, retry, options))


async def aextract_statements(
    client: Any, text: str, *, retry: bool = True, reserve: int = 0, **options: Any
) -> list[str]:
    return await adrive(client, _statements_plan(text, retry, reserve, options))
