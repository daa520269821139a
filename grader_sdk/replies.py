"""Reading judge replies: one set of rules for every grader (docs/judge-graders.md, "How replies
are read").

A reply is read right or not at all. Reasoning blocks are dropped; every JSON-ish value in what
is left is a candidate (strict JSON, JSON5-style bare keys, comments and trailing commas, Python
literals); the **last** candidate that fits the expected shape wins. Without one, key/value lines,
markdown tables and explicit rating declarations are read by key, never the key as the value.
Whatever still does not fit gives a ``Reading`` with ``ok`` false and the reason, so the grader
abstains instead of scoring.

    from grader_sdk.replies import read_verdict, read_rating, read_scores, read_statements

    reading = read_verdict(reply.raw_text, ("relevant",))
    if not reading.ok:
        raise Abstain(reading.explain())

Stdlib only and cheap to import: regular expressions are compiled on first use.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "Dimension",
    "Reading",
    "as_bool",
    "candidates",
    "excerpt",
    "is_refusal",
    "parse_json_reply",
    "read_rating",
    "read_scores",
    "read_statements",
    "read_verdict",
    "reply_problem",
    "scaled_number",
    "strip_reasoning",
]

#: How much of a reply an abstention quotes.
EXCERPT_CHARS = 160
#: Longer replies are read only in their first part (a judge reply is a few kilobytes at most).
MAX_READ_CHARS = 200_000

_TRUE = frozenset({"yes", "y", "true", "relevant", "attributable", "attributed", "supported",
                   "correct", "pass", "1"})  # fmt: skip
_FALSE = frozenset({"no", "n", "false", "irrelevant", "not relevant", "not attributable",
                    "unattributable", "not attributed", "unsupported", "not supported",
                    "incorrect", "fail", "0"})  # fmt: skip
_INTENSIFIERS = ("highly ", "very ", "clearly ", "fully ", "definitely ", "directly ", "strongly ")
_REASONING_TAGS = ("think", "thinking", "reasoning", "reflection", "scratchpad")
_VERDICT_LISTS = ("verdicts", "classifications", "results", "judgements", "judgments")
_STATEMENT_LISTS = ("statements", "claims", "facts", "truths", "sentences")
_STATEMENT_FIELDS = ("statement", "text", "claim", "fact")
_NAME_FIELDS = ("name", "dimension", "code", "metric", "criterion", "key", "label")
_VALUE_FIELDS = ("score", "value", "rating", "choice", "points")
_RATING_KEYS = ("choice", "score", "rating", "grade", "verdict", "answer", "value")


class Reading:
    """What a reply says: ``value`` when ``ok``; else ``problem`` says why it could not be read."""

    __slots__ = ("value", "problem", "source", "data", "raw")

    def __init__(
        self,
        value: Any = None,
        problem: str = "",
        *,
        source: str = "",
        data: Any = None,
        raw: str = "",
    ) -> None:
        self.value = value
        self.problem = problem
        self.source = source
        self.data = data
        self.raw = raw

    @property
    def ok(self) -> bool:
        return not self.problem

    def explain(self) -> str:
        """The problem and a short excerpt of the reply, for an abstention's reason."""
        quoted = excerpt(self.raw)
        return f"{self.problem}: {_quote(quoted)}" if quoted else self.problem

    def __repr__(self) -> str:
        if self.ok:
            return f"Reading({self.value!r}, source={self.source!r})"
        return f"Reading(problem={self.problem!r})"


class Dimension:
    """One scored dimension: its code, other names it may be given under, and its range."""

    __slots__ = ("code", "aliases", "low", "high", "integer")

    def __init__(
        self,
        code: str,
        aliases: Iterable[str] = (),
        low: float = 0.0,
        high: float = 5.0,
        *,
        integer: bool = False,
    ) -> None:
        self.code = code
        self.aliases = tuple(aliases)
        self.low = low
        self.high = high
        self.integer = integer

    def names(self) -> set[str]:
        return {_squash(n) for n in (self.code, *self.aliases) if _squash(n)}


# --- regular expressions, compiled on first use ------------------------------------------------

_RE: dict[str, Any] = {}


