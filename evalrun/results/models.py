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
class TargetUsage:
    """What the target's answer cost (``usage.target`` of a result line, docs/results.md)."""

    input: int = 0
    output: int = 0
    total: int = 0
    #: answered from the response cache, or from a cassette (``--replay``)
    cached: bool = False
    replayed: bool = False
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _TARGET_USAGE_KEYS}

    @classmethod
    def from_dict(cls, data: Any) -> TargetUsage | None:
        if not isinstance(data, dict):
            return None
        return cls(
            input=_int(data.get("input")),
            output=_int(data.get("output")),
            total=_int(data.get("total")),
            cached=data.get("cached") is True,
            replayed=data.get("replayed") is True,
            cost_usd=_number(data.get("cost_usd")),
        )


@dataclass(slots=True)
class JudgeUsage:
    """What a case's graders spent through the judge proxy, summed over them (``usage.judge``)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _JUDGE_USAGE_KEYS}

    @classmethod
    def from_dict(cls, data: Any) -> JudgeUsage | None:
        if not isinstance(data, dict):
            return None
        return cls(
            calls=_int(data.get("calls")),
            input_tokens=_int(data.get("input_tokens")),
            output_tokens=_int(data.get("output_tokens")),
            cost_usd=_number(data.get("cost_usd")) or 0.0,
        )


@dataclass(slots=True)
class CaseUsage:
    """A result line's ``usage``: each key only when it applies (no ``target`` for a case that
    carries its output, no ``judge`` when the graders never ran)."""

    target: TargetUsage | None = None
    judge: JudgeUsage | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.target is not None:
            out["target"] = self.target.to_dict()
        if self.judge is not None:
            out["judge"] = self.judge.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> CaseUsage:
        if not isinstance(data, dict):
            return cls()
        return cls(
            TargetUsage.from_dict(data.get("target")), JudgeUsage.from_dict(data.get("judge"))
        )

    @staticmethod
    def judge_of(graders: list[GraderOutcome]) -> JudgeUsage:
        """The graders' proxy usage, summed."""
        usage = JudgeUsage()
        for grader in graders:
            if grader.proxy:
                usage.calls += grader.proxy.calls
                usage.input_tokens += grader.proxy.input_tokens
                usage.output_tokens += grader.proxy.output_tokens
                usage.cost_usd += grader.proxy.cost_usd or 0.0
        return usage


@dataclass(slots=True)
class CaseTimings:
    """A result line's ``timings`` in milliseconds, each key only when measured."""

    #: the target's answer, as the provider timed it
    target_ms: float | None = None
    #: the whole case: target and graders
    total_ms: float | None = None

    def to_dict(self) -> dict[str, float]:
        return {name: value for name in _TIMING_KEYS if (value := getattr(self, name)) is not None}

    @classmethod
    def from_dict(cls, data: Any) -> CaseTimings:
        if not isinstance(data, dict):
            return cls()
        return cls(_number(data.get("target_ms")), _number(data.get("total_ms")))


def _number(value: Any) -> float | None:
    """A JSON number as written (an int stays an int), or None for anything else."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def _int(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


@dataclass(slots=True)
class GraderOutcome:
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
    timings: CaseTimings = field(default_factory=CaseTimings)
    usage: CaseUsage = field(default_factory=CaseUsage)
    #: The line the case starts on in the file its tests come from (``tests_file`` in the
    #: summary), so CI annotations can point at it.
    line: int | None = None
    #: what evalrun changed or noticed in the target's answer (e.g. text it had to repair)
    warnings: list[str] = field(default_factory=list)
    #: what the agent did, from a ``cli`` target with ``transcript:`` (docs/agents.md); the
    #: line has no ``transcript`` key when there is none
    transcript: dict[str, Any] | None = None
    #: AgentV's ``conversation_id``: the conversation this case is part of, a label several
    #: cases may share (docs/agents.md); the line has no key when there is none
    conversation_id: str | None = None
    #: the prompt variant this result is of, in a run with prompt variants only: with the
    #: target it names the matrix column (docs/results.md, "A matrix run")
    prompt: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view sharing the result's lists and dicts: written out at once, it needs
        no deep copy (``dataclasses.asdict`` cost the runner ~4 ms a case)."""
        out = {name: getattr(self, name) for name in _CASE_KEYS}
        out["graders"] = [g.to_dict() for g in self.graders]
        out["timings"] = self.timings.to_dict()
        out["usage"] = self.usage.to_dict()
        if self.transcript is None:
            del out["transcript"]
        if self.conversation_id is None:
            del out["conversation_id"]
        if self.prompt is None:
            del out["prompt"]
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
            prompt=self.prompt,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        graders = [GraderOutcome.from_dict(g) for g in data.get("graders") or ()]
        return cls(
            graders=graders,
            timings=CaseTimings.from_dict(data.get("timings")),
            usage=CaseUsage.from_dict(data.get("usage")),
            **{k: v for k, v in data.items() if k in _CASE_FIELDS},
        )


#: Keys of a result line read into the dataclasses (unknown keys are ignored; nested ones are
#: converted by ``from_dict``).
_GRADER_FIELDS = frozenset(GraderOutcome.__dataclass_fields__) - {"proxy"}
_CASE_FIELDS = frozenset(CaseResult.__dataclass_fields__) - {"graders", "timings", "usage"}
#: Every field, in order, for writing a result line.
_PROXY_KEYS = tuple(f.name for f in fields(ProxyUsage))
_TARGET_USAGE_KEYS = tuple(f.name for f in fields(TargetUsage))
_JUDGE_USAGE_KEYS = tuple(f.name for f in fields(JudgeUsage))
_TIMING_KEYS = tuple(f.name for f in fields(CaseTimings))
_GRADER_KEYS = tuple(f.name for f in fields(GraderOutcome))
_CASE_KEYS = tuple(f.name for f in fields(CaseResult))
