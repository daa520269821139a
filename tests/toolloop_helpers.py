"""A loopback fake model that calls tools, in each provider's wire format.

The model's "mind" is one script, the same for every format: it reads the tool results already in
the conversation and asks for the next tool, each call's arguments built from the previous
result, so a run completes only if every result came back to it in its provider's format:

1. ``lookup_price {sku}`` -> ``{"sku", "price"}``
2. ``multiply {a: price, b: quantity}`` -> the product
3. ``write_file {path, content: product}`` -> ``"ok"``
4. the answer: ``The total is <product>, written to total.txt.``

Each handler decodes a request of its format into the results so far, and encodes the next move
as that format's reply (OpenAI/Azure chat completions, Anthropic messages, Gemini
generateContent), with usage, so the loop's totals can be checked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from targets_helpers import FakeServer, Handler, Reply, Seen

from evalrun.results.models import CaseResult
from evalrun.runner.case_grader import CaseGrader
from evalrun.runner.options import RunOptions
from evalrun.runner.plan import plan_run
from evalrun.spec.loader import load_eval
from evalrun.targets import StoreOptions

SKU, QUANTITY = "A1", 3

#: the three tools as an eval file declares them (name, description, JSON Schema), with mocks:
#: a static result matched on the arguments, a script, and a static fallback
TOOLS_YAML = """\
tools:
  - name: lookup_price
    description: The unit price of a product, by SKU.
    parameters:
      type: object
      properties: {sku: {type: string}}
      required: [sku]
    results:
      - arguments: {sku: A1}
        result: {sku: A1, price: 2.5}
    result: {error: unknown sku}
  - name: multiply
    description: Multiply two numbers.
    parameters:
      type: object
      properties: {a: {type: number}, b: {type: number}}
      required: [a, b]
    command: [python, multiply.py]
  - name: write_file
    description: Write text to a file.
    parameters:
      type: object
      properties: {path: {type: string}, content: {type: string}}
      required: [path, content]
    result: ok
"""

#: the ``multiply`` tool's script: the call as JSON on stdin, the result as JSON on stdout
MULTIPLY_PY = """\
import json, sys
call = json.load(sys.stdin)
print(json.dumps(call["arguments"]["a"] * call["arguments"]["b"]))
"""


@dataclass
class Move:
    """The model's next move: tool calls, or a final text."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    text: str = ""


def next_move(results: list[str]) -> Move:
    """The scripted model: what to do, given the tool results so far (as text, in order)."""
    if not results:
        return Move([("lookup_price", {"sku": SKU})], "Looking up the price.")
    if len(results) == 1:
        price = json.loads(results[0])["price"]
        return Move([("multiply", {"a": price, "b": QUANTITY})])
    if len(results) == 2:
        return Move([("write_file", {"path": "total.txt", "content": results[1]})])
    return Move(text=f"The total is {results[1]}, written to total.txt.")


def openai_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def openai_handler(seen: Seen, *, mind: Any = next_move) -> Reply:
    """Chat Completions (``openai``, ``azure``, litellm's openai route)."""
    body = seen.json()
    move: Move = mind(openai_results(body))
    turn = len(openai_results(body))
    message: dict[str, Any] = {"role": "assistant", "content": move.text or None, "refusal": None}
    if move.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{turn}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(move.calls)
        ]
    return Reply(
        body={
            "id": f"chatcmpl-{turn}",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if move.calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 100 + turn, "completion_tokens": 10, "total_tokens": 0},
        }
    )


def anthropic_results(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        content = message["content"]
        if message["role"] == "user" and isinstance(content, list):
            out += [b["content"] for b in content if b.get("type") == "tool_result"]
    return out


def anthropic_handler(seen: Seen) -> Reply:
    """Anthropic Messages: ``tool_use`` blocks out, ``tool_result`` blocks back."""
    body = seen.json()
    results = anthropic_results(body)
    move = next_move(results)
    content: list[dict[str, Any]] = [{"type": "text", "text": move.text}] if move.text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{len(results)}_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(move.calls)
    ]
    return Reply(
        body={
            "id": f"msg_{len(results)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-3-5-haiku-20241022",
            "content": content,
            "stop_reason": "tool_use" if move.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 200 + len(results), "output_tokens": 20},
        }
    )


def gemini_results(body: dict[str, Any]) -> list[str]:
    out = []
    for content in body["contents"]:
        for part in content["parts"]:
            if "functionResponse" in part:
                response = part["functionResponse"]["response"]
                out.append(
                    response["result"] if set(response) == {"result"} else json.dumps(response)
                )
    return out


def gemini_handler(seen: Seen) -> Reply:
    """Gemini generateContent: ``functionCall`` parts out, ``functionResponse`` parts back
    (a result that is not a JSON object comes back wrapped as ``{"result": ...}``)."""
    body = seen.json()
    results = gemini_results(body)
    move = next_move(results)
    parts: list[dict[str, Any]] = [{"text": move.text}] if move.text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in move.calls]
    return Reply(
        body={
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {"promptTokenCount": 300 + len(results), "candidatesTokenCount": 30},
            "modelVersion": "gemini-2.5-flash",
        }
    )


def chat_reply(message: dict[str, Any], prompt_tokens: int = 1) -> Reply:
    """One Chat Completions answer holding ``message`` (its text or its tool calls)."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 1}
    return Reply(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {**usage, "total_tokens": prompt_tokens + 1},
        }
    )


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A model message asking for one tool call."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def grade_one(
    folder: Path, eval_text: str, handler: Handler, targets: Callable[[str], str] | None = None
) -> tuple[CaseResult, list[Seen]]:
    """The one case of ``eval_text`` graded in this process (no sandbox) against ``handler``
    on a loopback server: its result and the requests the model got. ``targets`` writes
    targets.yaml from the server's URL; by default one ``openai`` target ``gpt``."""
    path = folder / "t.eval.yaml"
    path.write_text(eval_text)
    options = RunOptions(out=folder / "out", stores=StoreOptions(), quiet=True, sandbox="none")

    async def grade(url: str) -> CaseResult:
        (folder / "targets.yaml").write_text((targets or _gpt)(url))
        plan = plan_run(load_eval(path), options)
        grader = CaseGrader(plan)
        try:
            (case,) = plan.cases
            return (await grader.grade(case, 0))[0]
        finally:
            await grader.aclose()
            await plan.close()

    with FakeServer(handler) as server:
        return asyncio.run(grade(server.url)), server.seen


def _gpt(url: str) -> str:
    return (
        f"targets:\n  - {{name: gpt, kind: openai, model: m, base_url: '{url}', max_retries: 0}}\n"
    )