def _re(name: str) -> Any:
    if not _RE:
        import re

        number = r"(-?\d+(?:\.\d+)?)"
        scale = rf"(?:\s*(?:/|out\s+of|of)\s*{number})?"
        _RE.update(
            squash=re.compile(r"[^a-z0-9]+"),
            words=re.compile(r"[^a-z0-9 ]+"),
            spaces=re.compile(r"\s+"),
            number=re.compile(
                rf"(?i)\s*\(?\s*{number}\s*(%)?{scale}\s*(%)?\s*\)?\s*"
                rf"(?:\((?:out\s+of|of|/)\s*{number}\s*\))?\s*[.!]?\s*"
            ),
            key_line=re.compile(
                r"^[\s>*_#`-]*(?:\d+[.)]\s+)?[*_`]*([A-Za-z][A-Za-z0-9 _/()'&-]{0,60}?)[*_`]*"
                r"\s*(?::|=|\s-\s|\s\u2013\s)\s*[*_`]*(.+?)[*_`]*\s*$"
            ),
            leading=re.compile(
                rf"(?i)^\s*(\(?{number}\s*%?{scale}\s*%?\)?)\s*(?:$|[.,;:(\u2013\u2014]|-\s)"
            ),
            bullet=re.compile(
                r"^\s*(?:[-*+\u2022\u2023\u25e6]|\(?\d{1,3}[.):]|\[\d{1,3}\])\s+(.+)$"
            ),
            sentence_end=re.compile(r"(?<=[.!?;])\s+|\n+"),
            clause=re.compile(r"[.\n:;,!?()\u2013\u2014]|\s-\s"),
            declared=re.compile(
                rf"(?i)\b((?:final|overall|revised|updated|corrected|adjusted|new|then)\s+)?"
                rf"(score|rating|choice|grade|verdict|{{names}})\b"
                rf"[*_`\s]*(?:is|of|:|=|-|\u2013|\u2014)?[*_`\s]*(?:a\s+|an\s+)?{number}"
                rf"(?!\.\d)(?:\s*(?:/|out\s+of|of)\s*{number})?(?![\d.]*\d)"
            ),
            first_person=re.compile(
                rf"(?i)\b(?:i'd|i\s+would|i\s+will|i'll|i)\s+(?:rate|give|score|grade|assign)"
                rf"\s+(?:it|this|the\s+answer|this\s+answer|the\s+response)?\s*(?:a\s+|an\s+)?"
                rf"{number}(?!\.\d)(?:\s*(?:/|out\s+of|of)\s*{number})?"
            ),
            rated=re.compile(rf"(?i)\brated\s+(?:it\s+)?(?:a\s+|an\s+)?{number}(?!\.\d){scale}"),
            bare=re.compile(
                rf"^[\s*_#>`'\"\[\](){{}}:.]*{number}{scale}[\s*_#>`'\"\[\](){{}}:.]*$"
            ),
            heading=re.compile(
                r"(?i)^[\s#*_>`]*(?:final\s+|overall\s+)?(score|rating|choice|grade)"
            ),
            hypothetical=re.compile(
                r"(?i)\b(?:if|unless|had\s+(?:it|the|this|they|there)|(?<!\bi\s)would|"
                r"needs?\s+to|to\s+(?:get|earn|reach|deserve)|could\s+(?:get|be)|might|"
                r"a\s+perfect|for\s+a\s+\d)\b"
            ),
            refusal=re.compile(
                r"(?i)^\W*(?:i'?m\s+sorry|sorry\b|i\s+apologi[sz]e|i\s+(?:can(?:no|')t|cannot|"
                r"won't|will\s+not|am\s+(?:not\s+able|unable)|'m\s+(?:not\s+able|unable)|"
                r"must\s+decline|do\s+not\s+feel)|i'm\s+(?:not\s+able|unable)|as\s+an\s+ai\b|"
                r"unfortunately,?\s+i\s+(?:can(?:no|')t|cannot|am\s+unable))"
            ),
            table_separator=re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$"),
        )
    return _RE[name]


def _squash(text: str) -> str:
    return _re("squash").sub("", str(text).lower())


# --- what every reader starts from --------------------------------------------------------------


