"""Case and grader results: plain dataclasses inside, plain JSON in ``results.jsonl``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

Status = Literal["passed", "failed", "error", "unscored"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "error", "unscored")


@dataclass(slots=True)
class ProxyUsage:
    calls: int = 0
    max_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_calls: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _PROXY_KEYS}


@dataclass(slots=True)
class GraderOutcome:
    """What one grader gave one case, as the bundle records it: status, score, reason, and how
    the run went (exit code, stderr tail, judge-call usage). The grader itself returns the SDK's
    ``GraderResult``; the launcher turns its stdout into this (docs/grader-protocol.md)."""

    name: str
    status: Status
    score: float | None = None
    passed: bool | None = None
    reason: str = ""
    hits: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    details: Any = None
    weight: float = 1.0
    threshold: float = 0.5
    duration_ms: float = 0.0
    exit_code: int | None = None
    stderr_tail: str = ""
    proxy: ProxyUsage | None = None
    #: what evalrun changed or noticed in the grader's output (e.g. text it had to repair)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _GRADER_KEYS}
        if self.proxy is not None:
            out["proxy"] = self.proxy.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraderOutcome:
        result = cls(**{k: v for k, v in data.items() if k in _GRADER_FIELDS})
        proxy = data.get("proxy")
        result.proxy = ProxyUsage(**proxy) if proxy else None
        return result


@dataclass(slots=True)
class CaseResult:
    id: str
    status: Status
    score: float | None = None
    graders: list[GraderOutcome] = field(default_factory=list)
    output: str | None = None
    target: str | None = None
    error: str | None = None
    repeat: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    #: The line the case starts on in the file its tests come from (``tests_file`` in the
    #: summary), so CI annotations can point at it.
    line: int | None = None
    #: what evalrun changed or noticed in the target's answer (e.g. text it had to repair)
    warnings: list[str] = field(default_factory=list)
    #: what the agent did, from a ``cli`` target with ``transcript:`` (docs/agents.md); the
    #: line has no ``transcript`` key when there is none
    transcript: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view sharing the result's lists and dicts: written out at once, it needs
        no deep copy (``dataclasses.asdict`` cost the runner ~4 ms a case)."""
        out = {name: getattr(self, name) for name in _CASE_KEYS}
        out["graders"] = [g.to_dict() for g in self.graders]
        if self.transcript is None:
            del out["transcript"]
        return out

    def slim(self) -> CaseResult:
        """What a run keeps in memory once the full result is on disk: enough for the summary
        and the table, so memory stays flat however many cases a run has."""
        graders = [
            GraderOutcome(
                name=g.name,
                status=g.status,
                score=g.score,
                passed=g.passed,
                weight=g.weight,
                threshold=g.threshold,
                duration_ms=g.duration_ms,
                proxy=g.proxy,
            )
            for g in self.graders
        ]
        return CaseResult(
            id=self.id,
            status=self.status,
            score=self.score,
            graders=graders,
            target=self.target,
            error=self.error,
            repeat=self.repeat,
            usage=self.usage,
            line=self.line,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        graders = [GraderOutcome.from_dict(g) for g in data.get("graders") or ()]
        return cls(graders=graders, **{k: v for k, v in data.items() if k in _CASE_FIELDS})


#: Keys of a result line read into the dataclasses (unknown keys are ignored; nested ones are
#: converted by ``from_dict``).
_GRADER_FIELDS = frozenset(GraderOutcome.__dataclass_fields__) - {"proxy"}
_CASE_FIELDS = frozenset(CaseResult.__dataclass_fields__) - {"graders"}
#: Every field, in order, for writing a result line.
_PROXY_KEYS = tuple(f.name for f in fields(ProxyUsage))
_GRADER_KEYS = tuple(f.name for f in fields(GraderOutcome))
_CASE_KEYS = tuple(f.name for f in fields(CaseResult))
