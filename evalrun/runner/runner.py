"""The run: the bundle, the progress line, Ctrl-C, the summary and the exit code, around an
executor that grades the cases (``case_grader.py`` here, ``ray_executor.py`` on a cluster).
Each result is appended to the bundle as its case finishes.

Ctrl-C (or SIGTERM) stops launching, kills grader process groups (their tasks are cancelled),
revokes grants, stops the proxy, writes the summary marked incomplete and exits 130.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalrun import telemetry
from evalrun.errors import ExitCode
from evalrun.judgecall import JudgeCall
from evalrun.results.bundle import BundleWriteError, BundleWriter, WrittenLine, claim_folder
from evalrun.results.matrix import column_name, column_names, column_of
from evalrun.results.models import CaseResult
from evalrun.results.reader import read_case_results, result_lines
from evalrun.results.scan import ResultScan, ResultScanner, latest_offsets
from evalrun.results.stats import RUN_SEED
from evalrun.results.summary import RunMeta, RunStats, gated_exit_code, summary_dict
from evalrun.runner.case_grader import CaseGrader
from evalrun.runner.plan import RunPlan
from evalrun.runner.progress import Progress, TableRows
from evalrun.runner.selection import finished_keys
from evalrun.spec.models import TestCase
from evalrun.targets import ConfigError

if TYPE_CHECKING:
    from evalrun.telemetry.spans import Model

#: Told each case the run wrote: its result line and its judge-call lines, as written.
RecordListener = Callable[[WrittenLine, list[WrittenLine]], None]


class Executor(Protocol):
    """Where cases are graded: in this process, or on a Ray cluster (docs/distributed.md)."""

    async def grade(self, case: TestCase, repeat: int) -> tuple[CaseResult, list[JudgeCall]]: ...

    async def aclose(self) -> None: ...


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
    """The run of a checked plan: the bundle, the progress line, Ctrl-C, the summary and the
    exit code. Cases are graded by an executor: a :class:`CaseGrader` here, or Ray workers."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self.options = plan.options
        #: the run's spans (docs/otel.md): started by :meth:`run`
        #: the open bundle's folder, for the graders' AGENTV_RUN_DIR (set by the run)
        self._bundle_dir: Path | None = None
        self.telemetry = telemetry.OFF
        #: per target: calls, concurrency reached, 429s (docs/targets.md, "Concurrency")
        self.target_stats: dict[str, dict[str, Any]] = {}
        self._interrupted = False
        self._finishing = False
        self._write_error: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._kept: set[tuple[str, str, int]] = set()
        self._created_folder = False

    def open_bundle(self) -> BundleWriter:
        """Claim this run's bundle folder and open its files (BundleError: exit 2, nothing ran).
        With ``--resume`` the finished cases already there are kept."""
        options = self.options
        if options.resume:  # appended to: the lines already there stay as they are
            writer = BundleWriter(options.out, mode="resume")
            # one target: a line counts whatever target it names, as it always did
            previous = read_case_results(options.out)
            self._kept = finished_keys(previous, by_target=self.plan.matrix)
            self._created_folder = False
            return writer
        out, self._created_folder = claim_folder(options.out, unique=options.unique_out)
        if out != options.out:  # a suffix was added: the sandbox masks the folder really used
            self.plan.sandbox = self.plan.sandbox.masking([out])
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
            config = self.plan.pool.file.get(name)
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

        redactor = Redactor(key_values(self.plan.pool))
        return lambda text: redactor.text(text) or ""

    async def _run(
        self, writer: BundleWriter | None, on_record: RecordListener | None
    ) -> RunOutcome:
        options = self.options
        writer = writer or self.open_bundle()
        done, cases, columns = self._kept, self.plan.cases, self._columns()
        column_key = {target: target if self.plan.matrix else None for target in columns}
        # Jobs are pulled from the cases as workers get to them: the cases may stream from a
        # file, and nothing per case is held beyond those in flight (docs/performance.md).
        # A matrix run grades each case once per target, the columns of a case side by side.
        jobs = (
            (case, target, r)
            for case in cases
            for target in columns
            for r in range(options.repeat)
            if (case.id, column_name(column_key[target], case.prompt), r) not in done
        )
        job_count = len(cases) * options.repeat * len(columns)
        if done:
            job_count = sum(
                (case.id, column_name(column_key[target], case.prompt), r) not in done
                for case in cases
                for target in columns
                for r in range(options.repeat)
            )
        self._bundle_dir = writer.directory
        try:
            executors = await self._start_executors(columns)
        except BaseException:  # a failed start writes nothing
            writer.discard(remove_folder=self._created_folder)
            raise
        started_at = datetime.now(timezone.utc)
        t0 = time.monotonic()
        self.telemetry.begin_run(self.plan.loaded.name, columns, self.plan.judge_name)
        widths = len(columns) * max(1, len(self.plan.loaded.prompts))
        progress = Progress(job_count, quiet=options.quiet, repeat=options.repeat, columns=widths)

        columned = len(columns) > 1 or bool(self.plan.loaded.prompts)

        def record(result: CaseResult, calls: list[JudgeCall]) -> None:
            if self._write_error is not None:
                return
            try:
                line = writer.add_case(result)
                for call in calls:
                    call.repeat = result.repeat
                    if columned:  # whose cell it is, when the judge is shared
                        call.column = column_of(result)
                call_lines = writer.add_judge_calls(calls)
            except BundleWriteError as exc:  # loud: stop the run, exit 3 (docs/results.md)
                self._write_error = f"case '{result.id}': {exc}"
                self.interrupt()
                return
            if on_record is not None:
                on_record(line, call_lines)
            progress.case_done(result)

        async def one(case: TestCase, target: str | None, repeat: int) -> None:
            with self.telemetry.case(case.id, repeat) as case_done:
                try:
                    if self._interrupted:
                        raise asyncio.CancelledError
                    result, calls = await executors[target].grade(case, repeat)
                except asyncio.CancelledError:
                    if not self._interrupted:
                        raise
                    result, calls = _interrupted_result(case, repeat, target), []
                case_done(result)
            record(result, calls)

        # A fixed pool of workers pulls from one iterator, so a run holds `workers` coroutines
        # however many cases it has (one task per case up front costs memory per case).
        pending = iter(jobs)

        async def worker() -> None:
            for case, target, repeat in pending:
                await one(case, target, repeat)

        with self._signals_handled(asyncio.get_running_loop()):
            try:
                for _ in range(min(max(1, options.workers), job_count)):
                    self._tasks.add(asyncio.create_task(worker()))
                outcomes = await asyncio.gather(*self._tasks, return_exceptions=True)
                for failure in outcomes:
                    if isinstance(failure, BaseException) and self._write_error is None:
                        self._write_error = f"internal error: {type(failure).__name__}: {failure}"
                for case, target, repeat in pending:  # never started: Ctrl-C came first
                    record(_interrupted_result(case, repeat, target), [])
            finally:
                # Every case has its one result now: a late Ctrl-C or SIGTERM must neither stop the
                # bundle being finished nor mark a whole run incomplete (docs/results.md).
                self._finishing = True
                progress.close()
                for executor in executors.values():
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
        order = column_names(self._columns(), self.plan.loaded.prompts)
        stats = scanner.stats.build(seed=self.options.seed, order=order)
        cells = len(self.plan.cases) * len(self._columns())
        missing = max(0, cells * self.options.repeat - stats.counts.total)
        summary = summary_dict(stats, self._meta(started_at, duration, missing))
        summary["targets"] = self.target_stats
        exit_code = self._exit_code(stats, missing)
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

    def _columns(self) -> list[str | None]:
        """The matrix's columns: each target of a matrix run, else the run's one target."""
        plan = self.plan
        return list(plan.targets) if plan.matrix else [plan.target_name]

    async def _start_executors(self, columns: list[str | None]) -> dict[str | None, Executor]:
        """An executor per column: a matrix run grades each target's cells with a
        ``CaseGrader`` of that column's plan (its own judge proxy; the targets are shared),
        here or in each Ray worker."""
        if self.options.executor == "ray":
            from evalrun.runner.ray_executor import RayExecutor

            cluster = await RayExecutor.start(self.plan)
            return {target: cluster.column(target) for target in columns}
        if not self.plan.matrix:
            grader = CaseGrader(self.plan, self.telemetry, bundle_dir=self._bundle_dir)
            return {columns[0]: grader}
        return {
            target: CaseGrader(
                self.plan.column(target), self.telemetry, bundle_dir=self._bundle_dir
            )
            for target in self.plan.targets
        }

    async def close(self) -> None:
        """Close the plan's targets (after the executor closed its graders and proxies)."""
        self.target_stats.update(self.plan.pool.stats())
        await self.plan.close()

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

    def _meta(self, started_at: datetime, duration_s: float, missing: int) -> RunMeta:
        loaded, options = self.plan.loaded, self.options
        return RunMeta(
            eval=loaded.name,
            eval_file=str(loaded.path),
            tests_file=str((loaded.tests_file or loaded.path).resolve()),
            description=loaded.spec.description,
            # a matrix run names its targets in `matrix`; its judge is each column's target
            # unless one was named (docs/results.md, "A matrix run")
            target=None if self.plan.matrix else self.plan.target_name,
            judge=None
            if self.plan.matrix and self.plan.judge_follows_target
            else self.plan.judge_name,
            started_at=started_at.isoformat(timespec="seconds"),
            finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            duration_s=round(duration_s, 3),
            complete=self._write_error is None and not self._interrupted and not missing,
            missing=missing,
            interrupted=self._interrupted and self._write_error is None,
            threshold=options.threshold,
            max_errors=options.max_errors,
            repeat=options.repeat,
            shard="/".join(map(str, options.shard)) if options.shard else None,
            seed=None if options.seed == RUN_SEED else options.seed,
            matrix=list(self.plan.targets) if self.plan.matrix else None,
            prompts=self.plan.loaded.prompts or None,
        )

    def _exit_code(self, stats: RunStats, missing: int) -> int:
        """The first gate of docs/results.md ("Exit codes") that applies."""
        if self._write_error is not None or missing:
            return ExitCode.INCOMPLETE  # a result that is not on disk was lost
        if self._interrupted:
            return ExitCode.INTERRUPTED
        counts = stats.counts
        if not counts.total:
            return ExitCode.OK  # an empty shard: no gate to hold (docs/github-actions.md)
        return gated_exit_code(
            failed=counts.failed,
            not_scored=counts.error + counts.unscored,
            mean=stats.mean_score,
            threshold=self.options.threshold,
            max_errors=self.options.max_errors,
        )


def _interrupted_result(case: TestCase, repeat: int, target: str | None) -> CaseResult:
    """Every case gets exactly one result, also when Ctrl-C stopped it; --resume reruns it."""
    return CaseResult(
        id=case.id,
        status="error",
        repeat=repeat,
        target=target,
        error="interrupted (Ctrl-C)",
        line=case.line,
        prompt=case.prompt,
    )
