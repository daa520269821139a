"""The async orchestrator: for each case, the target answers (unless the case carries an
output), every grader runs, and the result is appended to the bundle at once.

Ctrl-C (or SIGTERM) stops launching, kills grader process groups (their tasks are cancelled),
revokes grants, stops the proxy, writes the summary marked incomplete and exits 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalrun import telemetry
from evalrun.errors import ExitCode
from evalrun.judgecall import JudgeCall
from evalrun.launcher.launch import LaunchContext, launch_grader
from evalrun.launcher.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    private_root,
    resolve_policy,
)
from evalrun.launcher.serve import GraderPools
from evalrun.results.bundle import BundleWriteError, BundleWriter, WrittenLine, claim_folder
from evalrun.results.models import CaseResult, GraderOutcome
from evalrun.results.reader import read_case_results, result_lines
from evalrun.results.scan import ResultScan, ResultScanner, latest_offsets
from evalrun.results.scoring import case_score, case_status
from evalrun.results.summary import RunMeta, StatsBuilder, summary_dict
from evalrun.runner.options import RunOptions
from evalrun.runner.preflight import PreflightError, check_eval, survey_cases
from evalrun.runner.progress import Progress, TableRows
from evalrun.runner.selection import finished_keys, select_cases
from evalrun.safetext import repaired_note
from evalrun.spec.loader import LoadedEval
from evalrun.spec.models import GraderSpec, TestCase, as_messages
from evalrun.targets import (
    CompletionRequest,
    ConfigError,
    TargetError,
    TargetPool,
    install_hint,
    load_targets,
    locate_targets_file,
)
from evalrun.transcripts import Transcript

if TYPE_CHECKING:
    from evalrun.telemetry.spans import Model
    from proxy import JudgeProxy

#: Told each case the run wrote: its result line and its judge-call lines, as written.
RecordListener = Callable[[WrittenLine, list[WrittenLine]], None]


class Executor(Protocol):
    """Where cases are graded: in this process, or on a Ray cluster (docs/distributed.md)."""

    async def grade(self, case: TestCase, repeat: int) -> tuple[CaseResult, list[JudgeCall]]: ...

    async def aclose(self) -> None: ...


@dataclass
class _LocalExecutor:
    run: EvalRun
    ctx: LaunchContext

    async def grade(self, case: TestCase, repeat: int) -> tuple[CaseResult, list[dict[str, Any]]]:
        return await self.run.grade_case(case, repeat, self.ctx)

    async def aclose(self) -> None:
        return None


@dataclass
class RunOutcome:
    exit_code: int
    summary: dict[str, Any]
    #: The results the terminal table shows (see :class:`TableRows`), slim.
    cases: list[CaseResult]
    #: How many results the run has in all.
    total: int = 0
    #: the bundle folder this run wrote (a suffix is added when the default name is taken)
    out: Path | None = None
    #: why writing the bundle failed, if it did (the exit code is then 3)
    write_error: str | None = None
    #: the pass over results.jsonl the summary came from, for the reports to reuse (None when
    #: the reports must make their own: see ``ResultScanner.whole``)
    scan: ResultScan | None = None


class EvalRun:
    def __init__(self, loaded: LoadedEval, options: RunOptions) -> None:
        self.loaded = loaded
        self.options = options
        spec = loaded.spec
        self.cases = select_cases(
            loaded.tests,
            filters=options.filters,
            shard=options.shard,
            only_ids=options.only_ids,
            limit=options.limit,
        )
        self.target_name = options.target or spec.target
        lookup = locate_targets_file(options.targets_file, loaded.folder)
        self.targets_path = lookup.path
        self.pool = TargetPool(load_targets(lookup.path), options.stores)
        judge = options.judge or spec.judge or self.target_name
        self.judge_name = self.pool.file.add_panel(judge) if isinstance(judge, list) else judge
        survey = survey_cases(loaded, self.cases)  # one pass: the cases may stream
        problems = check_eval(
            loaded,
            cases=self.cases,
            targets=self.pool.file,
            lookup=lookup,
            target=options.target,
            judge=options.judge,
            replay=options.stores.replay is not None,
            survey=survey,
        )
        if problems:
            raise PreflightError(problems)
        levels = {g.sandbox for _, g in survey.graders if not g.kind.in_process}
        self._private_dir: Path | None = None
        self.sandbox = self._sandbox_policy(lookup.path, levels)
        if options.executor == "ray" and importlib.util.find_spec("ray") is None:
            raise ConfigError(f"--executor ray needs Ray: {install_hint('ray')}")
        if options.otel and not telemetry.available():
            raise ConfigError(f"--otel needs OpenTelemetry's SDK: {install_hint('otel')}")
        #: the run's spans (docs/otel.md): started by :meth:`run`, so never on a Ray worker
        self.telemetry = telemetry.OFF
        self._proxy: JudgeProxy | None = None
        self._proxy_lock = asyncio.Lock()
        self._pools = GraderPools(options.workers)
        #: per target: calls, concurrency reached, 429s (docs/targets.md, "Concurrency")
        self.target_stats: dict[str, dict[str, Any]] = {}
        self._interrupted = False
        self._finishing = False
        self._write_error: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def graders_for(self, case: TestCase) -> list[GraderSpec]:
        return [*self.loaded.spec.graders, *case.graders]

    @property
    def used_targets(self) -> list[str]:
        """The targets this run calls (the preflight has checked each one)."""
        names: list[str] = []
        if self.target_name and any(case.output is None for case in self.cases):
            names.append(self.target_name)
        graders = [g for case in self.cases for g in self.graders_for(case)]
        if self.judge_name and any(g.needs_judge for g in graders):
            names.append(self.judge_name)
        names += [n for g in graders if g.access is not None for n in g.access.allow or []]
        return list(dict.fromkeys(names))

    def _sandbox_policy(self, targets_path: Path | None, levels: set[Any]) -> SandboxPolicy:
        """Resolved before anything runs, so a level that cannot be had is a config error."""
        stores = self.options.stores
        own_files = [self.options.out, stores.cache_dir, stores.record, stores.replay, targets_path]
        if not levels:  # nothing runs as a process
            return SandboxPolicy()
        try:
            policy = resolve_policy(
                self.options.sandbox, levels, [p for p in own_files if p is not None]
            )
        except SandboxUnavailable as exc:
            raise ConfigError(str(exc)) from None
        if not policy.isolates_network:
            return policy
        # strict graders: the proxy's Unix socket and their scratch folders live here, in the
        # folder every sandbox masks (docs/security.md, "Grader sandbox")
        self._private_dir = Path(tempfile.mkdtemp(prefix="run-", dir=private_root()))
        (self._private_dir / "tmp").mkdir()
        return dataclasses.replace(policy, scratch=self._private_dir / "tmp")

    async def _get_proxy(self) -> JudgeProxy:
        """The run's judge proxy, started on first use (a run without judged graders never
        imports it)."""
        async with self._proxy_lock:
            if self._proxy is None:
                from evalrun.runner.judging import judge_proxy

                unix_socket = None
                if self._private_dir is not None:  # strict graders reach it through this
                    unix_socket = self._private_dir / "proxy.sock"
                proxy = judge_proxy(self.pool, unix_socket=unix_socket)
                if self.judge_name is not None:
                    threading.Thread(
                        target=self._prebuild, args=(self.judge_name,), daemon=True
                    ).start()
                await proxy.start()
                self._proxy = proxy
            return self._proxy

    def _prebuild(self, name: str) -> None:
        """Build a target off the loop: its provider's imports (httpx and its kin, ~0.1-0.2 s)
        then overlap the graders' start instead of holding up the first judge call. A target
        that fails to build says so again when the proxy asks for it."""
        with contextlib.suppress(Exception):
            self.pool.get(name)

    def open_bundle(self) -> BundleWriter:
        """Claim this run's bundle folder and open its files (BundleError: exit 2, nothing ran).
        With ``--resume`` the finished cases already there are kept."""
        options = self.options
        if options.resume:  # appended to: the lines already there stay as they are
            writer = BundleWriter(options.out, mode="resume")
            self._kept = finished_keys(read_case_results(options.out))
            self._created_folder = False
            return writer
        out, self._created_folder = claim_folder(options.out, unique=options.unique_out)
        if out != options.out:  # a suffix was added: the sandbox masks the folder really used
            self.sandbox = self.sandbox.masking([out])
            options.out = out
        self._kept = set()
        return BundleWriter(out, mode="new")

    async def run(
        self, writer: BundleWriter | None = None, on_record: RecordListener | None = None
    ) -> RunOutcome:
        """Grade every case into ``writer``'s bundle; ``on_record`` hears of each case written
        (the run command drafts the reports with it, docs/reports.md)."""
        if telemetry.wanted(self.options.otel) and telemetry.available():
            from evalrun.telemetry.spans import start

            self.telemetry = start(self._describe, self._content_redactor())
        try:
            return await self._run(writer, on_record)
        finally:  # spans are sent also when the run stops early (docs/otel.md)
            self.telemetry.shutdown()

    def _describe(self, name: str) -> Model:
        from evalrun.telemetry.spans import Model

        try:
            config = self.pool.file.get(name)
        except ConfigError:
            return Model(name, name, None)
        return Model(name, config.kind, config.model)

    def _content_redactor(self) -> Callable[[str], str] | None:
        """The proxy's redaction of every configured key, for prompt and answer text in spans
        (only when captured: docs/otel.md)."""
        if not telemetry.capture_content():
            return None
        from evalrun.runner.judging import key_values
        from proxy.grants import Redactor

        redactor = Redactor(key_values(self.pool))
        return lambda text: redactor.text(text) or ""

    async def _run(
        self, writer: BundleWriter | None, on_record: RecordListener | None
    ) -> RunOutcome:
        options = self.options
        writer = writer or self.open_bundle()
        done = self._kept
        # Jobs are pulled from the cases as workers get to them: the cases may stream from a
        # file, and nothing per case is held beyond those in flight (docs/performance.md).
        jobs = (
            (case, r)
            for case in self.cases
            for r in range(options.repeat)
            if (case.id, r) not in done
        )
        job_count = len(self.cases) * options.repeat
        if done:
            job_count = sum(
                (case.id, r) not in done for case in self.cases for r in range(options.repeat)
            )
        try:
            executor = await self._start_executor()
        except BaseException:  # a failed start writes nothing
            writer.discard(remove_folder=self._created_folder)
            raise
        started_at = datetime.now(timezone.utc)
        t0 = time.monotonic()
        self.telemetry.begin_run(self.loaded.name, self.target_name, self.judge_name)
        progress = Progress(job_count, quiet=options.quiet, repeat=options.repeat)

        def record(result: CaseResult, calls: list[JudgeCall]) -> None:
            if self._write_error is not None:
                return
            try:
                line = writer.add_case(result)
                for call in calls:
                    call.repeat = result.repeat
                call_lines = writer.add_judge_calls(calls)
            except BundleWriteError as exc:  # loud: stop the run, exit 3 (docs/results.md)
                self._write_error = f"case '{result.id}': {exc}"
                self.interrupt()
                return
            if on_record is not None:
                on_record(line, call_lines)
            progress.case_done(result)

        async def one(case: TestCase, repeat: int) -> None:
            with self.telemetry.case(case.id, repeat) as case_done:
                try:
                    if self._interrupted:
                        raise asyncio.CancelledError
                    result, calls = await executor.grade(case, repeat)
                except asyncio.CancelledError:
                    if not self._interrupted:
                        raise
                    result, calls = _interrupted_result(case, repeat, self.target_name), []
                case_done(result)
            record(result, calls)

        # A fixed pool of workers pulls from one iterator, so a run holds `workers` coroutines
        # however many cases it has (one task per case up front costs memory per case).
        pending = iter(jobs)

        async def worker() -> None:
            for case, repeat in pending:
                await one(case, repeat)

        with self._signals_handled(asyncio.get_running_loop()):
            try:
                for _ in range(min(max(1, options.workers), job_count)):
                    self._tasks.add(asyncio.create_task(worker()))
                outcomes = await asyncio.gather(*self._tasks, return_exceptions=True)
                for failure in outcomes:
                    if isinstance(failure, BaseException) and self._write_error is None:
                        self._write_error = f"internal error: {type(failure).__name__}: {failure}"
                for case, repeat in pending:  # never started: Ctrl-C came first
                    record(_interrupted_result(case, repeat, self.target_name), [])
            finally:
                # Every case has its one result now: a late Ctrl-C or SIGTERM must neither stop the
                # bundle being finished nor mark a whole run incomplete (docs/results.md).
                self._finishing = True
                progress.close()
                await executor.aclose()
                await self.close()
            return self._finish_bundle(writer, started_at, time.monotonic() - t0)

    def _finish_bundle(
        self, writer: BundleWriter, started_at: datetime, duration: float
    ) -> RunOutcome:
        """One truth: the summary, the table and the exit code come from results.jsonl itself."""
        try:
            writer.close()
        except BundleWriteError as exc:
            self._write_error = self._write_error or str(exc)
        scanner, shown = self._read_back(writer.directory)
        if scanner.superseded:  # a resume graded a case again: its last line wins
            scanner, shown = self._read_back(writer.directory, latest_offsets(writer.directory))
        summary = self._summary(scanner.stats, started_at, duration)
        summary["targets"] = self.target_stats
        exit_code = self._exit_code(summary)
        summary["exit_code"] = exit_code
        if self._write_error is not None:
            summary["write_error"] = self._write_error
        try:
            writer.write_summary(summary)
        except BundleWriteError as exc:
            self._write_error = self._write_error or str(exc)
            exit_code = ExitCode.INCOMPLETE
        # sent while a Ctrl-C is still held off (docs/results.md), so the trace is whole
        self.telemetry.end_run(summary, exit_code)
        self.telemetry.shutdown()
        scan = scanner.result() if scanner.whole else None
        return RunOutcome(
            exit_code, summary, shown.rows(), shown.total, writer.directory, self._write_error, scan
        )

    def _read_back(
        self, directory: Path, keep: set[int] | None = None
    ) -> tuple[ResultScanner, TableRows]:
        """One pass over results.jsonl for the summary, the table and the reports; ``keep``:
        the offsets of the lines that count, each (id, repeat) once (docs/results.md)."""
        scanner = ResultScanner(by_case=self.options.repeat > 1)
        shown = TableRows()
        for offset, case in result_lines(directory):
            if keep is None or offset in keep:
                scanner.add(offset, case)
                shown.add(case.slim())
        return scanner, shown

    async def _start_executor(self) -> Executor:
        if self.options.executor == "ray":
            from evalrun.runner.ray_executor import RayExecutor

            return await RayExecutor.start(self)
        return _LocalExecutor(self, self.launch_context())

    def launch_context(self) -> LaunchContext:
        return LaunchContext(
            eval_dir=self.loaded.folder.resolve(),
            judge=self.judge_name,
            secret_names=self.pool.secret_env_names(),
            proxy=self._get_proxy,
            sandbox=self.sandbox,
            pools=self._pools,
        )

    async def close(self) -> None:
        """Stop the stream-mode graders and the proxy and close the targets (also what a Ray
        worker does when it ends)."""
        await self._pools.close()
        self.target_stats.update(self.pool.stats())
        if self._proxy is not None:
            await self._proxy.stop()
            self._proxy = None
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
        await self.pool.aclose()

    @contextlib.contextmanager
    def _signals_handled(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """Ctrl-C and SIGTERM go to :meth:`_on_signal` until the summary is written."""
        handled = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._on_signal)
                handled.append(sig)
        try:
            yield
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)

    def _on_signal(self) -> None:
        if not self._finishing:
            self.interrupt()

    def interrupt(self) -> None:
        """Stop launching and cancel what runs; cancelled graders have their groups killed."""
        self._interrupted = True
        for task in self._tasks:
            task.cancel()

    async def grade_case(
        self, case: TestCase, repeat: int, ctx: LaunchContext
    ) -> tuple[CaseResult, list[JudgeCall]]:
        """Answer one case with the target and run its graders, here in this process."""
        started = time.monotonic()
        result = CaseResult(
            id=case.id, status="error", repeat=repeat, target=self.target_name, line=case.line
        )
        calls: list[JudgeCall] = []
        if case.turns is not None:
            result.error = (
                "multi-turn tests (AgentV's turns:) are not supported: evalrun asks its target "
                'one request per case (docs/eval-files.md, "AgentV files")'
            )
            return result, calls
        try:
            output, target_ms, usage, repaired, transcript = await self._answer(case)
            result.output = output
            result.transcript = transcript.to_dict() if transcript else None
            if repaired:
                result.warnings.append(repaired_note(repaired, "the target's answer"))
            result.timings["target_ms"] = round(target_ms, 1)
            if usage:
                result.usage["target"] = usage
        except TargetError as exc:
            result.error = f"target '{exc.target or self.target_name}' failed: {exc.message}"
            result.timings["total_ms"] = round((time.monotonic() - started) * 1000, 1)
            return result, calls
        try:
            runs = await asyncio.gather(
                *(
                    self.telemetry.grader(launch_grader(g, case, output, ctx, repeat, transcript))
                    for g in self.graders_for(case)
                )
            )
        except Exception as exc:  # a bug of ours must still leave one result for the case
            result.error = f"internal error while grading: {type(exc).__name__}: {exc}"
            result.timings["total_ms"] = round((time.monotonic() - started) * 1000, 1)
            return result, calls
        result.graders = [r.result for r in runs]
        for run in runs:
            calls += run.judge_calls
        result.score = self._score(result.graders)
        result.status = case_status(result.graders)
        if not result.graders:
            result.error = "no graders apply to this case"
        result.usage["judge"] = _judge_usage(result.graders)
        result.timings["total_ms"] = round((time.monotonic() - started) * 1000, 1)
        return result, calls

    def _score(self, graders: list[GraderOutcome]) -> float | None:
        rubric = self.loaded.spec.rubric
        if rubric:
            from evalrun.rubric import combine_grader_scores

            scored = {g.name: g.score for g in graders if g.score is not None}
            return combine_grader_scores(rubric, scored, base_dir=self.loaded.folder)
        return case_score(graders)

    async def _answer(
        self, case: TestCase
    ) -> tuple[str | None, float, dict[str, Any] | None, int, Transcript | None]:
        """The answer, its latency, usage, how many lone surrogates were repaired in it, and
        the agent's transcript when the target reads one (docs/agents.md)."""
        if case.output is not None:
            messages = as_messages(case.output, "assistant")
            texts = [m.text() for m in messages if m.role == "assistant" and m.text()]
            return (texts[-1] if texts else ""), 0.0, None, 0, None
        assert self.target_name is not None
        target = self.pool.get(self.target_name)
        system = [m.text() for m in case.input_messages if m.role == "system"]
        request = CompletionRequest(
            messages=[
                {"role": m.role, "content": m.text()}
                for m in case.input_messages
                if m.role != "system"
            ],
            system_prompt="\n\n".join(system) or None,
        )
        with self.telemetry.target_call(
            self.target_name, request.messages, request.system_prompt
        ) as answered:
            response = await target.complete(request)
            usage = {
                **response.usage.to_dict(),
                "cached": response.cached,
                "replayed": response.replayed,
                "cost_usd": response.cost_usd,
            }
            answered(usage, response.text, response.model)
        return (
            response.text,
            response.latency_ms,
            usage,
            response.repaired,
            response.transcript,
        )

    def _summary(
        self, results: StatsBuilder, started_at: datetime, duration_s: float
    ) -> dict[str, Any]:
        expected = len(self.cases) * self.options.repeat
        missing = max(0, expected - results.total)
        meta = RunMeta(
            eval=self.loaded.name,
            eval_file=str(self.loaded.path),
            tests_file=str((self.loaded.tests_file or self.loaded.path).resolve()),
            description=self.loaded.spec.description,
            target=self.target_name,
            judge=self.judge_name,
            started_at=started_at.isoformat(timespec="seconds"),
            finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            duration_s=round(duration_s, 3),
            complete=self._write_error is None and not self._interrupted and not missing,
            missing=missing,
            interrupted=self._interrupted and self._write_error is None,
            threshold=self.options.threshold,
            max_errors=self.options.max_errors,
            repeat=self.options.repeat,
            shard="/".join(map(str, self.options.shard)) if self.options.shard else None,
        )
        return summary_dict(results.build(), meta)

    def _exit_code(self, summary: dict[str, Any]) -> int:
        if self._write_error is not None or summary.get("missing"):
            return ExitCode.INCOMPLETE  # a result that is not on disk was lost
        if self._interrupted:
            return ExitCode.INTERRUPTED
        counts = summary.get("counts", {})
        if not counts.get("total"):
            return ExitCode.OK  # an empty shard: no gate to hold (docs/github-actions.md)
        if counts.get("error", 0) + counts.get("unscored", 0) > self.options.max_errors:
            return ExitCode.INCOMPLETE
        if counts.get("failed", 0):
            return ExitCode.GATE_FAILED
        threshold = self.options.threshold
        mean = summary.get("mean_score")
        if threshold is not None and (mean is None or mean < threshold):
            return ExitCode.GATE_FAILED
        return ExitCode.OK


def _interrupted_result(case: TestCase, repeat: int, target: str | None) -> CaseResult:
    """Every case gets exactly one result, also when Ctrl-C stopped it; --resume reruns it."""
    return CaseResult(
        id=case.id,
        status="error",
        repeat=repeat,
        target=target,
        error="interrupted (Ctrl-C)",
        line=case.line,
    )


def _judge_usage(graders: list[GraderOutcome]) -> dict[str, Any]:
    usage = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    for grader in graders:
        if grader.proxy:
            usage["calls"] += grader.proxy.calls
            usage["input_tokens"] += grader.proxy.input_tokens
            usage["output_tokens"] += grader.proxy.output_tokens
            usage["cost_usd"] += grader.proxy.cost_usd or 0.0
    return usage
