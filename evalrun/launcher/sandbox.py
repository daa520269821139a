"""A sandbox per grader run, built with bubblewrap (``bwrap``), so a hostile grader cannot read
what it should not: evalrun's environment (provider keys), other graders' tokens, evalrun's own
files. The levels and what each one hides are in docs/security.md ("Grader sandbox").

- ``none``: the grader runs as it is.
- ``process``: a new PID namespace with its own ``/proc`` (neither evalrun nor other graders are
  visible), all capabilities dropped (so even root cannot unmount a mask), evalrun's own files
  masked; the rest of the file system and the network as the user has them.
- ``strict``: ``process`` plus a read-only file system, except the grader's working folder and a
  private temp folder (``TMPDIR``), and a network namespace of its own where only the judge proxy
  is reachable
  (``netrelay.py`` carries its loopback port to the proxy's Unix socket).
- ``auto`` (the default): ``process`` where bubblewrap can create namespaces, else ``none``.

Signals still reach the grader: bwrap stays in the grader's process group, so the launcher's
group kill reaches every process inside, and ``--die-with-parent`` ends the sandbox with evalrun.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Level = Literal["none", "process", "strict"]
Requested = Literal["auto", "none", "process", "strict"]
LEVELS: tuple[Requested, ...] = ("auto", "none", "process", "strict")


_RELAY = Path(__file__).with_name("netrelay.py")


@dataclass(frozen=True)
class ProxyRoute:
    """Where a network-isolated grader's proxy calls go: the TCP port it was told and the
    proxy's Unix socket, which crosses network namespaces."""

    port: int
    socket_path: Path


class SandboxUnavailable(Exception):
    """A level was asked for explicitly and this machine cannot give it."""


@functools.lru_cache(maxsize=1)
def why_unavailable() -> str | None:
    """None when bwrap can build the ``process`` sandbox here, else the reason (checked once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not on PATH; install it, e.g. 'apt-get install bubblewrap'"
    probe = [bwrap, *_namespace_args(), "--dev-bind", "/", "/", "--proc", "/proc", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not be run: {exc}"
    if done.returncode != 0:
        detail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return f"bwrap cannot create namespaces here ({detail[0]})"
    return None


def _namespace_args() -> list[str]:
    return ["--unshare-pid", "--die-with-parent", "--cap-drop", "ALL"]


@dataclass(frozen=True)
class Sandbox:
    """How one grader process is wrapped; ``masked`` are evalrun's own files and folders."""

    level: Level
    masked: tuple[Path, ...] = ()
    #: where ``strict`` grader runs get their own private temp folder (the run's private folder)
    scratch: Path | None = None
    #: more bwrap binds for ``strict`` (flag, path), such as the bytecode folder (bytecode.py)
    binds: tuple[tuple[str, Path], ...] = ()

    def wrap(self, argv: Sequence[str], cwd: Path, proxy: ProxyRoute | None = None) -> list[str]:
        if self.level == "none" or shutil.which(argv[0]) is None:
            # A program that cannot be found is left for the launcher to report as usual.
            return list(argv)
        bwrap = shutil.which("bwrap") or "bwrap"
        command = list(argv)
        if self.level == "strict":
            base = ["--ro-bind", "/", "/", "--dev", "/dev"]
            if self.scratch is not None:
                private = tempfile.mkdtemp(dir=self.scratch)
                base += ["--bind", private, private, "--setenv", "TMPDIR", private]
            base += ["--bind", str(cwd), str(cwd), "--unshare-net"]
            for flag, path in self.binds:
                base += [flag, str(path), str(path)]
            if proxy is not None:
                folder = str(proxy.socket_path.parent)
                base += ["--bind", folder, folder]
                relay = [sys.executable, "-I", "-S", str(_RELAY), str(proxy.port)]
                command = [*relay, str(proxy.socket_path), "--", *argv]
        else:
            base = ["--dev-bind", "/", "/"]
        args = [bwrap, *_namespace_args(), *base, "--proc", "/proc"]
        for path in self.masked:
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        return [*args, "--chdir", str(cwd), "--", *command]

    def exit_status(self, code: int | None) -> int | None:
        """bwrap reports a grader killed by signal N as exit 128+N; give the signal back."""
        if self.level != "none" and code is not None and code > 128:
            return -(code - 128)
        return code


@dataclass(frozen=True)
class SandboxPolicy:
    """The run's level and each grader's own ``sandbox:``, resolved once before the run."""

    default: Level = "none"
    masked: tuple[Path, ...] = ()
    notice: str | None = None
    #: some grader runs ``strict``: the proxy also listens on a Unix socket for it
    isolates_network: bool = False
    scratch: Path | None = None

    def for_grader(self, requested: Requested | None) -> Sandbox:
        level = self.default if requested is None or requested == "auto" else requested
        return Sandbox(level, self.masked, self.scratch)


def resolve_policy(
    run_level: Requested, grader_levels: Iterable[Requested | None], masked: Iterable[Path]
) -> SandboxPolicy:
    """Raise ``SandboxUnavailable`` for a level asked for explicitly that cannot be had."""
    masks = tuple(dict.fromkeys(Path(p).resolve() for p in masked))
    explicit = {level for level in (run_level, *grader_levels) if level not in (None, "auto")}
    reason = why_unavailable() if explicit - {"none"} or run_level == "auto" else None
    if reason and explicit - {"none"}:
        wanted = "/".join(sorted(explicit - {"none"}))
        raise SandboxUnavailable(f"sandbox '{wanted}' was asked for but {reason}")
    notice = None
    if run_level == "auto":
        default: Level = "none" if reason else "process"
        if reason:
            notice = f"graders run without a sandbox: {reason} (see docs/security.md)"
    else:
        default = run_level
    strict = default == "strict" or "strict" in explicit
    return SandboxPolicy(default=default, masked=masks, notice=notice, isolates_network=strict)