def reply_problem(
    text: str | None, finish_reason: str | None = None, refusal: str | None = None
) -> str | None:
    """Why a reply must not be read at all (cut off, filtered, refused, empty), or None."""
    reason = (finish_reason or "").lower()
    if reason == "length":
        return "the reply was cut off at the token limit (finish reason length)"
    if reason == "content_filter":
        return "the provider withheld the reply (finish reason content_filter)"
    if refusal:
        return f"the judge refused: {excerpt(refusal)}"
    if not (text or "").strip():
        return "the judge's reply is empty"
    return None


def _quote(value: Any) -> str:
    """JSON text of a value, written as the JS SDK writes it (same messages in both SDKs)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning: ``<think>...</think>`` and the like are removed; an
    opened block that never closes takes the rest of the reply with it; a closing tag with no
    opening one (the reasoning was streamed before it) drops everything up to it."""
    import re

    for tag in _REASONING_TAGS:
        opening = re.compile(f"<{tag}>", re.IGNORECASE)
        closing = re.compile(f"</{tag}>", re.IGNORECASE)
        closes = list(closing.finditer(text))
        if closes and not opening.search(text, 0, closes[-1].start()):
            text = text[closes[-1].end() :]
        while (found := opening.search(text)) is not None:
            close = closing.search(text, found.start())
            text = text[: found.start()] + (text[close.end() :] if close else "")
    return text.strip().lstrip("\ufeff")


def is_refusal(text: str) -> bool:
    """Does the reply open by declining (``I'm sorry``, ``I can't``, ``As an AI``)?"""
    return bool(_re("refusal").match(text.strip()))


# --- JSON-ish candidates ------------------------------------------------------------------------


def candidates(text: str) -> list[Any]:
    """Every complete JSON-ish object or array in ``text``, in order of position.

    A candidate starts at ``{`` or ``[`` and ends at its balanced closer; it is parsed as strict
    JSON, then as relaxed JSON (comments, trailing commas, bare keys, single quotes, smart
    quotes, Python's True/False/None). Text inside an accepted candidate is not scanned again.
    """
    text = text[:MAX_READ_CHARS]
    found: list[Any] = []
    index = 0
    while True:
        starts = [p for p in (text.find("{", index), text.find("[", index)) if p != -1]
        if not starts:
            return found
        start = min(starts)
        end = _balanced_end(text, start)
        value = _parse_candidate(text[start:end]) if end != -1 else None
        if isinstance(value, (dict, list)):
            found.append(value)
            index = end
        else:
            index = start + 1


def _balanced_end(text: str, start: int) -> int:
    """The index after the bracket that closes ``text[start]``, or -1. Strings in either quote
    and ``//``, ``/* */`` comments are skipped; an apostrophe inside a word is not a quote."""
    closers = {"{": "}", "[": "]"}
    stack: list[str] = []
    i, n = start, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'\u201c" and not (ch == "'" and i > 0 and text[i - 1].isalnum()):
            close = "\u201d" if ch == "\u201c" else ch
            i += 1
            while i < n and text[i] != close:
                if text[i] == "\\":
                    i += 1
                elif text[i] == "\n" and close == "'":
                    return -1
                i += 1
        elif ch == "/" and text.startswith("//", i):
            newline = text.find("\n", i)
            i = n if newline == -1 else newline
            continue
        elif ch == "/" and text.startswith("/*", i):
            close_at = text.find("*/", i + 2)
            if close_at == -1:
                return -1
            i = close_at + 2
            continue
        elif ch in closers:
            stack.append(closers[ch])
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return -1
            if not stack:
                return i + 1
        i += 1
    return -1


def _parse_candidate(chunk: str) -> Any:
    try:
        return json.loads(chunk)
    except (ValueError, RecursionError):
        pass
    relaxed = _relax(chunk)
    if relaxed is not None:
        try:
            return json.loads(relaxed)
        except (ValueError, RecursionError):
            pass
    return _python_literal(chunk)


def _python_literal(chunk: str) -> Any:
    """A Python literal (``{'a': True}``), read by ``ast.literal_eval``, never executed."""
    if len(chunk) > 50_000:
        return None
    import ast

    source = chunk.replace("\u201c", '"').replace("\u201d", '"')
    for old, new in (("true", "True"), ("false", "False"), ("null", "None")):
        source = _replace_word(source, old, new)
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _replace_word(text: str, old: str, new: str) -> str:
    import re

    return re.sub(rf"(?<![\w'\"]){old}(?![\w'\"])", new, text)


