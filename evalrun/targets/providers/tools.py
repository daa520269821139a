"""OpenAI's chat shapes (tools, tool calls, tool turns) read in one place, for the providers
that translate them into their own formats (docs/targets.md, "Tools").

A request carries OpenAI-shaped ``tools``/``tool_choice`` and messages; a response carries
OpenAI-shaped ``tool_calls``. These helpers are the only code that reads those shapes apart.
A shape that cannot be translated is an ``UnsupportedByTarget`` (the proxy's 422), not an
upstream failure.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalrun.targets.base import CompletionRequest, UnsupportedByTarget
from evalrun.targets.providers.http import text_of

Block = dict[str, Any]


@dataclass
class FunctionTool:
    name: str
    description: str | None
    parameters: dict[str, Any]


def function_tools(request: CompletionRequest) -> list[FunctionTool]:
    """The request's function tools; any other tool type is refused (no provider-neutral
    meaning)."""
    tools = []
    for tool in request.tools or []:
        kind = tool.get("type", "function") if isinstance(tool, dict) else None
        function = tool.get("function") if isinstance(tool, dict) else None
        if kind != "function" or not isinstance(function, dict):
            raise UnsupportedByTarget(
                f"only function tools can be translated, not {str(kind)[:40]!r}"
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise UnsupportedByTarget("a function tool needs a 'name'")
        parameters = function.get("parameters")
        tools.append(
            FunctionTool(
                name=name,
                description=function.get("description"),
                parameters=parameters
                if isinstance(parameters, dict)
                else {"type": "object", "properties": {}},
            )
        )
    return tools


def tool_choice_of(request: CompletionRequest) -> tuple[str | None, str | None]:
    """(mode, forced function name): mode is ``auto``, ``none``, ``required`` or None (unset);
    a named function (``{"type": "function", "function": {"name"}}``) is mode ``required``."""
    choice = request.tool_choice
    if choice is None:
        return None, None
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise UnsupportedByTarget(f"unknown tool_choice {choice[:40]!r}")
        return choice, None
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise UnsupportedByTarget(
            "tool_choice must be a mode or {type: function, function: {name}}"
        )
    return "required", name


def call_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's ``function.arguments`` (a JSON text) as an object."""
    raw = (call.get("function") or {}).get("arguments") or "{}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise UnsupportedByTarget("a tool call's arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise UnsupportedByTarget("a tool call's arguments must be a JSON object")
    return value


def call_name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")


def tool_call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    """An OpenAI-shaped tool call; providers without call ids get a fresh one."""
    return {
        "id": call_id or f"call_{secrets.token_hex(12)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def split_blocks(
    request: CompletionRequest, blocks_of: Callable[[dict[str, Any]], tuple[str, list[Block]]]
) -> tuple[str | None, list[tuple[str, list[Block]]]]:
    """The system text (system prompt plus system/developer messages) and the conversation as
    ``(role, blocks)``: ``blocks_of`` turns one message into a provider role and its blocks,
    and consecutive turns of the same role are merged, for providers that want alternation."""
    system = [request.system_prompt] if request.system_prompt else []
    turns: list[tuple[str, list[Block]]] = []
    for message in request.messages:
        if message.get("role") in ("system", "developer"):
            system.append(text_of(message.get("content")))
            continue
        role, blocks = blocks_of(message)
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        elif blocks:
            turns.append((role, list(blocks)))
    return ("\n\n".join(system) if system else None), turns
