"""Turn a finished grader process into a ``GraderOutcome`` by the rules of docs/grader-protocol.md.

Stdout holds a JSON object when it is one, or when one of its lines is an object that reads as
a result (the last such line; the other lines become a warning): JSON is never plain text.

exit 0 + JSON object  -> graded          exit 0 + plain text -> pass, score 1
exit 3                -> unscored        non-zero + text, empty stderr -> fail, score 0
non-zero + JSON       -> error, the JSON's own text as the reason (AgentV's rule)
anything else (stderr on failure, timeout, crash, bad output) -> error
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import signal
from typing import Any

from evalrun.errors import EvalrunError
from evalrun.launcher.process import ProcessOutcome
from evalrun.results.models import GraderOutcome
from evalrun.safetext import json_text_may_hold_surrogates, repair_json, repaired_note

ABSTAIN_EXIT = 3
REASON_CHARS = 300

#: A line that names an error: Python's and Node's exception lines, Go and Rust panics,
#: ``error:``/``fatal:`` prefixes. The stderr tail itself stays in the bundle.
_ERROR_LINE = re.compile(
    r"^\s*(?:Uncaught\s+)?\[?(?:[\w$]+\.)*\w*(?:Error|Exception|Interrupt)\b"
    r"|^\s*panic:|panicked at|^\s*(?i:fatal|error)\b"
)
#: Lines that never explain a crash: stack frames, runtime banners, caret markers.
_NOISE_LINE = re.compile(r"^\s*(?:at\s|File\s\"|Node\.js v|\^+\s*$|\}|\{|-+$|~+$)")


def error_line(stderr: str) -> str:
    """The stderr line that names the error (``TypeError: x is not a function``), not merely
    the last one (Node ends with ``Node.js v20``); else the last line that is not noise."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    index = next((i for i in reversed(range(len(lines))) if _ERROR_LINE.search(lines[i])), None)
    if index is None:
        index = next(
            (i for i in reversed(range(len(lines))) if not _NOISE_LINE.match(lines[i])), None
        )
    if index is None:
        return lines[-1].strip() if lines else ""
    found = lines[index].strip()
    if found.endswith(":") and index + 1 < len(lines):  # Rust: the message is on the next line
        found += " " + lines[index + 1].strip()
    return found if len(found) <= REASON_CHARS else found[: REASON_CHARS - 1] + "…"


class OutputError(EvalrunError, ValueError):
    """The grader's JSON does not follow the output contract."""


def interpret(
    outcome: ProcessOutcome, *, name: str, threshold: float, weight: float
) -> GraderOutcome:
    base = GraderOutcome(
        name=name,
        status="error",
        weight=weight,
        threshold=threshold,
        duration_ms=round(outcome.duration_ms, 1),
        exit_code=outcome.exit_code,
        stderr_tail=outcome.stderr_tail,
    )
    if outcome.spawn_error:
        base.reason = outcome.spawn_error
        return base
    if outcome.timed_out:
        base.reason = "grader timed out and was killed"
        return base
    if outcome.overflowed:
        base.reason = "grader printed more than the stdout limit and was killed"
        return base
    if outcome.failure:
        line = error_line(outcome.stderr_tail)
        base.reason = outcome.failure + (f": {line}" if line else "")
        return base
    code = outcome.exit_code
    if code is not None and code < 0:
        base.reason = f"grader was killed by signal {_signal_name(-code)}"
        return base
    try:
        text = outcome.stdout.decode("utf-8")
    except UnicodeDecodeError:
        base.reason = "grader output is not valid UTF-8"
        return base
    document, others = _result_document(text)
    if others:
        base.warnings.append(mixed_output_note(others))
    if document is not None and json_text_may_hold_surrogates(text):
        document, replaced = repair_json(document)
        if replaced:
            base.warnings.append(repaired_note(replaced, "grader output"))

    if code == ABSTAIN_EXIT:
        base.status = "unscored"
        base.reason = _abstain_reason(document, text, outcome.stderr_tail)
        if document is not None:
            base.details = document.get("details")
        return base

    if code == 0:
        if document is not None:
            return _graded(base, document)
        if text.strip().startswith(("{", "[")):
            base.reason = "grader printed malformed JSON"
            return base
        if text.strip().rsplit("\n", 1)[-1].startswith("{"):
            base.reason = "grader's last stdout line looks like JSON but is not a result object"
            return base
        if not text.strip():
            base.reason = "grader exited 0 but printed nothing"
            return base
        base.status, base.score, base.passed, base.reason = "passed", 1.0, True, text.strip()
        return base

    if document is not None:
        base.reason = _document_text(document) or f"grader exited with status {code}"
        with contextlib.suppress(OutputError):
            base.checks = _checks(document.get("checks", document.get("assertions")))
        return base
    if not outcome.stderr_tail and text.strip() and not text.strip().startswith(("{", "[")):
        base.status, base.score, base.passed, base.reason = "failed", 0.0, False, text.strip()
        return base
    base.reason = f"grader exited with status {code}" + (
        f": {error_line(outcome.stderr_tail)}" if outcome.stderr_tail else ""
    )
    return base


def as_agentv_failure(result: GraderOutcome) -> None:
    """A command grader of an AgentV file that failed (``error``) scores 0 and fails, as AgentV
    records it (docs/grader-protocol.md, "AgentV files"); the reason says so."""
    result.warnings.append(
        "grader failed: recorded as failed with score 0, as AgentV does (an evalrun file "
        "records error)"
    )
    result.status, result.score, result.passed = "failed", 0.0, False
    result.reason = f"Script evaluator failed: {result.reason}"