def _relax(chunk: str) -> str | None:
    """Rewrite near-JSON into JSON, token by token (strings kept intact), or None if it has
    something that is neither JSON nor one of the tolerated slips."""
    out: list[str] = []
    i, n = 0, len(chunk)
    while i < n:
        ch = chunk[i]
        if ch in "\"'\u201c":
            close = "\u201d" if ch == "\u201c" else ch
            j = i + 1
            buf: list[str] = []
            while j < n and chunk[j] != close:
                if chunk[j] == "\\" and j + 1 < n:
                    buf.append(chunk[j : j + 2])
                    j += 2
                    continue
                buf.append('\\"' if chunk[j] == '"' else chunk[j])
                j += 1
            if j >= n:
                return None
            body = "".join(buf)
            if close != '"':
                body = body.replace("\\'", "'")
            out.append(f'"{body}"')
            i = j + 1
        elif chunk.startswith("//", i):
            newline = chunk.find("\n", i)
            i = n if newline == -1 else newline
        elif chunk.startswith("/*", i):
            end = chunk.find("*/", i + 2)
            if end == -1:
                return None
            i = end + 2
        elif ch.isalpha() or ch in "_$":
            j = i
            while j < n and (chunk[j].isalnum() or chunk[j] in "_$-"):
                j += 1
            word = chunk[i:j]
            rest = chunk[j:].lstrip()
            if rest.startswith(":"):
                out.append(json.dumps(word))
            elif word in ("true", "false", "null"):
                out.append(word)
            elif word in ("True", "False", "None"):
                out.append({"True": "true", "False": "false", "None": "null"}[word])
            else:
                return None
            i = j
        elif ch == ",":
            rest = chunk[i + 1 :].lstrip()
            while rest.startswith(("//", "/*")):
                cut = rest.find("\n") if rest.startswith("//") else rest.find("*/") + 1
                rest = "" if cut <= 0 else rest[cut + 1 :].lstrip()
            if not rest.startswith(("}", "]")):
                out.append(",")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_json_reply(text: str | None) -> Any:
    """The last JSON-ish object or array in a reply after its reasoning is dropped, or None.

    Prefer the ``read_*`` functions, which also check that the value has the expected shape.
    """
    found = candidates(strip_reasoning(str(text or "")))
    return found[-1] if found else None


# --- values ---------------------------------------------------------------------------------------


