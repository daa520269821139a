"""One judge call as the proxy records it: made by the proxy, carried by the launcher and the
runner, written to ``judge-calls.jsonl`` and read back by the bundle's reader.

It lives outside ``proxy/`` and ``evalrun/results/`` and imports nothing of the project, so the
proxy need not import a later stage and the reports need not import the proxy
(docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class JudgeCall:
    """What the judge was asked and answered, already redacted (docs/security.md)."""

    case_id: str
    grader: str
    target: str
    #: "ok", "error", or "abandoned": charged, but the grader left before the answer
    #: (docs/proxy.md, "Abandoned calls")
    status: str
    latency_ms: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    cached: bool = False
    replayed: bool = False
    system_prompt: str | None = None
    question: str | None = None
    task: Any = None
    response: str | None = None
    #: the proxy's error code when the call failed (docs/proxy.md)
    error_code: str | None = None
    #: each member's verdict when the target is a judge panel
    panel: dict[str, Any] | None = None
    #: what evalrun changed in the judge's reply (e.g. text it had to repair)
    warnings: list[str] = field(default_factory=list)
    cost_usd: float | None = None
    #: the repeat of the case the call belongs to (set by the runner; None in a grader check)
    repeat: int | None = None
    #: the target of the case's matrix column, in a matrix run only (set by the runner;
    #: docs/results.md, "A matrix run")
    column: str | None = None
    #: when the call ended, in ns since the epoch (set by the proxy): the trace's judge-call
    #: span ends there (docs/otel.md). In memory only, never written to the log.
    finished_ns: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The line of ``judge-calls.jsonl``: keys that say nothing (no error, no panel, no
        warnings, no cost, no repeat, no column) are left out."""
        out = {name: getattr(self, name) for name in _ALWAYS}
        for name in _WHEN_SET:
            value = getattr(self, name)
            if value is not None and value != []:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeCall:
        """A line read back (raises for one that is not a call); a log written before a key
        existed gets the key's default."""
        latency = data.get("latency_ms")
        return cls(
            case_id=str(data.get("case_id")),
            grader=str(data.get("grader") or ""),
            target=str(data.get("target") or ""),
            status=str(data.get("status", "unknown")),
            latency_ms=None if latency is None else float(latency),
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            cached=bool(data.get("cached")),
            replayed=bool(data.get("replayed")),
            system_prompt=data.get("system_prompt"),
            question=data.get("question"),
            task=data.get("task"),
            response=data.get("response"),
            error_code=data.get("error_code"),
            panel=data.get("panel"),
            warnings=list(data.get("warnings") or ()),
            cost_usd=data.get("cost_usd"),
            repeat=data.get("repeat"),
            column=data.get("column"),
        )


_WHEN_SET = ("error_code", "panel", "warnings", "cost_usd", "repeat", "column")
_IN_MEMORY = ("finished_ns",)
_ALWAYS = tuple(f.name for f in fields(JudgeCall) if f.name not in (*_WHEN_SET, *_IN_MEMORY))
