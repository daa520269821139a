"""A fixture grader that behaves like one written on AgentV's SDK, without TypeScript.

It converts the stdin keys to camelCase and checks them as AgentV's SDK does before any grading
(required ``criteria``, ``expectedOutput``, ``inputFiles``, ``input``; message roles; content a
string, list or object and never null; tool calls with a string ``tool``). On a bad input it does
what AgentV's graders do: print a JSON score of 0 saying "Evaluation failed: ..." and exit 1.
On a good input it scores the share of the reference's words (the criteria, else the expected
output) found in the output.

    python agentv_style_grader.py [--style 4x|current] [--require KEY]

``--require KEY`` makes one more (camelCase) key required, as a stricter SDK version would.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

ROLES = ("assistant", "user", "system", "tool")


class InputError(Exception):
    pass


def camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), k): camel(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise InputError(f"{where}: expected object")
    if message.get("role") not in ROLES:
        raise InputError(f"{where}.role: expected one of {', '.join(ROLES)}")
    if "content" in message:
        content = message["content"]
        if isinstance(content, list):
            for i, part in enumerate(content):
                if not isinstance(part, dict):
                    raise InputError(f"{where}.content[{i}]: expected object")
        elif not isinstance(content, (str, dict)):
            raise InputError(
                f"{where}.content: expected string, array or object, got {json.dumps(content)}"
            )
    for key in ("name", "startTime", "endTime"):
        if key in message and not isinstance(message[key], str):
            raise InputError(f"{where}.{key}: expected string")
    if "metadata" in message and not isinstance(message["metadata"], dict):
        raise InputError(f"{where}.metadata: expected object")
    if "toolCalls" in message:
        calls = message["toolCalls"]
        if not isinstance(calls, list):
            raise InputError(f"{where}.toolCalls: expected array")
        for i, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
                raise InputError(f"{where}.toolCalls[{i}].tool: expected string")
            if "id" in call and not isinstance(call["id"], str):
                raise InputError(f"{where}.toolCalls[{i}].id: expected string")


def check_input(data: Any, required: list[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InputError("expected a JSON object")
    for key in required:
        if data.get(key) is None:
            raise InputError(f"{key}: Required")
    if not isinstance(data.get("criteria"), str):
        raise InputError("criteria: Required string")
    for key in ("expectedOutput", "input", "messages"):
        if key == "messages" and key not in data:
            continue
        if not isinstance(data.get(key), list):
            raise InputError(f"{key}: Required array")
        for i, message in enumerate(data[key]):
            check_message(message, f"{key}[{i}]")
    files = data.get("inputFiles")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise InputError("inputFiles: Required array of strings")
    if data.get("output") is not None and not isinstance(data["output"], str):
        raise InputError("output: expected string or null")
    for key in ("metadata", "config"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise InputError(f"{key}: expected object or null")
    return data


def reference(data: dict[str, Any]) -> str:
    """The criteria, else the last expected message's text content."""
    if data["criteria"].strip():
        return data["criteria"]
    for message in reversed(data["expectedOutput"]):
        if isinstance(message.get("content"), str):
            return message["content"]
    return ""


def grade(data: dict[str, Any]) -> tuple[float, str, str]:
    output = (data.get("output") or "").lower()
    words = re.findall(r"[a-z0-9]+", reference(data).lower())
    if not words:
        return (1.0 if output else 0.0), "no reference to compare; scored on having an output", ""
    found = [w for w in words if w in output]
    score = len(found) / len(words)
    return score, f"{len(found)} of {len(words)} reference words in the output", " ".join(found)


def main() -> int:
    args = sys.argv[1:]
    style = args[args.index("--style") + 1] if "--style" in args else "4x"
    required = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--require"]
    try:
        data = check_input(camel(json.loads(sys.stdin.read())), required)
        score, text, evidence = grade(data)
    except (InputError, ValueError) as exc:
        message = str(exc)
        if style == "4x":
            failure = {
                "score": 0,
                "assertions": [{"text": f"Evaluation failed: {message}", "passed": False}],
            }
        else:
            failure = {
                "pass": False,
                "score": 0,
                "reason": f"Evaluation failed: {message}",
                "checks": [{"text": "Script grader execution", "pass": False, "reason": message}],
            }
        print(json.dumps(failure, indent=2))
        return 1
    passed = score >= 0.5
    if style == "4x":
        result = {
            "score": score,
            "assertions": [{"text": text, "passed": passed, "evidence": evidence}],
        }
    else:
        result = {
            "pass": passed,
            "score": score,
            "reason": text,
            "checks": [
                {"text": "criteria words", "pass": passed, "reason": text, "evidence": evidence}
            ],
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
