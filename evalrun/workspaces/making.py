"""Filling a fresh workspace folder: the template copied, then each local repository cloned and
checked out (docs/agents.md, "Lifecycle"). Nothing here reaches the network: a repository is a
path on this machine and git is told to refuse every other transport."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from evalrun.errors import EvalrunError
from evalrun.spec.workspace import RepoSource, WorkspaceSpec

#: git may read local repositories only (no fetch of a submodule or alternate over a network)
_GIT_ENV = {"GIT_ALLOW_PROTOCOL": "file", "GIT_TERMINAL_PROMPT": "0"}
_GIT_TIMEOUT_S = 300


class WorkspaceError(EvalrunError):
    """The workspace could not be made; the message names the key at fault."""


def fill(workspace: Path, spec: WorkspaceSpec, eval_dir: Path) -> None:
    """Copy the template into ``workspace`` (an empty folder) and clone the repositories."""
    if spec.template is not None:
        template = (eval_dir / spec.template).resolve()
        if not template.is_dir():
            raise WorkspaceError(f"workspace.template: {template} is not a folder")
        shutil.copytree(template, workspace, symlinks=True, dirs_exist_ok=True)
    for index, repo in enumerate(spec.repos):
        _clone(workspace, repo, eval_dir, f"workspace.repos[{index}]")


def _clone(workspace: Path, repo: RepoSource, eval_dir: Path, where: str) -> None:
    source = (eval_dir / repo.source).resolve()
    if not source.exists():
        raise WorkspaceError(f"{where}.source: {source} does not exist")
    into = (workspace / repo.into).resolve()
    if not into.is_relative_to(workspace):
        raise WorkspaceError(f"{where}.into: {repo.into!r} is outside the workspace")
    staging = workspace.parent / f".clone-{workspace.name}"
    try:
        _git("clone", ["--quiet", "--no-hardlinks", "--", str(source), str(staging)], where)
        _git("checkout", ["--quiet", "--detach", repo.ref], where, cwd=staging)
        shutil.copytree(staging, into, symlinks=True, dirs_exist_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _git(verb: str, args: list[str], where: str, cwd: Path | None = None) -> None:
    git = shutil.which("git")
    if git is None:
        raise WorkspaceError(f"{where}: git is not on PATH")
    try:
        done = subprocess.run(
            [git, verb, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            env={**os.environ, **_GIT_ENV},
        )
    except subprocess.TimeoutExpired:
        raise WorkspaceError(f"{where}: git {verb} took over {_GIT_TIMEOUT_S}s") from None
    if done.returncode != 0:
        detail = done.stderr.strip()[-1000:] or f"exit {done.returncode}"
        raise WorkspaceError(f"{where}: git {verb} failed: {detail}")
