"""LLM rubric: does the answer meet each rubric item? One judge verdict per item.

This is what an AgentV ``llm-rubric`` assertion (or a plain string under ``assert:``) becomes in
evalrun (docs/eval-files.md, "AgentV's current format"). ``config.rubric`` lists the items (a
string is one item); with none, the test's ``criteria`` is the one item. The score is the mean
of the items' scores; a reply that cannot be read makes the grader abstain, never a silent 0.

    python -m graders.llm_rubric < payload.json     # config: {rubric: ["Names Paris"]}
"""

from __future__ import annotations

from typing import Any

from grader_sdk import Abstain, GraderInput, parse_json_reply, script_grader
from grader_sdk.replies import Reading
from graders._judgekit import judge_client, send_batch, truncate_middle

SYSTEM_PROMPT = (
    "You grade one answer against one rubric item. The item passes when the answer does what "
    "the item asks; judge only that item, not the answer's other qualities. "
    'Reply with one JSON object and nothing else: {"pass": true or false, '
    '"score": <number from 0 to 1, how fully the item is met>, "reason": "<one short sentence>"}'
)


def rubric_items(inp: GraderInput) -> list[str]:
    value = inp.config.get("rubric", inp.config.get("value"))
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    items = [str(item).strip() for item in items if str(item).strip()]
    if not items and inp.criteria and inp.criteria.strip():
        items = [inp.criteria.strip()]
    return items


def earlier_turns(inp: GraderInput) -> str:
    """The conversation before the question, ``role: text`` a message, so an item about
    earlier turns ("remembers the order number") can be judged; "" for a one-message input."""
    last_user = max((i for i, m in enumerate(inp.input) if m.get("role") == "user"), default=-1)
    earlier = inp.input[:last_user]
    if not any(m.get("role") != "system" for m in earlier):
        return ""
    return "\n\n".join(f"{m.get('role', 'user')}: {_text(m.get('content'))}" for m in earlier)


def _text(content: Any) -> str:
    if isinstance(content, list):
        parts = [p.get("text", p.get("value")) if isinstance(p, dict) else p for p in content]
        return "\n".join(str(p) for p in parts if isinstance(p, str))
    return content if isinstance(content, str) else ""


def build_request(inp: GraderInput, item: str, answer: str) -> dict[str, Any]:
    parts = [f"<rubric_item>\n{item}\n</rubric_item>"]
    earlier = earlier_turns(inp)
    if earlier:
        parts.append(
            f"<earlier_turns>\n{truncate_middle(earlier, 8_000, 2_000, 6_000)}\n</earlier_turns>"
        )
    if inp.question:
        parts.append(f"<question>\n{truncate_middle(inp.question, 4_000, 3_500, 400)}\n</question>")
    if inp.reference_answer:
        parts.append(f"<reference_answer>\n{inp.reference_answer}\n</reference_answer>")
    parts.append(f"<answer>\n{truncate_middle(answer)}\n</answer>")
    request: dict[str, Any] = {
        "question": "\n\n".join(parts),
        "systemPrompt": SYSTEM_PROMPT,
        "temperature": _temperature(inp.config.get("temperature")),
        "task": {"kind": "rubric", "item": item, "answer": answer},
    }
    provider = inp.config.get("provider")
    if isinstance(provider, str) and provider:
        request["target"] = provider
    return request


def _temperature(value: Any) -> float:
    """The judge's temperature: 0 unless the grader's ``config.temperature`` says otherwise."""
    number = _number(value)
    return number if number is not None and 0 <= number <= 2 else 0.0


def _number(value: Any) -> float | None:
    """A finite number from a JSON value: 0.5 or "0.5"; booleans are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
        return float(value)
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"true": True, "yes": True, "pass": True, "false": False, "no": False}.get(
            value.strip().lower()
        )
    return None


def read_verdict(text: str) -> tuple[bool, float, str] | None:
    """(pass, score, reason) from a judge reply, or None when it cannot be read."""
    parsed = parse_json_reply(text)
    if isinstance(parsed, list):
        parsed = next((item for item in parsed if isinstance(item, dict)), None)
    if not isinstance(parsed, dict):
        return None
    passed = _as_bool(parsed.get("pass", parsed.get("passed", parsed.get("verdict"))))
    score = _number(parsed.get("score"))
    if score is not None and score > 1:
        score = None
    if passed is None and score is None:
        return None
    if score is None:
        score = 1.0 if passed else 0.0
    if passed is None:
        passed = score >= 0.5
    reason = str(parsed.get("reason", parsed.get("reasoning", "")) or "")
    return passed, min(max(score, 0.0), 1.0), reason


def verdict_reading(text: str) -> Reading:
    """A reply as a ``(pass, score, reason)`` reading, or the problem that stops it."""
    verdict = read_verdict(text)
    if verdict is None:
        return Reading(problem="no pass/score verdict in the reply", raw=text)
    return Reading(verdict, raw=text)


def evaluate(inp: GraderInput, client: Any) -> dict[str, Any]:
    items = rubric_items(inp)
    if not items:
        raise Abstain("no rubric: give the assertion a value or the test criteria")
    if inp.output is None:
        raise Abstain("there is no answer to grade")
    readings = send_batch(
        client,
        [build_request(inp, item, inp.output) for item in items],
        inp.max_calls,
        verdict_reading,
    )
    checks = []
    unreadable = []
    for item, reading in zip(items, readings, strict=True):
        if not reading.ok:
            unreadable.append(item)
            continue
        passed, score, reason = reading.value
        checks.append({"text": item, "pass": passed, "score": score, "reason": reason})
    if unreadable:
        raise Abstain(
            f"the judge's verdict on {len(unreadable)} of {len(items)} rubric items could not "
            f"be read: {'; '.join(unreadable)[:300]}"
        )
    score = sum(c["score"] for c in checks) / len(checks)
    failed = [c for c in checks if not c["pass"]]
    reason = "; ".join(f"{c['text']}: {c['reason']}" for c in failed or checks if c["reason"])
    return {
        "score": score,
        "reason": reason or f"{len(checks) - len(failed)} of {len(checks)} rubric items met",
        "checks": checks,
    }


@script_grader
def main(inp: GraderInput) -> dict[str, Any]:
    """Runs at once under ``python -m graders.llm_rubric``; importing only defines it."""
    return evaluate(inp, judge_client())
