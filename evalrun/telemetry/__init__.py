"""OpenTelemetry traces of a run (docs/otel.md): a span for the run, each case, the target's
answer, each grader run and each judge call, sent over OTLP/HTTP.

Until a run asks for it (``--otel`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``) the runner holds
:data:`OFF`, whose hooks do nothing; this module is all it imports, and nothing of
OpenTelemetry (docs/performance.md). The spans are made by ``spans.py``, imported only then.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from evalrun.judgecall import JudgeCall
    from evalrun.results.models import CaseResult, GraderOutcome


ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: what the ``[otel]`` extra installs, as imported
MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")


def wanted(flag: bool) -> bool:
    """``--otel``, or an OTLP endpoint in the environment (docs/otel.md)."""
    return flag or bool(os.environ.get(ENDPOINT_ENV))


def available() -> bool:
    """Whether the ``[otel]`` extra is installed (found, not imported)."""
    try:
        return all(importlib.util.find_spec(name) is not None for name in MODULES)
    except (ImportError, ValueError):
        return False


class GraderRun(Protocol):
    """What the launcher hands back for one grader run."""

    result: GraderOutcome
    judge_calls: list[JudgeCall]


R = TypeVar("R", bound=GraderRun)
#: told the finished case's result
CaseDone = Callable[["CaseResult"], None]
#: told the target's usage as the result line keeps it (``input``, ``output``, ``cost_usd``),
#: its answer and the model that answered
Answered = Callable[[Mapping[str, Any], "str | None", "str | None"], None]


def _ignore(*_: Any) -> None:
    return None


class Telemetry:
    """No telemetry: what a run holds unless it asks for spans. Every hook does nothing."""

    def begin_run(self, eval_name: str, targets: Sequence[str | None], judge: str | None) -> None:
        return None

    def case(self, case_id: str, repeat: int) -> contextlib.AbstractContextManager[CaseDone]:
        return contextlib.nullcontext(_ignore)

    def target_call(
        self, target: str, messages: list[dict[str, Any]], system: str | None
    ) -> contextlib.AbstractContextManager[Answered]:
        return contextlib.nullcontext(_ignore)

    async def grader(self, run: Awaitable[R]) -> R:
        return await run

    def end_run(self, summary: Mapping[str, Any], exit_code: int) -> None:
        return None

    def shutdown(self) -> None:
        return None


OFF = Telemetry()


def capture_content() -> bool:
    """The GenAI conventions' own switch for prompt and answer text in spans (docs/otel.md)."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"
