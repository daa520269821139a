"""Grade an eval's cases on a Ray cluster (``--executor ray``, docs/distributed.md).

The driver (this process) keeps everything a local run keeps: case selection, the bundle,
progress, Ctrl-C, the summary and the exit code. Each case is graded by a ``GraderWorker`` actor
somewhere on the cluster, which plans the run again on its node (its keys, programs and sandbox
are checked there) and grades with the same ``CaseGrader`` a local run uses: the graders run as
subprocesses beside that worker's own loopback proxy, so tokens and proxies never leave a node.
Each target's ``max_concurrency`` is held by one ``ClusterLimit`` actor that every worker
acquires from, so the provider sees the configured limit, not one limit per worker.

A worker that dies mid-case is restarted by Ray and its case retried there (actor restarts and
task retries); the driver records a case only when its result comes back, so never twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ipaddress
import logging
import math
import os
import re
import tempfile
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

# Read by Ray once, when it is first imported: off, a cluster this process starts binds
# 127.0.0.1 instead of the machine's IP (docs/distributed.md, "Network"). A driver joining a
# cluster takes its address from that cluster's node, so this changes nothing there.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402
from ray.exceptions import RayError  # noqa: E402

from evalrun.judgecall import JudgeCall  # noqa: E402
from evalrun.results.models import CaseResult  # noqa: E402
from evalrun.runner.case_grader import CaseGrader  # noqa: E402
from evalrun.runner.options import RunOptions  # noqa: E402
from evalrun.runner.plan import RunPlan, plan_run  # noqa: E402
from evalrun.spec.loader import load_eval  # noqa: E402
from evalrun.targets import ConfigError, StoreOptions, TargetConfig  # noqa: E402

if TYPE_CHECKING:
    from evalrun.spec.models import TestCase

#: Left out of the working folder Ray ships to the workers.
EXCLUDES = [".evalrun", ".venv", "venv", "node_modules", "__pycache__", "*.pyc"]
#: How often a case is retried on a restarted worker before it is recorded as an error.
TASK_RETRIES = 2


@ray.remote(num_cpus=0)
class ClusterLimit:
    """One target's concurrency limit for the whole cluster, leased per call.

    A lease that the caller gave up while it waited is released as soon as it is granted, and
    a restarted worker forgets the leases its previous life held, so slots never leak.
    """

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(max(1, limit))
        self._held: dict[str, str] = {}
        self._abandoned: set[str] = set()

    async def acquire(self, holder: str, lease: str) -> None:
        await self._slots.acquire()
        if lease in self._abandoned:
            self._abandoned.discard(lease)
            self._slots.release()
            return
        self._held[lease] = holder

    def release(self, lease: str) -> None:
        if self._held.pop(lease, None) is not None:
            self._slots.release()
        else:
            self._abandoned.add(lease)

    def forget(self, holder: str) -> None:
        for lease in [lease for lease, who in self._held.items() if who == holder]:
            self.release(lease)


_lease: contextvars.ContextVar[str] = contextvars.ContextVar("evalrun_cluster_lease")


@dataclass
class ClusterSlot:
    """The ``async with`` limit a worker's targets use; the lease of the call in progress is
    kept per asyncio task (a ``ContextVar``), since one slot object serves concurrent calls."""

    limiter: Any
    holder: str

    async def __aenter__(self) -> None:
        lease = uuid.uuid4().hex
        try:
            await self.limiter.acquire.remote(self.holder, lease)
        except asyncio.CancelledError:
            self.limiter.release.remote(lease)
            raise
        _lease.set(lease)

    async def __aexit__(self, *exc: object) -> None:
        self.limiter.release.remote(_lease.get())


@dataclass
class WorkerSpec:
    """What a worker needs to rebuild the driver's run: paths are relative to the working
    folder Ray ships, so graders and targets resolve exactly as they do locally."""

    eval_file: str
    targets_file: str | None
    #: the target that answers; several: a matrix run, each worker grades every column
    target: str | list[str] | None
    judge: str | None
    cache_dir: str | None
    sandbox: str
    #: the driver's masks (bundle, cache, targets file, private folders): masked on every
    #: worker too, where they exist (docs/security.md, "On a Ray cluster")
    masked: list[str] = field(default_factory=list)
    #: target name -> name of its ``ClusterLimit`` actor
    limiters: dict[str, str] = field(default_factory=dict)


@ray.remote(num_cpus=1)
class GraderWorker:
    def __init__(self, spec: WorkerSpec, holder: str) -> None:
        loaded = load_eval(Path(spec.eval_file))
        options = RunOptions(
            out=Path(tempfile.mkdtemp(prefix="evalrun-ray-worker-")),
            target=spec.target,
            judge=spec.judge,
            targets_file=Path(spec.targets_file) if spec.targets_file else None,
            stores=StoreOptions(cache_dir=Path(spec.cache_dir) if spec.cache_dir else None),
            quiet=True,
            sandbox=spec.sandbox,  # type: ignore[arg-type]
        )
        limiters = {target: ray.get_actor(name) for target, name in spec.limiters.items()}
        for limiter in limiters.values():
            ray.get(limiter.forget.remote(holder))  # leases of this worker's previous life

        def limit_for(config: TargetConfig) -> ClusterSlot | None:
            limiter = limiters.get(config.name)
            return ClusterSlot(limiter, holder) if limiter is not None else None

        self.plan = plan_run(loaded, options, limit_for=limit_for)
        self.plan.sandbox = self.plan.sandbox.masking(Path(p) for p in spec.masked)
        # a grader per matrix column, as the local executor has (docs/distributed.md)
        plan = self.plan
        columns: dict[str | None, RunPlan] = (
            {target: plan.column(target) for target in plan.targets}
            if plan.matrix
            else {plan.target_name: plan}
        )
        self.graders = {target: CaseGrader(column) for target, column in columns.items()}
        self.cases = {(case.id, case.prompt): case for case in loaded.tests}

    def ready(self) -> int:
        return os.getpid()

    async def grade(
        self, case_id: str, prompt: str | None, repeat: int, target: str | None
    ) -> tuple[dict[str, Any], list[JudgeCall]]:
        grader = self.graders[target]
        result, calls = await grader.grade(self.cases[(case_id, prompt)], repeat)
        return result.to_dict(), calls

    async def close(self) -> None:
        for grader in self.graders.values():
            await grader.aclose()
        await self.plan.close()


def _actor(cls: type) -> Any:
    """The Ray actor class ``@ray.remote`` made of ``cls`` (mypy reads a class decorator as
    returning the class itself, so it cannot see ``.options``)."""
    return cast(Any, cls)


def working_folder(eval_file: Path) -> Path:
    """The folder Ray ships: the current folder if it holds the eval file, else the file's."""
    here = Path.cwd().resolve()
    return here if eval_file.resolve().is_relative_to(here) else eval_file.resolve().parent


