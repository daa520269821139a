"""The spans of a run (docs/otel.md), imported only when a run sends them.

Judge-call spans are built from the redacted ``JudgeCall`` records when their grader ends, with
the calls' own start and end, so the proxy's hot path does no tracing work.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from evalrun.errors import ExitCode
from evalrun.telemetry import Answered, CaseDone, R, Telemetry, capture_content

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from evalrun.judgecall import JudgeCall
    from evalrun.results.models import CaseResult, GraderOutcome

#: evalrun's target kinds as GenAI semconv ``gen_ai.provider.name`` values; others as they are
_PROVIDERS = {"azure": "azure.ai.openai", "gemini": "gcp.gemini"}


@dataclass(frozen=True)
class Model:
    """What a span says about a target: its name, provider kind and model."""

    target: str
    kind: str
    model: str | None


def start(describe: Callable[[str], Model], redact: Callable[[str], str] | None) -> Tracing:
    """Spans sent through the OTLP/HTTP exporter, configured by the standard ``OTEL_*``
    variables. ``describe`` names a target's provider and model; ``redact`` (given only when
    content is captured) hides the configured keys in prompt and answer text."""
    return Tracing.exporting(describe, redact if capture_content() else None)


class Tracing(Telemetry):
    """The spans of one run: the run span is the explicit parent of every case span; a case
    span is the current span while the case is graded, so the target and grader spans (made in
    the same task or tasks it starts) find it."""

    def __init__(
        self,
        provider: TracerProvider,
        describe: Callable[[str], Model],
        redact: Callable[[str], str] | None,
    ) -> None:
        self._provider = provider
        self._tracer: Tracer = provider.get_tracer("evalrun")
        self._describe = functools.cache(describe)  # a few targets, asked for every call
        self._redact = redact
        self._run: Span | None = None
        self._run_context: Context | None = None
        self._closed = False

    @classmethod
    def exporting(
        cls, describe: Callable[[str], Model], redact: Callable[[str], str] | None
    ) -> Tracing:
        """Through a batching OTLP/HTTP exporter that the ``OTEL_*`` variables configure."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        attributes = {}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = "evalrun"
        provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        return cls(provider, describe, redact)

    def begin_run(self, eval_name: str, targets: Sequence[str | None], judge: str | None) -> None:
        attributes: dict[str, str | list[str]] = {"evalrun.eval": eval_name}
        names = [target for target in targets if target]
        if names:  # a matrix run names every target (docs/otel.md)
            attributes["evalrun.target"] = ", ".join(names)
        if len(names) > 1:
            attributes["evalrun.targets"] = names
        if judge:
            attributes["evalrun.judge"] = judge
        self._run = self._tracer.start_span(f"evalrun {eval_name}", attributes=attributes)
        self._run_context = trace.set_span_in_context(self._run)

    @contextlib.contextmanager
    def case(self, case_id: str, repeat: int) -> Iterator[CaseDone]:
        span = self._tracer.start_span(
            f"case {case_id}",
            context=self._run_context,
            attributes={"evalrun.case.id": case_id, "evalrun.case.repeat": repeat},
        )

        def done(result: CaseResult) -> None:
            span.set_attribute("evalrun.case.status", result.status)
            if result.score is not None:
                span.set_attribute("evalrun.case.score", result.score)
            judge = result.usage.judge
            if judge is not None and judge.cost_usd:
                span.set_attribute("evalrun.cost_usd", judge.cost_usd)
            if result.status == "error":
                self._error(span, _case_error(result))

        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            yield done

    @contextlib.contextmanager
    def target_call(
        self, target: str, messages: list[dict[str, Any]], system: str | None
    ) -> Iterator[Answered]:
        model = self._describe(target)
        span = self._tracer.start_span(
            f"chat {model.model or target}",
            kind=trace.SpanKind.CLIENT,
            attributes={**_genai(model), "evalrun.role": "target"},
        )
        if self._redact is not None:
            asked = [{"role": "system", "content": system}] if system else []
            span.set_attribute("gen_ai.input.messages", self._text([*asked, *messages]))

        def answered(
            usage: Mapping[str, Any], text: str | None, response_model: str | None
        ) -> None:
            span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("input") or 0))
            span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("output") or 0))
            if usage.get("cost_usd") is not None:
                span.set_attribute("evalrun.cost_usd", usage["cost_usd"])
            if response_model:
                span.set_attribute("gen_ai.response.model", response_model)
            if self._redact is not None and text is not None:
                span.set_attribute("gen_ai.output.messages", self._text(_assistant(text)))

        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                yield answered
            except Exception as exc:  # the type only: a message may quote the request
                self._error(span, type(exc).__name__)
                raise

    async def grader(self, run: Awaitable[R]) -> R:
        span = self._tracer.start_span("grader")
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            done = await run
            result = done.result
            span.update_name(f"grader {result.name}")
            span.set_attributes(_grader_attributes(result))
            if result.status == "error":
                self._error(span, "grader_error")
            parent = trace.set_span_in_context(span)
            for call in done.judge_calls:
                self._judge_call(call, parent)
        return done

    def _judge_call(self, call: JudgeCall, parent: Context) -> None:
        """A span from the record, with the call's real start and end (docs/otel.md)."""
        end = call.finished_ns or time.time_ns()
        start = end - int((call.latency_ms or 0.0) * 1_000_000)
        model = self._describe(call.target)
        attributes: dict[str, Any] = {
            **_genai(model),
            "evalrun.role": "judge",
            "evalrun.case.id": call.case_id,
            "evalrun.grader.name": call.grader,
            "evalrun.judge_call.status": call.status,
            "evalrun.cached": call.cached or call.replayed,
            "gen_ai.usage.input_tokens": call.input_tokens,
            "gen_ai.usage.output_tokens": call.output_tokens,
        }
        if call.cost_usd is not None:
            attributes["evalrun.cost_usd"] = call.cost_usd
        if self._redact is not None:  # the record is redacted already; the keys once more
            asked = [{"role": "user", "content": call.question or ""}]
            if call.system_prompt:
                asked.insert(0, {"role": "system", "content": call.system_prompt})
            attributes["gen_ai.input.messages"] = self._text(asked)
            if call.response is not None:
                attributes["gen_ai.output.messages"] = self._text(_assistant(call.response))
        span = self._tracer.start_span(
            f"chat {model.model or call.target}",
            context=parent,
            kind=trace.SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if call.status != "ok":
            self._error(span, call.error_code or call.status)
        span.end(end_time=end)

    def end_run(self, summary: Mapping[str, Any], exit_code: int) -> None:
        if self._run is None:
            return
        counts = summary.get("counts") or {}
        self._run.set_attribute("evalrun.exit_code", exit_code)
        for status in ("total", "passed", "failed", "error", "unscored"):
            self._run.set_attribute(f"evalrun.cases.{status}", int(counts.get(status, 0)))
        if summary.get("mean_score") is not None:
            self._run.set_attribute("evalrun.mean_score", summary["mean_score"])
        if summary.get("interrupted"):
            self._run.set_attribute("evalrun.interrupted", True)
        if exit_code not in (ExitCode.OK, ExitCode.GATE_FAILED):  # a failed gate is a result
            self._error(self._run, f"exit_{exit_code}")
        self._run.end()
        self._run = None

    def shutdown(self) -> None:
        """Send what is buffered and stop the exporter; a run that ended early ends its span."""
        if self._closed:
            return
        self._closed = True
        if self._run is not None:
            self._error(self._run, "incomplete")
            self._run.end()
            self._run = None
        self._provider.shutdown()

    def _error(self, span: Span, kind: str) -> None:
        span.set_attribute("error.type", kind)
        span.set_status(trace.Status(trace.StatusCode.ERROR))

    def _text(self, messages: list[dict[str, Any]]) -> str:
        assert self._redact is not None
        return self._redact(json.dumps(messages, ensure_ascii=False))


def _genai(model: Model) -> dict[str, Any]:
    """The GenAI semantic-convention attributes of a chat call to ``model``."""
    provider = _PROVIDERS.get(model.kind, model.kind)
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model.model or model.target,
        "evalrun.target": model.target,
    }


def _assistant(text: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": text}]


def _grader_attributes(result: GraderOutcome) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "evalrun.grader.name": result.name,
        "evalrun.grader.status": result.status,
    }
    if result.score is not None:
        attributes["evalrun.grader.score"] = result.score
    if result.proxy is not None:
        attributes["evalrun.grader.judge_calls"] = result.proxy.calls
        attributes["evalrun.cost_usd"] = result.proxy.cost_usd or 0.0
    return attributes


def _case_error(result: CaseResult) -> str:
    """A short class of the error, never its text (docs/otel.md)."""
    if result.error and result.error.startswith("interrupted"):
        return "interrupted"
    if result.error and result.error.startswith("target "):
        return "target_error"
    if any(g.status == "error" for g in result.graders):
        return "grader_error"
    return "internal_error"