def as_bool(value: Any) -> bool | None:
    """A yes/no value: booleans, 0/1, and words such as ``yes``, ``Not relevant``,
    ``Highly relevant``; None for anything else (``partly``, ``null``, ``yes and no``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value) if value in (0, 1) else None
    if not isinstance(value, str):
        return None
    return _verdict_words(_re("clause").split(value, 1)[0])


def _verdict_words(text: str) -> bool | None:
    words = _re("spaces").sub(" ", _re("words").sub(" ", text.lower())).strip()
    for prefix in _INTENSIFIERS:
        if words.startswith(prefix):
            words = words[len(prefix) :]
    if words in _FALSE:
        return False
    if words in _TRUE:
        return True
    return None


def scaled_number(value: Any, low: float = 0.0, high: float = 5.0) -> tuple[float | None, str]:
    """(number on the ``low..high`` scale, problem). A stated scale is honoured: ``"7/10"`` on
    0..5 is 3.5, ``"80%"`` is 80 percent of ``high``; a 0..1 value given as 1 < x <= 100 is a
    percentage. Numbers outside the range are a problem, never clamped."""
    if isinstance(value, bool) or value is None:
        return None, "no number"
    if isinstance(value, Mapping):
        for key in _VALUE_FIELDS:
            found = _get(value, key)
            if found is not None:
                return scaled_number(found, low, high)
        return None, "no number"
    if isinstance(value, (int, float)):
        number, denominator, percent = float(value), None, False
    elif isinstance(value, str):
        match = _re("number").fullmatch(value)
        if not match:
            return None, f"{_quote(excerpt(value, 40))} is not a number"
        number = float(match.group(1))
        percent = bool(match.group(2) or match.group(4))
        denominator = match.group(3) or match.group(5)
    else:
        return None, "no number"
    if not math.isfinite(number):
        return None, "not a finite number"
    if percent:
        number = low + (high - low) * number / 100.0
    elif denominator is not None:
        scale = float(denominator)
        if scale <= 0 or number > scale:
            return None, f"{number:g} out of {scale:g} is not a rating"
        if scale != high:
            if low != 0:
                return None, f"a rating out of {scale:g} does not fit the {low:g}..{high:g} scale"
            number = number / scale * high
    elif high == 1.0 and number > 1.0:
        if not 10.0 < number <= 100.0:
            return None, f"{number:g} on a 0..1 scale states no scale (a percentage? out of 5?)"
        number /= 100.0
    if number < low - 1e-9 or number > high + 1e-9:
        return None, f"{number:g} is outside {low:g}..{high:g}"
    return number, ""


def _get(mapping: Mapping[Any, Any], name: str) -> Any:
    """``mapping[name]`` ignoring case and punctuation; None when absent."""
    if name in mapping:
        return mapping[name]
    wanted = _squash(name)
    for key, value in mapping.items():
        if isinstance(key, str) and _squash(key) == wanted:
            return value
    return None


# --- text shapes ----------------------------------------------------------------------------------


def _key_lines(text: str, clashes: set[str] | None = None) -> dict[str, str]:
    """``Key: value`` lines (markdown bold, bullets, ``=`` and dashes allowed) as {key: value}.
    A key given twice with different values is dropped (and added to ``clashes``): the reply
    contradicts itself."""
    out: dict[str, str] = {}
    clashes = set() if clashes is None else clashes
    for line in text.splitlines():
        match = _re("key_line").match(line)
        if not match:
            continue
        key = match.group(1).strip()
        value = match.group(2).strip().strip("*_`").strip()
        if not key or not value:
            continue
        if key in out and out[key] != value:
            clashes.add(key)
        out[key] = value
    for key in clashes:
        out.pop(key, None)
    return out


def _leading_number(text: str) -> str:
    """A text value's number with its scale (``8/10 - plain words`` -> ``8/10``); the text
    itself when it does not start with a number followed by a break in the sentence."""
    match = _re("leading").match(text)
    return match.group(1) if match else text


def _table(text: str) -> dict[str, str]:
    """A markdown table as {first cell: score cell}; the score column is the one headed score,
    value, rating or points, else the second column."""
    lines = [line.strip() for line in text.splitlines()]
    for i in range(len(lines) - 1):
        if "|" not in lines[i] or not _re("table_separator").match(lines[i + 1]):
            continue
        header = _cells(lines[i])
        column = next(
            (k for k, cell in enumerate(header) if _squash(cell) in _VALUE_FIELDS),
            1 if len(header) > 1 else -1,
        )
        if column < 1:
            return {}
        rows: dict[str, str] = {}
        for line in lines[i + 2 :]:
            if "|" not in line:
                break
            cells = _cells(line)
            if len(cells) > column:
                rows[cells[0].strip("*_` ")] = cells[column].strip("*_` ")
        return rows
    return {}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


# --- readers --------------------------------------------------------------------------------------


def _start(text: str | None) -> tuple[str, str, Reading | None]:
    raw = str(text or "")
    body = strip_reasoning(raw[:MAX_READ_CHARS])
    if not body:
        problem = (
            "the reply holds only reasoning, no answer"
            if raw.strip()
            else "the judge's reply is empty"
        )
        return raw, body, Reading(problem=problem, raw=raw)
    return raw, body, None


def _refused(raw: str) -> Reading:
    return Reading(problem="the judge declined to answer", raw=raw)


def read_verdict(text: str | None, keys: Sequence[str]) -> Reading:
    """A yes/no verdict under one of ``keys`` (e.g. ``("relevant", "is_relevant")``).

    Order: the last JSON-ish candidate holding one of the keys (or ``verdict``/``answer``, or a
    one-item DeepEval/RAGAS verdict list); then ``Key: value`` lines; then a reply that opens
    with a verdict (``Yes, ...``, ``Not relevant: ...``, ``Highly relevant``).
    """
    raw, body, empty = _start(text)
    if empty is not None:
        return empty
    fields = (*keys, "verdict", "answer", "attributed", "decision", "label")
    problem = ""
    found_json = candidates(body)
    for candidate in reversed(found_json):
        found, value = _verdict_field(candidate, fields)
        if not found:
            continue
        verdict = as_bool(value)
        if verdict is None:
            problem = f"the verdict {excerpt(_quote(value), 40)} is not yes or no"
            break
        return Reading(verdict, source="json", data=_object(candidate), raw=raw)
    if problem:
        return Reading(problem=problem, raw=raw)
    clashes: set[str] = set()
    lines = _key_lines(body, clashes)
    wanted = {_squash(k) for k in fields}
    if any(_squash(k) in wanted for k in clashes):
        return Reading(problem="the reply gives different verdicts", raw=raw)
    if body.lstrip("`").lstrip().startswith(("{", "[")):
        if found_json:
            return Reading(problem="no yes/no verdict in the reply's JSON", raw=raw)
        return Reading(problem="the reply's JSON is incomplete or invalid", raw=raw)
    for key in reversed(list(lines)):
        if _squash(key) in wanted:
            verdict = _verdict_words(_re("clause").split(lines[key], 1)[0])
            if verdict is None:
                return Reading(
                    problem=f"{key}: {_quote(excerpt(lines[key], 40))} is not yes or no", raw=raw
                )
            return Reading(verdict, source="lines", data=lines, raw=raw)
    if is_refusal(body):
        return _refused(raw)
    first = _re("clause").split(body, 1)[0]
    verdict = _verdict_words(first)
    if verdict is not None:
        return Reading(verdict, source="text", raw=raw)
    return Reading(problem="no yes/no verdict found in the reply", raw=raw)


def _verdict_field(candidate: Any, fields: Sequence[str]) -> tuple[bool, Any]:
    obj = _object(candidate)
    if obj is None:
        return False, None
    for key in fields:
        value = _get(obj, key)
        if value is not None or any(_squash(str(k)) == _squash(key) for k in obj):
            return True, value
    for name in _VERDICT_LISTS:
        inner = _get(obj, name)
        if isinstance(inner, list) and len(inner) == 1:
            return _verdict_field(inner[0], fields)
    return False, None


def _object(candidate: Any) -> dict[str, Any] | None:
    if isinstance(candidate, dict):
        return candidate
    if isinstance(candidate, list) and len(candidate) == 1 and isinstance(candidate[0], dict):
        return candidate[0]
    return None


def read_statements(text: str | None) -> Reading:
    """A list of statements: the last JSON-ish list of strings (or of ``{statement: ...}``
    objects, or under ``statements``/``claims``); else bullet or numbered lines (a preamble
    before them and a remark after them are allowed); else two or more lines that are each a
    sentence."""
    raw, body, empty = _start(text)
    if empty is not None:
        return empty
    for candidate in reversed(candidates(body)):
        items = _statement_items(candidate)
        if items is not None:
            return Reading(dedupe_statements(items), source="json", data=candidate, raw=raw)
    if is_refusal(body):
        return _refused(raw)
    lines = [line.strip() for line in body.splitlines()]
    marks = [_re("bullet").match(line) for line in lines]
    at = [i for i, m in enumerate(marks) if m]
    if at:
        inside = lines[at[0] : at[-1] + 1]
        if all(marks[at[0] + k] or not line for k, line in enumerate(inside)):
            items = [m.group(1).strip() for m in marks if m]
            return Reading(dedupe_statements(items), source="lines", raw=raw)
        return Reading(problem="text between the listed statements", raw=raw)
    sentences = [line for line in lines if line]
    if sentences and sentences[0].endswith(":"):
        sentences = sentences[1:]
    if len(sentences) >= 2 and all(s[-1] in ".!?" and s[0].isupper() for s in sentences):
        return Reading(dedupe_statements(sentences), source="lines", raw=raw)
    return Reading(problem="no list of statements found in the reply", raw=raw)


def _statement_items(candidate: Any) -> list[str] | None:
    if isinstance(candidate, dict):
        for key in _STATEMENT_LISTS:
            inner = _get(candidate, key)
            if isinstance(inner, list):
                return _statement_items(inner)
        return None
    if not isinstance(candidate, list):
        return None
    out: list[str] = []
    for item in candidate:
        if isinstance(item, str):
            out.append(item.strip())
        elif isinstance(item, dict):
            value = next((_get(item, k) for k in _STATEMENT_FIELDS if _get(item, k)), None)
            if not isinstance(value, str):
                return None
            out.append(value.strip())
        else:
            return None
    return [s for s in out if s]


def statement_key(statement: str) -> str:
    """What two statements share when they say the same: case, spaces and a final full stop
    ignored."""
    return " ".join(statement.lower().split()).strip(" .")


def dedupe_statements(statements: Iterable[str]) -> list[str]:
    """The statements in order, each once (by :func:`statement_key`)."""
    seen: set[str] = set()
    out: list[str] = []
    for statement in statements:
        key = statement_key(statement)
        if key and key not in seen:
            seen.add(key)
            out.append(statement)
    return out


def read_rating(
    text: str | None,
    low: float = 1.0,
    high: float = 5.0,
    *,
    names: Sequence[str] = (),
    integer: bool = True,
) -> Reading:
    """One rating on ``low..high`` (``names``: the dimension's own names, accepted as keys).

    Order: the last JSON-ish candidate with a rating field (``choice``, ``score``, ``rating``,
    a dimension name, or a ``{name, score}`` list); a markdown table row; then explicit
    declarations in the text (``Score: 4``, ``I'd rate it a 4``, ``Rated 2 of 5``, a bare
    number on the last line or under a ``Rating`` heading). Declarations in hypothetical
    sentences (``a 5 would need sources``) do not count; different declared values with none
    marked final make the reply unreadable, as do numbers off the scale or, with ``integer``,
    fractions.
    """
    raw, body, empty = _start(text)
    if empty is not None:
        return empty
    dim = Dimension(names[0] if names else "rating", names[1:], low, high, integer=integer)
    keys = (*_RATING_KEYS, *names)
    for candidate in reversed(candidates(body)):
        found, value = _rating_field(candidate, keys, dim)
        if found:
            return _rated(value, dim, raw, "json", candidate)
    rows = _table(body)
    row = next((rows[k] for k in rows if _squash(k) in dim.names() | set(_RATING_KEYS)), None)
    if row is not None:
        return _rated(row, dim, raw, "table", rows)
    if is_refusal(body):
        return _refused(raw)
    return _declared_rating(body, dim, raw)


def _rating_field(candidate: Any, keys: Sequence[str], dim: Dimension) -> tuple[bool, Any]:
    if isinstance(candidate, list):
        named = _named_scores(candidate)
        if named:
            for name, value in named.items():
                if _squash(name) in dim.names():
                    return True, value
            if len(named) == 1:
                return True, next(iter(named.values()))
        obj = _object(candidate)
        return _rating_field(obj, keys, dim) if obj is not None else (False, None)
    if not isinstance(candidate, dict):
        return False, None
    for key in keys:
        value = _get(candidate, key)
        if value is not None:
            return True, value
    return False, None


def _rated(value: Any, dim: Dimension, raw: str, source: str, data: Any) -> Reading:
    number, problem = scaled_number(value, dim.low, dim.high)
    if number is None:
        return Reading(problem=f"the rating {problem}", raw=raw)
    if dim.integer and not float(number).is_integer():
        return Reading(problem=f"the rating {number:g} is not one of the choices", raw=raw)
    return Reading(number, source=source, data=data, raw=raw)


def _declared_rating(body: str, dim: Dimension, raw: str) -> Reading:
    import re

    names = "|".join(re.escape(n) for n in (dim.code, *dim.aliases) if n) or "score"
    declared = re.compile(_re("declared").pattern.replace("{names}", names))
    found: list[tuple[bool, str]] = []  # (marked final, the number as written)
    for sentence in _re("sentence_end").split(body):
        if not sentence.strip() or _re("hypothetical").search(sentence):
            continue
        for match in declared.finditer(sentence):
            found.append((bool(match.group(1)), _as_written(match.group(3), match.group(4))))
        for pattern in ("first_person", "rated"):
            for match in _re(pattern).finditer(sentence):
                found.append((False, _as_written(match.group(1), match.group(2))))
    lines = [line for line in body.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        bare = _re("bare").match(line)
        if bare and (i == len(lines) - 1 or (i > 0 and _re("heading").match(lines[i - 1]))):
            found.append((i == len(lines) - 1, _as_written(bare.group(1), bare.group(2))))
    if not found:
        return Reading(problem="no rating found in the reply", raw=raw)
    final = [v for marked, v in found if marked]
    values = {_squash(v) for _, v in found}
    if len(values) > 1 and not final:
        return Reading(problem="the reply gives different ratings", raw=raw)
    return _rated(final[-1] if final else found[-1][1], dim, raw, "text", None)


def _as_written(number: str, scale: str | None) -> str:
    return f"{number}/{scale}" if scale else number


def _named_scores(items: list[Any]) -> dict[str, Any]:
    """A list of ``{name: ..., score: ...}`` objects as {name: score}."""
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict):
            return {}
        name = next((_get(item, k) for k in _NAME_FIELDS if isinstance(_get(item, k), str)), None)
        value = next((_get(item, k) for k in _VALUE_FIELDS if _get(item, k) is not None), None)
        if name is None or value is None:
            return {}
        out[name] = value
    return out


def read_scores(text: str | None, dimensions: Sequence[Dimension]) -> Reading:
    """Every dimension's score, as {code: number}.

    Order: the last JSON-ish candidate that gives every dimension (looked up by code or alias
    at any depth, including ``{name, score}`` lists); then a markdown table; then ``Key: value``
    lines. Scales are honoured as in ``scaled_number``. When no source gives every dimension the
    reading fails, naming what is missing or off the scale.
    """
    raw, body, empty = _start(text)
    if empty is not None:
        return empty
    best = ""
    for candidate in reversed(candidates(body)):
        scores, problem = _scores_from(_flatten(candidate), dimensions)
        if scores is not None:
            return Reading(scores, source="json", data=_object(candidate) or candidate, raw=raw)
        best = best or problem
    for source, found in (("table", _table(body)), ("lines", _key_lines(body))):
        if found:
            found = {k: _leading_number(v) for k, v in found.items()}
            scores, problem = _scores_from(found, dimensions)
            if scores is not None:
                return Reading(scores, source=source, data=found, raw=raw)
            best = best or problem
    if not best and is_refusal(body):
        return _refused(raw)
    return Reading(problem=best or "no scores found in the reply", raw=raw)


def _flatten(value: Any, out: dict[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    """Every name -> leaf value in nested objects and ``{name, score}`` lists (to depth 8); an
    outer name wins over the same name deeper down only if it is not itself an object."""
    out = {} if out is None else out
    if depth > 8:
        return out
    if isinstance(value, list):
        named = _named_scores(value)
        for name, score in named.items():
            out.setdefault(name, score)
        if not named:
            for item in value:
                if isinstance(item, (dict, list)):
                    _flatten(item, out, depth + 1)
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and not _is_score_object(item):
                _flatten(item, out, depth + 1)
            else:
                out.setdefault(str(key), item)
    return out


def _is_score_object(value: Any) -> bool:
    return isinstance(value, dict) and any(_get(value, k) is not None for k in _VALUE_FIELDS)


def _scores_from(
    found: Mapping[str, Any], dimensions: Sequence[Dimension]
) -> tuple[dict[str, float] | None, str]:
    by_name = {_squash(k): v for k, v in found.items()}
    scores: dict[str, float] = {}
    missing: list[str] = []
    bad: list[str] = []
    for dim in dimensions:
        value = next((by_name[n] for n in dim.names() if n in by_name), None)
        if value is None:
            missing.append(dim.code)
            continue
        number, problem = scaled_number(value, dim.low, dim.high)
        if number is None:
            bad.append(f"{dim.code} ({problem})")
        else:
            scores[dim.code] = number
    if missing or bad:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if bad:
            parts.append("unreadable " + ", ".join(bad))
        return None, "; ".join(parts)
    return scores, ""
