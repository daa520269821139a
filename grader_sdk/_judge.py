"""Judge helpers: one prompt for LLM judges plus the typed task for non-LLM judges, per item.

Each helper sends its whole list as one ``invokeBatch``, reads every reply leniently, and asks
again once (in one more batch, budget permitting) for the replies it could not read. The retry
prompt carries a reminder, so a response cache cannot hand back the same unreadable reply.

The logic is written once as a generator that yields the proxy calls it needs; a blocking and an
asyncio driver run it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from grader_sdk._errors import BudgetExceeded, JudgeReplyError, ProtocolError, ProxyError

T = TypeVar("T")

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

_TRUE = ("yes", "true", "relevant", "attributable", "supported", "correct", "1", "y", "pass")
_FALSE = (
    "no",
    "false",
    "irrelevant",
    "not relevant",
    "not attributable",
    "unattributable",
    "unsupported",
    "not supported",
    "incorrect",
    "0",
    "n",
    "fail",
)
_REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "justification")
_RELEVANCE_KEYS = ("relevant", "is_relevant", "isRelevant", "relevance", "verdict", "answer")
_ATTRIBUTION_KEYS = (
    "attributable",
    "is_attributable",
    "isAttributable",
    "attributed",
    "supported",
    "verdict",
    "answer",
)
_NODE_KEYS = ("node", "node_index", "nodeIndex", "passage", "supporting_node", "source", "index")
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass
class Verdict:
    """One judged item. ``ok`` is None when the judge's reply could not be read."""

    ok: bool | None
    reason: str = ""
    node: int | None = None
    confidence: float | None = None
    raw: str = ""


# --- lenient parsing -------------------------------------------------------------------------


def parse_json_reply(text: str | None) -> dict[str, Any] | list[Any] | None:
    """The JSON object (or list) in a judge's reply: bare, fenced, or wrapped in prose."""
    if not text:
        return None
    stripped = text.strip().lstrip("\ufeff")
    for candidate in (stripped, *(m.group(1).strip() for m in _FENCE.finditer(stripped))):
        value = _loads(candidate)
        if isinstance(value, (dict, list)):
            return value
    found = _scan(stripped, "{") or _scan(stripped, "[")
    if found is not None:
        return found
    return _scan(_repair(stripped), "{")


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _scan(text: str, opener: str) -> dict[str, Any] | list[Any] | None:
    """First position where a JSON value of the opener's type decodes (trailing text ignored)."""
    decoder = json.JSONDecoder()
    start = text.find(opener)
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, (dict, list)) and value:
            return value
        start = text.find(opener, start + 1)
    return None


def _repair(text: str) -> str:
    """Fix the usual near-JSON: smart quotes, trailing commas, Python literals, single quotes."""
    text = text.replace("\u201c", '"').replace("\u201d", '"').replace("\u2019", "'")
    text = re.sub(r",\s*([}\]])", r"\1", text)
    text = re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", text))
    text = re.sub(r"\bNone\b", "null", text)
    if '"' not in text:
        text = text.replace("'", '"')
    return text