def _relative(path: Path | None, root: Path, what: str) -> str | None:
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        raise ConfigError(
            f"--executor ray: the {what} {path} is outside {root}, the folder shipped to the "
            "workers; run evalrun from a folder that holds it"
        ) from None


def _cause(exc: BaseException) -> str:
    """The line of a Ray error that names the original exception, without colour codes."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(exc).splitlines()]
    named = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    return (named or lines or [type(exc).__name__])[-1]


def _connect(address: str | None, root: Path) -> None:
    """Join the cluster at ``address``, or start one on this machine when it is None. Called on
    the main thread (Ray installs its signal handlers there); a local cluster stays on
    loopback, or is not started at all."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine unasked
    if address is None and not ipaddress.ip_address(ray.util.get_node_ip_address()).is_loopback:
        raise ConfigError(
            "--executor ray: a local Ray cluster would listen on "
            f"{ray.util.get_node_ip_address()}, not 127.0.0.1 only (Ray was imported before "
            "evalrun, or RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER is set); start evalrun in a fresh "
            "process without it, or pass --ray-address"
        )
    logging.getLogger("ray._private.runtime_env").setLevel(logging.ERROR)  # ".git is ignored"
    try:
        ray.init(
            address=address or "local",  # "local": a new cluster, never a stale one found
            runtime_env={"working_dir": str(root), "excludes": EXCLUDES},
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError, RayError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise ConfigError(f"--executor ray: cannot reach {where}: {exc}") from None


class RayExecutor:
    """The run's workers; a matrix run grades each column through a :class:`RayColumn`."""

    def __init__(self, plan: RunPlan, workers: list[Any], limiters: dict[str, Any]) -> None:
        self._target_name = plan.target_name
        self._workers = workers
        self._limiters = limiters
        self._busy: dict[int, int] = defaultdict(int)
        self._started_cluster = plan.options.ray_address is None
        self._closed = False

    def column(self, target: str | None) -> RayColumn:
        return RayColumn(self, target)

    @classmethod
    async def start(cls, plan: RunPlan) -> RayExecutor:
        """Connect (or start a local cluster), then start the limits and the workers
        (ConfigError: nothing ran)."""
        options = plan.options
        if options.stores.record or options.stores.replay:
            raise ConfigError("--record and --replay are not supported with --executor ray")
        root = working_folder(plan.loaded.path)
        targets_path = plan.targets_path
        cache = options.stores.cache_dir
        spec = WorkerSpec(
            eval_file=_relative(plan.loaded.path, root, "eval file") or "",
            targets_file=_relative(targets_path, root, "targets file"),
            target=list(plan.targets) if plan.matrix else plan.target_name,
            # a matrix's columns judge their own cells unless a judge was named
            judge=None if plan.matrix and plan.judge_follows_target else plan.judge_name,
            # an absolute cache folder is shared by every node that mounts it; a relative one
            # lives in each worker's own copy of the working folder
            cache_dir=None if cache is None else str(cache),
            sandbox=options.sandbox,
            masked=[str(p) for p in plan.sandbox.masked],
        )
        _connect(options.ray_address, root)
        try:
            limiters = {}
            run_id = uuid.uuid4().hex[:12]
            for name in plan.used_targets:
                config = plan.pool.file.get(name)
                actor_name = spec.limiters[name] = f"evalrun-limit-{run_id}-{name}"
                limiters[name] = (
                    _actor(ClusterLimit)
                    .options(name=actor_name)
                    .remote(
                        config.concurrency_bounds[0]  # fixed on a cluster, not adaptive
                    )
                )
            cpus = int(ray.cluster_resources().get("CPU", 1))
            count = max(1, min(cpus, options.workers))
            per_worker = math.ceil(options.workers / count)
            workers = [
                _actor(GraderWorker)
                .options(
                    max_concurrency=per_worker,
                    max_restarts=-1,
                    max_task_retries=TASK_RETRIES,
                )
                .remote(spec, f"worker-{i}")
                for i in range(count)
            ]
            await asyncio.gather(*(w.ready.remote() for w in workers))
        except RayError as exc:
            await asyncio.to_thread(ray.shutdown)
            raise ConfigError(
                f"--executor ray: the workers could not start: {_cause(exc)}"
            ) from None
        return cls(plan, workers, limiters)

    async def grade(
        self, case: TestCase, repeat: int, target: str | None = None
    ) -> tuple[CaseResult, list[JudgeCall]]:
        """One cell: ``case`` answered by ``target`` (None: the run's one target)."""
        index = min(range(len(self._workers)), key=lambda i: self._busy[i])
        self._busy[index] += 1
        target = target or self._target_name
        ref = self._workers[index].grade.remote(case.id, case.prompt, repeat, target)
        try:
            data, calls = await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise
        except RayError as exc:
            failed = CaseResult(
                id=case.id, status="error", repeat=repeat, target=target, prompt=case.prompt
            )
            failed.error = f"ray worker failed: {type(exc).__name__}: {_cause(exc)}"
            return failed, []
        finally:
            self._busy[index] -= 1
        return CaseResult.from_dict(data), calls

    async def aclose(self) -> None:
        if self._closed:  # each column closes it; the first does
            return
        self._closed = True
        closing = asyncio.gather(*(w.close.remote() for w in self._workers), return_exceptions=True)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(closing, timeout=10)
        for actor in [*self._workers, *self._limiters.values()]:
            ray.kill(actor)
        if self._started_cluster:
            await asyncio.to_thread(ray.shutdown)


@dataclass
class RayColumn:
    """One matrix column's executor: the run's workers, answering with its target."""

    cluster: RayExecutor
    target: str | None

    async def grade(self, case: TestCase, repeat: int) -> tuple[CaseResult, list[JudgeCall]]:
        return await self.cluster.grade(case, repeat, self.target)

    async def aclose(self) -> None:
        await self.cluster.aclose()
