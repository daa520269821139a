"""Normalising the grader payload's messages and pulling retrieval results out of tool calls.

Payloads come from evalrun (snake_case) and from AgentV-era tooling (camelCase, OpenAI-style
tool calls), so everything here accepts both and returns one shape:
messages ``{"role", "content", "tool_calls": [{"tool", "input", "output"}]}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

_TEXT_KEYS = ("text", "content", "page_content", "pageContent", "chunk", "passage", "document")
_QUERY_KEYS = ("query", "q", "search_query", "searchQuery", "question")


def as_messages(value: Any, role: str) -> list[dict[str, Any]]:
    """A string becomes one message of ``role``; a list is normalised message by message."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": role, "content": value, "tool_calls": []}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return [{"role": role, "content": str(value), "tool_calls": []}]
    return [normalize_message(m, role) for m in value]


def normalize_message(message: Any, role: str = "assistant") -> dict[str, Any]:
    if isinstance(message, str):
        return {"role": role, "content": message, "tool_calls": []}
    if not isinstance(message, dict):
        return {"role": role, "content": str(message), "tool_calls": []}
    out = dict(message)
    calls = out.pop("toolCalls", None)
    if out.get("tool_calls") is None:
        out["tool_calls"] = calls
    raw_calls = out.get("tool_calls") or []
    out["tool_calls"] = [normalize_tool_call(c) for c in raw_calls if isinstance(c, dict)]
    out.setdefault("role", role)
    out.setdefault("content", None)
    return out


def normalize_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """Map OpenAI/AgentV spellings (name, function.arguments, args, result) onto tool/input/output."""
    out = dict(call)
    function = out.get("function")
    if "tool" not in out:
        name = out.get("name")
        if name is None and isinstance(function, dict):
            name = function.get("name")
        out["tool"] = name or ""
    if "input" not in out:
        arguments = out.get("arguments", out.get("args"))
        if arguments is None and isinstance(function, dict):
            arguments = function.get("arguments")
        out["input"] = _maybe_json(arguments)
    if "output" not in out:
        out["output"] = out.get("result", out.get("response"))
    return out


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else p.get("text", "")
            for p in content
            if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str))
        ]
        return "\n".join(parts)
    return str(content)


def last_text(messages: list[dict[str, Any]], role: str) -> str | None:
    for message in reversed(messages):
        if message.get("role") == role:
            text = message_text(message)
            if text:
                return text
    return None


def results_of(output: Any) -> list[str]:
    """The retrieved passages of one tool output: a list, ``{results: [...]}``, or a string."""
    output = _maybe_json(output)
    if output is None:
        return []
    if isinstance(output, dict):
        results = output.get("results")
        if results is None:
            return []
        output = results
    if isinstance(output, (str, int, float)):
        output = [output]
    if not isinstance(output, list):
        return []
    return [text for text in (node_text(item) for item in output) if text is not None]


def node_text(item: Any) -> str | None:
    """One passage as text: a string, a document dict's text field, or its JSON."""
    if item is None:
        return None
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        text = _first_string(item, _TEXT_KEYS)
        return text if text is not None else json.dumps(item, ensure_ascii=False, sort_keys=True)
    if isinstance(item, list):
        return json.dumps(item, ensure_ascii=False)
    return str(item)


def query_of(tool_input: Any) -> str | None:
    tool_input = _maybe_json(tool_input)
    if isinstance(tool_input, str):
        return tool_input
    if isinstance(tool_input, dict):
        return _first_string(tool_input, _QUERY_KEYS)
    return None


def tool_call_results(
    messages: list[dict[str, Any]], tools: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Per tool call in order: ``{"tool", "query", "results"}`` (optionally only named tools)."""
    wanted = set(tools) if tools is not None else None
    groups: list[dict[str, Any]] = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            if wanted is not None and call.get("tool") not in wanted:
                continue
            groups.append(
                {
                    "tool": call.get("tool", ""),
                    "query": query_of(call.get("input")),
                    "results": results_of(call.get("output")),
                }
            )
    return groups


def configured_context(value: Any) -> list[str] | None:
    """``config.retrieval_context`` as passages (nested lists flattened), or None if unset."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        items = [x for item in value for x in (item if isinstance(item, list) else [item])]
        return [t for t in (node_text(item) for item in items) if t is not None]
    return [str(value)]


def _first_string(item: dict[str, Any], keys: Iterable[str]) -> str | None:
    return next((item[k] for k in keys if isinstance(item.get(k), str)), None)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{"):
            try:
                return json.loads(stripped)
            except ValueError:
                return value
    return value
