"""Keys and JSON forms shared by the response cache and the record/replay cassette."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import Any

from evalrun.targets.base import CompletionRequest, CompletionResponse, TokenUsage
from evalrun.targets.config import TargetConfig

#: config keys that decide which model answers (the target's name does not)
_IDENTITY_EXTRAS = ("endpoint", "deployment", "api_version", "command", "cwd", "litellm_params")
#: a mock's script is its model, so two scripted targets never share answers (docs/targets.md,
#: "Cache"); empty for every other kind, whose keys stay as they were
_SCRIPT_FIELDS = {"default", "rules", "yes_no"}


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def cache_key(config: TargetConfig, request: CompletionRequest) -> str:
    """Same model behind the same endpoint and the same request: same key, whatever the name."""
    identity = {"kind": config.kind, "model": config.model, "base_url": config.base_url}
    identity.update({k: config.extra(k) for k in _IDENTITY_EXTRAS if config.extra(k) is not None})
    script = config.model_dump(include=_SCRIPT_FIELDS)
    identity.update({k: v for k, v in script.items() if v})
    return _digest([identity, request.cache_key_material()])


def cassette_key(config: TargetConfig, request: CompletionRequest) -> str:
    """Keyed by target name, kind and model but not by URL, so a cassette recorded against one
    endpoint replays in CI where the URL (or the local server) differs."""
    return _digest([config.name, config.kind, config.model, request.cache_key_material()])


def response_to_json(response: CompletionResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "usage": asdict(response.usage),
        "finish_reason": response.finish_reason,
        "refusal": response.refusal,
        "tool_calls": response.tool_calls,
        "logprobs": response.logprobs,
        "model": response.model,
        "latency_ms": response.latency_ms,
        "cost_usd": response.cost_usd,
    }


def response_from_json(data: dict[str, Any]) -> CompletionResponse:
    usage = data.get("usage") or {}
    return CompletionResponse(
        text=str(data.get("text") or ""),
        usage=TokenUsage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
        finish_reason=data.get("finish_reason"),
        refusal=data.get("refusal"),
        tool_calls=data.get("tool_calls"),
        logprobs=data.get("logprobs"),
        model=data.get("model"),
        latency_ms=float(data.get("latency_ms") or 0.0),
        cost_usd=data.get("cost_usd"),
    )
