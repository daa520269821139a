"""The benches' whole-tree figures (bench/treestats.py): PSS summed over a process tree, and
CPU read from a cgroup so CPU inside a bubblewrap PID namespace counts (docs/performance.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import treestats  # noqa: E402


def _fake_proc(tmp_path: Path, rows: dict[int, tuple[str, int, int | None]]) -> Path:
    """A /proc with ``pid: (command name, parent, Pss KiB or None for unreadable)``."""
    proc = tmp_path / "proc"
    for pid, (name, parent, pss) in rows.items():
        folder = proc / str(pid)
        folder.mkdir(parents=True)
        (folder / "stat").write_text(f"{pid} ({name}) S {parent} {pid} {pid} 0 -1\n")
        if pss is not None:
            (folder / "smaps_rollup").write_text(f"Rss:    {pss * 3} kB\nPss:    {pss} kB\n")
    (proc / "self").mkdir(parents=True)
    return proc


def test_the_tree_is_the_root_and_every_descendant_and_pss_adds_up(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path,
        {
            1: ("init", 0, 100),
            10: ("evalrun", 1, 50_000),
            11: ("bwrap", 10, 120),
            12: ("odd) (name", 11, 6_000),  # a name with ") (" in it: fields follow the last ")"
            13: ("python", 12, None),
            20: ("other", 1, 9_999),
        },
    )
    assert sorted(treestats.tree(10, proc)) == [10, 11, 12, 13]
    sample = treestats.sample_tree(10, proc)
    assert (sample.processes, sample.pss_kib, sample.unreadable) == (4, 56_120, 1)


@pytest.mark.slow  # real processes, sampled for 0.3 s
def test_the_sampler_keeps_the_peak_of_a_real_tree(tmp_path: Path) -> None:
    script = "import subprocess, time; p = subprocess.Popen(['sleep', '30']); time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while len(treestats.tree(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        with treestats.TreeSampler(parent.pid, interval=0.05) as sampler:
            time.sleep(0.3)
    finally:
        for child in treestats.tree(parent.pid)[1:]:
            subprocess.run(["kill", str(child)], check=False)
        parent.kill()
        parent.wait()
    assert sampler.result.samples >= 2
    assert sampler.result.most_processes == 2
    # a Python interpreter alone holds more than a megabyte that is its own
    assert sampler.result.peak.pss_kib > 1024 and sampler.result.peak.unreadable == 0


def test_without_a_cgroup_cpu_comes_from_wait4_and_says_so(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, {})
    meter = treestats.cpu_meter(tmp_path / "no-cgroups", proc)
    assert meter.read is None and meter.join is None and meter.source.startswith("wait4")


def test_a_v2_cgroup_that_cannot_have_children_is_read_whole_and_says_so(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, {})
    (proc / "self" / "cgroup").write_text("0::/job\n")
    root = tmp_path / "cgroup"
    (root / "job").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu\n")
    (root / "job" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    meter = treestats.cpu_meter(root, proc)  # its child has no cpu.stat: not a real cgroup
    assert meter.source.startswith("cgroup v2 current") and meter.join is None
    assert meter.read is not None and meter.read() == 2.5
    assert [p.name for p in (root / "job").iterdir()] == ["cpu.stat"]  # the probe is gone


def _real_child_meter() -> treestats.CpuMeter:
    meter = treestats.cpu_meter()
    if meter.join is None:
        pytest.skip(f"no writable cgroup here ({meter.source})")
    return meter


@pytest.mark.slow  # burns ~1 s of CPU in a sandbox
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_child_cgroup_counts_cpu_spent_inside_a_pid_namespace() -> None:
    meter = _real_child_meter()
    burn = [sys.executable, "-c", "sum(i * i for i in range(3_000_000))"]
    bwrap = ["bwrap", "--unshare-pid", "--die-with-parent", "--dev-bind", "/", "/"]
    try:
        assert meter.read is not None
        before = meter.read()
        proc = subprocess.Popen([*bwrap, "--proc", "/proc", *burn], preexec_fn=meter.preexec)
        _, status, usage = os.wait4(proc.pid, 0)
        counted = meter.read() - before
    finally:
        meter.cleanup()
    if status != 0:
        pytest.skip("bwrap cannot make a PID namespace here")
    waited = usage.ru_utime + usage.ru_stime
    assert counted > 0.1  # the burn itself, which wait4 on bwrap does not see
    assert counted > 3 * waited
