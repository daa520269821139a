"""A sandbox per grader run, built with bubblewrap (``bwrap``), so a hostile grader cannot read
what it should not: evalrun's environment (provider keys), other graders' tokens, evalrun's own
files. The levels and what each one hides are in docs/security.md ("Grader sandbox").

- ``none``: the grader runs as it is.
- ``process``: a new PID namespace with its own ``/proc`` (neither evalrun nor other graders are
  visible), all capabilities dropped (so even root cannot unmount a mask), evalrun's own files
  masked; the rest of the file system and the network as the user has them.
- ``strict``: ``process`` plus a read-only file system, with ``/tmp`` and ``/run`` empty and
  every other listening Unix socket of the host masked; the grader works in a private scratch
  folder (its cwd and ``TMPDIR``), its own folder is read-only; a network namespace of its own
  where only the judge proxy is reachable (``netrelay.py`` carries its loopback port to the
  proxy's Unix socket, bound in read-only).
- ``auto`` (the default): ``process`` where bubblewrap can create namespaces, else ``none``.

Every run keeps its private files (the proxy's Unix socket, strict graders' scratch folders) in
one folder per user, ``private_root()``, which every sandbox masks: no grader of any run can
replace another's proxy socket or read another's scratch folder.

Signals still reach the grader: bwrap stays in the grader's process group, so the launcher's
group kill reaches every process inside, and ``--die-with-parent`` ends the sandbox with evalrun.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evalrun.argvpaths import existing
from evalrun.errors import UserError

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


class SandboxUnavailable(UserError):
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


#: emptied in ``strict``: where the host keeps temp files and most Unix sockets
_HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run")
#: evalrun's interpreter and its code, which ``strict`` keeps visible wherever they are
_OWN = (Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parents[2])


#: a Unix socket's path holds at most 107 bytes; below the root go ``/evalrun-UID/run-XXXXXXXX/
#: proxy.sock`` (under 48 bytes)
_LONGEST_BASE = 107 - 48


def private_root() -> Path:
    """This user's folder for every run's private files (0700, created on first use). Every
    sandbox masks it whole, so runs stay apart even as one uid (docs/security.md, "Grader
    sandbox"); a folder there that is not this user's own and private is refused."""
    base = Path(tempfile.gettempdir())
    if len(os.fsencode(base)) > _LONGEST_BASE:  # the proxy socket would not fit (docs/security.md)
        base = Path("/tmp")
    root = base / f"evalrun-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700)
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise SandboxUnavailable(
            f"{root} is not a private folder of this user (mode {stat.filemode(info.st_mode)}, "
            f"owner {info.st_uid}); remove it"
        )
    return root


def _hidden_folders() -> list[Path]:
    """The folders of ``_HIDDEN`` that are real folders here (``/var/run`` is often a link)."""
    return [Path(p) for p in _HIDDEN if os.path.isdir(p) and not os.path.islink(p)]


def _shown_again(folder: Path, argv: Sequence[str], hidden: Sequence[Path]) -> list[Path]:
    """The grader's folder, the folders of its program and of the files its argv names, and
    evalrun's own interpreter and code (the relay and the built-in graders run from them), where
    a hidden folder would cover them (an eval or a venv under ``/tmp``): they are bound back in,
    read-only."""
    program = shutil.which(argv[0])
    wanted = [folder, *_OWN, *([Path(program).resolve().parent] if program else [])]
    for part in argv:
        path = Path(part)
        if path.is_absolute() and existing(path):
            wanted.append(path if path.is_dir() else path.parent)
    under = [p for p in dict.fromkeys(wanted) if any(p.is_relative_to(h) for h in hidden)]
    return [p for p in under if not any(p != q and p.is_relative_to(q) for q in under)]


def _visible(
    path: Path, masked: Sequence[Path], shown: Sequence[Path], hidden: Sequence[Path]
) -> bool:
    """Whether ``path`` is in a ``strict`` sandbox's view: masks cover the folders bound back
    in, which cover the hidden folders."""
    if any(path.is_relative_to(p) for p in masked):
        return False
    return any(path.is_relative_to(p) for p in shown) or not any(
        path.is_relative_to(p) for p in hidden
    )


def _listening_unix_sockets() -> list[Path]:
    """Path Unix sockets bound on this host (``/proc/net/unix``): ``strict`` masks each, so a
    grader cannot reach a host service, or one another grader planted, through one."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as table:
            rows = table.read().splitlines()[1:]
    except OSError:
        return []
    found = []
    for row in rows:
        fields = row.split(maxsplit=7)
        if len(fields) == 8 and fields[7].startswith("/"):
            path = Path(fields[7])
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(path.lstat().st_mode):
                    found.append(path)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Sandbox:
    """How one grader process is wrapped; ``masked`` are evalrun's own files and folders."""

    level: Level
    masked: tuple[Path, ...] = ()
    #: where each ``strict`` grader run gets its scratch folder (in the run's private folder)
    scratch: Path | None = None
    #: more bwrap binds for ``strict`` (flag, path), such as the bytecode folder (bytecode.py)
    binds: tuple[tuple[str, Path], ...] = ()

    def wrap(
        self,
        argv: Sequence[str],
        cwd: Path,
        proxy: ProxyRoute | None = None,
        readable: Sequence[Path] = (),
    ) -> list[str]:
        """``cwd`` is the grader's own folder: its working folder, except in ``strict``, where it
        is read-only and the grader works in a private scratch folder instead. ``readable``
        folders (a case's workspace, docs/agents.md) are bound in read-only over the masks."""
        if self.level == "none" or shutil.which(argv[0]) is None:
            # A program that cannot be found is left for the launcher to report as usual.
            return list(argv)
        bwrap = shutil.which("bwrap") or "bwrap"
        command = list(argv)
        shown_over = [a for path in readable for a in ("--ro-bind", str(path), str(path))]
        if self.level != "strict":
            args = [bwrap, *_namespace_args(), "--dev-bind", "/", "/", "--proc", "/proc"]
            return [*args, *self._masks(), *shown_over, "--chdir", str(cwd), "--", *command]
        hidden = _hidden_folders()
        base = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net"]
        args = [bwrap, *_namespace_args(), *base]
        args += [a for folder in hidden for a in ("--tmpfs", str(folder))]
        shown = _shown_again(cwd, argv, hidden)
        for path in shown:
            args += ["--ro-bind", str(path), str(path)]
        args += self._masks()
        for flag, path in self.binds:  # after the hidden folders: a bind may sit below one
            args += [flag, str(path), str(path)]
        args += shown_over
        private = tempfile.mkdtemp(dir=self.scratch)
        args += ["--bind", private, private, "--setenv", "TMPDIR", private]
        if proxy is not None:
            sock = str(proxy.socket_path)
            args += ["--ro-bind", sock, sock]
            relay = [sys.executable, "-I", "-S", str(_RELAY), str(proxy.port)]
            command = [*relay, sock, "--", *argv]
        for path in _listening_unix_sockets():
            if _visible(path, self.masked, shown, hidden):
                args += ["--ro-bind", "/dev/null", str(path)]
        return [*args, "--chdir", private, "--", *command]

    def _masks(self) -> list[str]:
        args = []
        for path in self.masked:
            if path.is_dir():
                args += ["--tmpfs", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        return args

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

    def masking(self, paths: Iterable[Path]) -> SandboxPolicy:
        """This policy with ``paths`` masked too: a bundle folder chosen late, or a Ray
        worker's copy of its driver's masks (docs/distributed.md)."""
        masked = dict.fromkeys((*self.masked, *(Path(p).resolve() for p in paths)))
        return dataclasses.replace(self, masked=tuple(masked))

    def for_grader(self, requested: Requested | None) -> Sandbox:
        level = self.default if requested is None or requested == "auto" else requested
        return Sandbox(level, self.masked, self.scratch)


def resolve_policy(
    run_level: Requested, grader_levels: Iterable[Requested | None], masked: Iterable[Path]
) -> SandboxPolicy:
    """Raise ``SandboxUnavailable`` for a level asked for explicitly that cannot be had."""
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
    sandboxed = default != "none" or bool(explicit - {"none"})
    own = [*masked, private_root()] if sandboxed else masked
    masks = tuple(dict.fromkeys(Path(p).resolve() for p in own))
    strict = default == "strict" or "strict" in explicit
    return SandboxPolicy(default=default, masked=masks, notice=notice, isolates_network=strict)


def agent_wrap(
    level: Level,
    argv: Sequence[str],
    workspace: Path,
    masked: Sequence[Path],
    readable: Sequence[Path] = (),
) -> list[str]:
    """An agent's argv in its sandbox (docs/agents.md, "The agent's sandbox"): its workspace
    writable and its working folder, ``readable`` (its input files) read-only, ``masked`` (the
    run's files, every other workspace) hidden. ``strict``: the rest of the file system
    read-only, ``/tmp`` and ``/run`` private and empty, the host's Unix sockets masked; the
    network stays, since an agent reaches its model through it. ``process``: the file system as
    the user has it, minus the masks. Both: a PID namespace, so nothing the agent starts
    outlives it."""
    if level == "none" or shutil.which(argv[0]) is None:
        return list(argv)  # a program that cannot be found is reported by the target
    bwrap = shutil.which("bwrap") or "bwrap"
    masks = Sandbox(level, tuple(masked))._masks()
    own = ["--bind", str(workspace), str(workspace)]
    own += [a for path in readable for a in ("--ro-bind", str(path), str(path))]
    if level == "process":
        args = [bwrap, *_namespace_args(), "--dev-bind", "/", "/", "--proc", "/proc"]
        return [*args, *masks, *own, "--chdir", str(workspace), "--", *argv]
    hidden = _hidden_folders()
    args = [bwrap, *_namespace_args(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += [a for folder in hidden for a in ("--tmpfs", str(folder))]
    shown = _shown_again(workspace, argv, hidden)
    for path in shown:
        args += ["--ro-bind", str(path), str(path)]
    args += [*masks, *own]
    for path in _listening_unix_sockets():
        if _visible(path, masked, shown, hidden):
            args += ["--ro-bind", "/dev/null", str(path)]
    return [*args, "--setenv", "TMPDIR", "/tmp", "--chdir", str(workspace), "--", *argv]


def script_wrap(
    level: Level,
    argv: Sequence[str],
    cwd: Path,
    masked: Sequence[Path],
    readable: Sequence[Path] = (),
    writable: Path | None = None,
) -> list[str]:
    """A workspace's setup or teardown script, or a tool's script, in its sandbox (docs/agents.md,
    "The scripts' sandbox"). At both levels the file system is read-only but for ``writable``
    (a setup script's workspace; a tool script has none) and a private, empty ``/tmp``; the home
    folder is an empty scratch folder; ``masked`` (the run's files, every workspace) hidden;
    ``cwd``, ``readable`` (the eval file's folder) and the folders of the program and of the
    files argv names visible, read-only. ``strict`` also takes the network and the host's Unix
    sockets. A PID namespace, so nothing a script starts outlives it."""
    if level == "none" or shutil.which(argv[0]) is None:
        return list(argv)  # a program that cannot be found is reported by the caller
    bwrap = shutil.which("bwrap") or "bwrap"
    hidden = [*_hidden_folders(), *_home_folder()]
    args = [bwrap, *_namespace_args(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if level == "strict":
        args.append("--unshare-net")
    args += [a for folder in hidden for a in ("--tmpfs", str(folder))]
    shown = _shown_again(cwd, [*argv, *(str(p) for p in readable)], hidden)
    for path in shown:
        args += ["--ro-bind", str(path), str(path)]
    args += Sandbox(level, tuple(masked))._masks()
    if writable is not None:
        args += ["--bind", str(writable), str(writable)]
    if level == "strict":
        for path in _listening_unix_sockets():
            if _visible(path, masked, shown, hidden):
                args += ["--ro-bind", "/dev/null", str(path)]
    return [*args, "--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd), "--", *argv]


def _home_folder() -> list[Path]:
    """The user's home folder, where secrets (``~/.ssh``, ``~/.aws``) live, when it is a folder
    of its own (not ``/``)."""
    home = Path.home()
    return [home] if home.is_dir() and home != Path("/") else []