def _graded(base: GraderOutcome, document: dict[str, Any]) -> GraderOutcome:
    try:
        _apply_output(base, document)
    except OutputError as exc:
        base.status = "error"
        base.reason = f"grader output breaks the contract: {exc}"
        return base
    base.status = "passed" if base.passed else "failed"
    return base


def _apply_output(result: GraderOutcome, doc: dict[str, Any]) -> None:
    if doc.get("abstain") is True:
        raise OutputError("'abstain' is signalled by exit status 3, not by a field")
    checks = _checks(doc.get("checks", doc.get("assertions")))
    score = doc.get("score")
    passed = doc.get("pass", doc.get("passed"))
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score):
            raise OutputError(f"'score' must be a number, got {score!r}")
        if not 0.0 <= score <= 1.0:
            raise OutputError(f"'score' must be between 0 and 1, got {score}")
        score = float(score)
    if passed is not None and not isinstance(passed, bool):
        raise OutputError(f"'pass' must be true or false, got {passed!r}")
    if score is None:
        if passed is not None:
            score = 1.0 if passed else 0.0
        elif checks:
            score = sum(c["score"] if "score" in c else float(c["pass"]) for c in checks) / len(
                checks
            )
        else:
            raise OutputError("needs 'score' (0..1), 'pass' or 'checks'")
    result.score = score
    result.passed = passed if passed is not None else score >= result.threshold
    result.reason = str(doc.get("reason", doc.get("reasoning", "")) or "") or _checks_text(checks)
    result.hits = _strings(doc.get("hits"), "hits")
    result.misses = _strings(doc.get("misses"), "misses")
    result.checks = checks
    result.details = doc.get("details")


def _checks(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OutputError("'checks' must be a list")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise OutputError("each check must be an object")
        passed = item.get("pass", item.get("passed"))
        if not isinstance(passed, bool):
            raise OutputError("each check needs 'pass': true or false")
        check: dict[str, Any] = {
            "text": str(item.get("text", item.get("name", ""))),
            "pass": passed,
        }
        if isinstance(item.get("score"), (int, float)) and not isinstance(item["score"], bool):
            check["score"] = float(item["score"])
        for key in ("reason", "evidence"):
            if item.get(key) is not None:
                check[key] = item[key] if isinstance(item[key], str) else json.dumps(item[key])
        out.append(check)
    return out


def _checks_text(checks: list[dict[str, Any]]) -> str:
    """A reason made of the checks' own words: the failed ones, or all when none failed."""
    chosen = [c for c in checks if not c["pass"]] or checks
    parts = [f"{c['text']}: {c['reason']}" if c.get("reason") else c["text"] for c in chosen]
    return "; ".join(p for p in parts if p)


def _document_text(document: dict[str, Any]) -> str:
    """What a grader that failed with a JSON document said: its reason, else its checks' text."""
    reason = document.get("reason", document.get("reasoning", document.get("error")))
    if isinstance(reason, str) and reason.strip():
        return reason.strip()
    texts = []
    for item in document.get("checks", document.get("assertions")) or []:
        if isinstance(item, dict):
            text = " ".join(
                str(item[k]) for k in ("text", "reason") if isinstance(item.get(k), str) and item[k]
            )
            if text:
                texts.append(text)
    return "; ".join(texts)


def _strings(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OutputError(f"'{key}' must be a list of strings")
    return [v if isinstance(v, str) else json.dumps(v) for v in value]


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


#: Keys that make a JSON object a grader's result (docs/grader-protocol.md, "stdout").
RESULT_KEYS = frozenset({"score", "pass", "passed", "checks", "assertions", "abstain"})
#: How a result's warning about the other stdout lines begins (``grader check`` looks for it).
MIXED_OUTPUT = "grader printed other stdout lines besides its JSON result"
_DECODER = json.JSONDecoder()
_LINE_OBJECT = re.compile(r"^\{", re.MULTILINE)


def _result_document(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The JSON document stdout holds, and the other lines printed with it.

    All of stdout as one object is the document. Else the last object that starts a line and
    ends one (it may span lines, as ``indent=2`` prints it) and has a result key is; a debug
    line before or after it does not turn it into plain text (docs/grader-protocol.md)."""
    whole = _json_object(text)
    if whole is not None:
        return whole, []
    starts = [m.start() for m in _LINE_OBJECT.finditer(text)]
    for start in reversed(starts):
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        line_end = text.find("\n", end)
        rest_of_line = text[end:] if line_end < 0 else text[end:line_end]
        if isinstance(value, dict) and RESULT_KEYS & value.keys() and not rest_of_line.strip():
            others = text[:start] + text[end:]
            return value, [line.strip() for line in others.splitlines() if line.strip()]
    return None, []


def mixed_output_note(others: list[str]) -> str:
    """The warning a result carries for the lines printed besides it: how many, the first."""
    first = others[0] if len(others[0]) <= 120 else others[0][:119] + "…"
    return f"{MIXED_OUTPUT} ({len(others)}, first: {first!r}); print debug output to stderr"


def _abstain_reason(document: dict[str, Any] | None, text: str, stderr: str) -> str:
    if document is not None:
        reason = document.get("reason", document.get("reasoning"))
        if reason:
            return str(reason)
    if text.strip() and document is None:
        return text.strip()
    return error_line(stderr) if stderr else "grader abstained"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