def as_bool(value: Any) -> bool | None:
    """Read yes/no-style values: booleans, 0/1, and strings like "yes", "Not relevant"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        word = re.sub(r"[^a-z0-9 ]", "", value.strip().lower()).strip()
        if word in _FALSE:
            return False
        if word in _TRUE:
            return True
        head = word.split(" ", 1)[0] if word else ""
        if word.startswith(("not ", "no ")) or head in ("no", "false", "irrelevant"):
            return False
        if head in ("yes", "true", "relevant", "attributable", "supported"):
            return True
    return None


def _first_object(parsed: Any) -> dict[str, Any] | None:
    if isinstance(parsed, dict):
        return parsed
    if isinstance(parsed, list) and len(parsed) == 1 and isinstance(parsed[0], dict):
        return parsed[0]
    return None


def _field(obj: dict[str, Any], keys: Sequence[str]) -> Any:
    lowered = {str(k).lower(): v for k, v in obj.items()}
    for key in keys:
        if key in obj:
            return obj[key]
        if key.lower() in lowered:
            return lowered[key.lower()]
    return None


def _reason(obj: dict[str, Any]) -> str:
    value = _field(obj, _REASON_KEYS)
    return value.strip() if isinstance(value, str) else ""


def _confidence(obj: dict[str, Any]) -> float | None:
    value = _field(obj, ("confidence", "certainty"))
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if number > 1.0 and number <= 100.0:
        number /= 100.0
    return min(1.0, max(0.0, number))


def _plain_text_verdict(text: str) -> bool | None:
    """A reply with no JSON at all that starts with a clear yes/no."""
    first = re.split(r"[.\n:,;!]", text.strip(), maxsplit=1)[0]
    word = re.sub(r"[^a-z0-9 ]", "", first.lower()).strip()
    if word in _FALSE:
        return False
    return True if word in _TRUE else None


def read_relevance(reply: str) -> Verdict | None:
    return _read_verdict(reply, _RELEVANCE_KEYS)


def read_attribution(reply: str, context_size: int) -> Verdict | None:
    return _read_verdict(
        reply, _ATTRIBUTION_KEYS, lambda obj: _node_number(_field(obj, _NODE_KEYS), context_size)
    )


def _read_verdict(
    reply: str,
    keys: Sequence[str],
    node_of: Callable[[dict[str, Any]], int | None] | None = None,
) -> Verdict | None:
    """A yes/no verdict (``node_of`` names the supporting node of a yes); None if unreadable."""
    obj = _first_object(parse_json_reply(reply))
    if obj is None:
        ok = _plain_text_verdict(reply)
        return None if ok is None else Verdict(ok, reply.strip()[:500], None, None, reply)
    ok = as_bool(_field(obj, keys))
    if ok is None:
        return None
    node = node_of(obj) if ok and node_of is not None else None
    return Verdict(ok, _reason(obj), node, _confidence(obj), reply)


def _node_number(value: Any, size: int) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, str):
        match = re.search(r"\d+", value)
        value = int(match.group()) if match else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 1 <= value <= size else None


def read_statements(reply: str) -> list[str] | None:
    parsed = parse_json_reply(reply)
    items: Any = None
    if isinstance(parsed, list):
        items = parsed
    elif isinstance(parsed, dict):
        items = _field(parsed, ("statements", "claims", "facts"))
    if items is None and parsed is None:
        items = _bulleted_lines(reply)
    if not isinstance(items, list):
        return None
    texts = [_statement_text(item) for item in items]
    if any(t is None for t in texts):
        return None
    return dedupe_statements([t for t in texts if t])


def _statement_text(item: Any) -> str | None:
    if isinstance(item, str):
        return item.strip()
    if isinstance(item, dict):
        value = _field(item, ("statement", "text", "claim", "fact"))
        return value.strip() if isinstance(value, str) else None
    return None


def _bulleted_lines(reply: str) -> list[str] | None:
    lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
    bullet = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+(.*)$")
    matches = [bullet.match(line) for line in lines]
    if not lines or not all(matches):
        return None
    return [m.group(1) for m in matches if m]


def dedupe_statements(statements: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for statement in statements:
        key = re.sub(r"\s+", " ", statement.lower()).strip(" .")
        if key and key not in seen:
            seen.add(key)
            out.append(statement)
    return out


# --- requests --------------------------------------------------------------------------------


def relevance_prompt(query: str, passage: str, expected: str | None = None) -> str:
    parts = [f"<question>\n{query}\n</question>"]
    if expected:
        parts.append(f"<expected_answer>\n{expected}\n</expected_answer>")
    parts.append(f"<passage>\n{passage}\n</passage>")
    parts.append("Is this passage relevant to the question? Reply with the JSON object only.")
    return "\n\n".join(parts)


def attribution_prompt(statement: str, context: Sequence[str]) -> str:
    numbered = "\n".join(f"[{i}] {passage}" for i, passage in enumerate(context, 1))
    return (
        f"<passages>\n{numbered}\n</passages>\n\n<statement>\n{statement}\n</statement>\n\n"
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
    return [
        _request(
            relevance_prompt(query, passage, expected),
            RELEVANCE_SYSTEM,
            {"kind": "relevance", "query": query, "passage": passage, "siblings": siblings},
            options,
        )
        for passage in passages
    ]


def attribution_requests(
    statements: Sequence[str], context: Sequence[str], **options: Any
) -> list[dict[str, Any]]:
    ctx = list(context)
    return [
        _request(
            attribution_prompt(statement, ctx),
            ATTRIBUTION_SYSTEM,
            {"kind": "attribution", "statement": statement, "context": ctx},
            options,
        )
        for statement in statements
    ]


def statements_request(text: str, **options: Any) -> dict[str, Any]:
    return _request(
        statements_prompt(text), STATEMENTS_SYSTEM, {"kind": "statements", "text": text}, options
    )


def _request(
    question: str, system: str, task: dict[str, Any], options: dict[str, Any]
) -> dict[str, Any]:
    request: dict[str, Any] = {"question": question, "systemPrompt": system, "task": task}
    temperature = options.get("temperature", 0.0)
    if temperature is not None:
        request["temperature"] = temperature
    for key, wire in (
        ("target", "target"),
        ("max_tokens", "maxTokens"),
        ("response_format", "responseFormat"),
    ):
        if options.get(key) is not None:
            request[wire] = options[key]
    return request


# --- one plan, two drivers -------------------------------------------------------------------

#: What a plan asks its driver for: ("batch", requests), ("retry", requests) or ("info", None).
#: A driver sends back the answer, or throws the ProxyError the call raised into the plan.
Step = tuple[str, Any]
Plan = Generator[Step, Any, T]


def _plan(
    requests: list[dict[str, Any]],
    read: Callable[[str], T | None],
    retry: bool,
    reserve: int = 0,
) -> Plan[list[tuple[T | None, str]]]:
    """Ask once, re-ask the unreadable replies once if the budget allows; (parsed, raw) each.

    A failed budget lookup or a budget refusal of the retry keeps the first replies as they are.
    """
    results = yield ("batch", requests)
    if len(results) != len(requests):
        raise ProtocolError(f"judge answered {len(results)} of {len(requests)} requests")
    out: list[tuple[T | None, str]] = [(read(r.raw_text), r.raw_text) for r in results]
    bad = [i for i, (value, _) in enumerate(out) if value is None]
    if not bad or not retry:
        return out
    try:
        info = yield ("info", None)
    except ProxyError:
        return out
    bad = bad[: max(0, info.remaining - reserve)]
    if not bad:
        return out
    again = [{**requests[i], "question": requests[i]["question"] + RETRY_REMINDER} for i in bad]
    try:
        retried = yield ("retry", again)
    except BudgetExceeded:
        return out
    if len(retried) != len(again):
        raise ProtocolError(f"judge answered {len(retried)} of {len(again)} retried requests")
    for i, result in zip(bad, retried, strict=True):
        value = read(result.raw_text)
        if value is not None:
            out[i] = (value, result.raw_text)
        else:
            out[i] = (None, out[i][1] + "\n--- retry ---\n" + result.raw_text)
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


def _drive(client: Any, plan: Plan[T]) -> T:
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


async def _adrive(client: Any, plan: Plan[T]) -> T:
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


def _verdicts(pairs: list[tuple[Verdict | None, str]]) -> list[Verdict]:
    return [
        v
        if v is not None
        else Verdict(None, "the judge's reply could not be read", None, None, raw)
        for v, raw in pairs
    ]


def _relevance_plan(
    query: str, passages: Sequence[str], expected: str | None, retry: bool, options: dict[str, Any]
) -> Plan[list[Verdict]]:
    if not passages:
        return []
    requests = relevance_requests(query, passages, expected, **options)
    return _verdicts((yield from _plan(requests, read_relevance, retry)))


def _attribution_plan(
    statements: Sequence[str], context: Sequence[str], retry: bool, options: dict[str, Any]
) -> Plan[list[Verdict]]:
    if not statements:
        return []
    requests = attribution_requests(statements, context, **options)
    size = len(context)
    pairs = yield from _plan(requests, lambda raw: read_attribution(raw, size), retry)
    return _verdicts(pairs)


def _statements_plan(
    text: str, retry: bool, reserve: int, options: dict[str, Any]
) -> Plan[list[str]]:
    pairs = yield from _plan([statements_request(text, **options)], read_statements, retry, reserve)
    statements, raw = pairs[0]
    if statements is None:
        raise JudgeReplyError("the judge's list of statements could not be read", raw=raw)
    return statements


def judge_relevance(
    client: Any,
    query: str,
    passages: Sequence[str],
    *,
    expected: str | None = None,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    """One relevance verdict per passage, in order (options: target, temperature, max_tokens)."""
    return _drive(client, _relevance_plan(query, passages, expected, retry, options))


def judge_attribution(
    client: Any,
    statements: Sequence[str],
    context: Sequence[str],
    *,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    """One verdict per statement: is it supported by ``context``, and by which passage (1-based)."""
    return _drive(client, _attribution_plan(statements, context, retry, options))


def extract_statements(
    client: Any, text: str, *, retry: bool = True, reserve: int = 0, **options: Any
) -> list[str]:
    """The distinct factual statements of ``text``; raises JudgeReplyError if unreadable.

    ``reserve`` keeps that many calls of the budget back when deciding whether to retry.
    """
    return _drive(client, _statements_plan(text, retry, reserve, options))


async def ajudge_relevance(
    client: Any,
    query: str,
    passages: Sequence[str],
    *,
    expected: str | None = None,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    return await _adrive(client, _relevance_plan(query, passages, expected, retry, options))


async def ajudge_attribution(
    client: Any,
    statements: Sequence[str],
    context: Sequence[str],
    *,
    retry: bool = True,
    **options: Any,
) -> list[Verdict]:
    return await _adrive(client, _attribution_plan(statements, context, retry, options))


async def aextract_statements(
    client: Any, text: str, *, retry: bool = True, reserve: int = 0, **options: Any
) -> list[str]:
    return await _adrive(client, _statements_plan(text, retry, reserve, options))
