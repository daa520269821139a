"""What a whole process tree costs: its memory (PSS summed over every process) and its CPU
(from a cgroup, so CPU spent inside a bubblewrap PID namespace counts too). Used by the benches;
the definitions are in docs/performance.md ("Memory at width", "Counting CPU").

Proportional set size (PSS) charges each shared page to the processes that map it in equal
parts, so the PSS of every process of a tree adds up to what the tree really holds; RSS would
count the interpreter's shared pages once per process.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def children_of(proc: Path = PROC) -> dict[int, list[int]]:
    """Every process's children, from each ``/proc/PID/stat``'s parent field."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # the command name may hold spaces and parentheses: the fields follow the last ")"
        fields = stat[stat.rfind(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def tree(root: int, proc: Path = PROC) -> list[int]:
    """``root`` and every descendant alive now (processes in a child PID namespace included:
    ``/proc`` of this namespace shows them with their PIDs here)."""
    children = children_of(proc)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def pss_kib(pid: int, proc: Path = PROC) -> int | None:
    """The ``Pss`` line of ``/proc/PID/smaps_rollup`` in KiB; None when it cannot be read (the
    process exited, or is not ours)."""
    try:
        text = (proc / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


@dataclass
class TreeSample:
    processes: int
    pss_kib: int
    unreadable: int


def sample_tree(root: int, proc: Path = PROC) -> TreeSample:
    """One look at the tree under ``root``: how many processes, their PSS summed."""
    total = unreadable = 0
    pids = tree(root, proc)
    for pid in pids:
        value = pss_kib(pid, proc)
        if value is None:
            unreadable += 1
        else:
            total += value
    return TreeSample(len(pids), total, unreadable)


@dataclass
class PeakTree:
    """The sample with the largest PSS, and the most processes seen at once."""

    samples: int = 0
    peak: TreeSample = field(default_factory=lambda: TreeSample(0, 0, 0))
    most_processes: int = 0

    def add(self, sample: TreeSample) -> None:
        self.samples += 1
        if sample.pss_kib > self.peak.pss_kib:
            self.peak = sample
        self.most_processes = max(self.most_processes, sample.processes)


class TreeSampler:
    """Samples the tree under ``root`` in a thread every ``interval`` seconds until stopped."""

    def __init__(self, root: int, interval: float = 0.25, proc: Path = PROC) -> None:
        self.root = root
        self.interval = interval
        self.proc = proc
        self.result = PeakTree()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.result.add(sample_tree(self.root, self.proc))
            self._stop.wait(self.interval)


# -- CPU -------------------------------------------------------------------------------------


@dataclass
class CpuMeter:
    """Where a measured command's CPU is read from, and how.

    ``source`` says which, for the bench's output: ``cgroup v2 child``, ``cgroup v1 cpuacct
    child`` (the command runs in a cgroup of its own: everything it starts is counted, inside a
    PID namespace too), ``cgroup v2 current`` (this process's own cgroup: whatever else runs
    in it is counted too), or ``wait4`` (the command and the children it waited for; misses CPU
    spent inside a bubblewrap PID namespace).
    """

    source: str
    #: the cgroup folder the command is moved into (None: it is not moved)
    join: Path | None
    #: CPU seconds of the cgroup so far (None: read wait4's figure instead)
    read: Callable[[], float] | None
    cleanup: Callable[[], None] = lambda: None

    def preexec(self) -> None:
        """Run in the child between fork and exec: move it into the cgroup first, so every
        process it starts is born there."""
        if self.join is not None:
            (self.join / "cgroup.procs").write_text(f"{os.getpid()}\n")


def _v2_usage(folder: Path) -> float:
    for line in (folder / "cpu.stat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == "usage_usec":
            return int(value) / 1e6
    raise OSError(f"{folder / 'cpu.stat'} has no usage_usec")


def _v1_usage(folder: Path) -> float:
    return int((folder / "cpuacct.usage").read_text()) / 1e9


def _own_cgroup(kind: str, proc: Path) -> Path | None:
    """This process's cgroup path for the v1 controller ``kind`` ("" for v2)."""
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (kind == "" and controllers == "") or kind in controllers.split(","):
            return Path(path.lstrip("/"))
    return None


def _child_meter(folder: Path, source: str, usage: Callable[[Path], float]) -> CpuMeter | None:
    child = folder / f"evalrun-bench-{uuid.uuid4().hex[:8]}"
    try:
        child.mkdir()
    except OSError:
        return None

    def cleanup() -> None:
        """Remove the cgroup; refused while a process is still in it (a grader killed at the
        end of a run may take a moment to go), so it is tried for up to a second."""
        for _ in range(20):
            try:
                child.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.05)

    try:
        usage(child)
    except (OSError, ValueError):
        cleanup()
        return None
    return CpuMeter(source, child, lambda: usage(child), cleanup)


def cpu_meter(root: Path = CGROUP_ROOT, proc: Path = PROC) -> CpuMeter:
    """The best CPU source this machine offers, in the order of ``CpuMeter.source``."""
    v2_path = _own_cgroup("", proc)
    for v2 in (root, root / "unified"):
        if v2_path is None or not (v2 / "cgroup.controllers").exists():
            continue
        own = v2 / v2_path
        meter = _child_meter(own, "cgroup v2 child", _v2_usage)
        if meter is not None:
            return meter
        if (own / "cpu.stat").exists():
            return CpuMeter(
                "cgroup v2 current (counts all of this cgroup)",
                None,
                functools.partial(_v2_usage, own),
            )
    v1_path = _own_cgroup("cpuacct", proc)
    if v1_path is not None:
        for name in ("cpuacct", "cpu,cpuacct"):
            meter = _child_meter(root / name / v1_path, "cgroup v1 cpuacct child", _v1_usage)
            if meter is not None:
                return meter
    return CpuMeter("wait4 (misses CPU inside a bubblewrap PID namespace)", None, None)
