"""Bytecode for grader processes, compiled once per machine (docs/performance.md, "Bytecode").

Every grader is a new Python process; without usable bytecode each one compiles the SDK from
source. Graders get ``PYTHONPYCACHEPREFIX``, a writable folder in the user's cache, so their
bytecode lands there even when the source folder is read-only or the ``strict`` sandbox makes the
whole file system read-only (it binds the folder read-only: strict graders read, never write), and the first grader on a machine
to import a module leaves its bytecode for every later one. evalrun itself compiles the SDK and
the built-in graders into it, the part a strict grader cannot overwrite.
"""

from __future__ import annotations

import compileall
import functools
import importlib.util
import os
import sys
from collections.abc import Collection, Mapping
from pathlib import Path

from evalrun.userdirs import user_cache_dir

PREFIX_VARIABLE = "PYTHONPYCACHEPREFIX"
NO_WRITE_VARIABLE = "PYTHONDONTWRITEBYTECODE"
#: the packages evalrun compiles for its graders (found, not imported: the launcher does not
#: import the SDK, docs/architecture.md)
PACKAGES = ("grader_sdk", "graders")


def pycache_prefix(env: Mapping[str, str]) -> Path:
    """The prefix the user set, else ``pycache`` in evalrun's user cache folder."""
    chosen = env.get(PREFIX_VARIABLE)
    if chosen:
        return Path(chosen)
    return user_cache_dir(env) / "pycache"


@functools.lru_cache(maxsize=4)
def prepare(prefix: Path) -> tuple[Path, ...] | None:
    """Compile the SDK and the built-in graders into ``prefix`` with this interpreter (files
    already up to date are skipped); the folders that now hold their bytecode, or None when the
    prefix cannot be written (graders then compile as before)."""
    compiled = []
    previous = sys.pycache_prefix
    sys.pycache_prefix = str(prefix)  # where compileall, like the import system, writes
    try:
        prefix.mkdir(parents=True, exist_ok=True)
        for package in PACKAGES:
            spec = importlib.util.find_spec(package)
            folders = (spec.submodule_search_locations if spec else None) or []
            for folder in folders:
                compileall.compile_dir(folder, quiet=2)
                compiled.append(prefix / os.path.abspath(folder).lstrip(os.sep))
    except OSError:
        return None
    finally:
        sys.pycache_prefix = previous
    return tuple(path for path in compiled if path.is_dir())


def use_pycache(env: dict[str, str], allow: Collection[str]) -> None:
    """Point a grader's bytecode at the prefix. ``PYTHONDONTWRITEBYTECODE`` goes: with a prefix
    Python reads bytecode only there, so a grader that may not write would compile every module
    it imports, the standard library's too, on every start. A prefix the user set is kept with
    whatever they set beside it, and a grader whose ``env:`` names either variable gets the
    user's environment as it is."""
    if set(allow) & {PREFIX_VARIABLE, NO_WRITE_VARIABLE} or PREFIX_VARIABLE in env:
        return
    prefix = pycache_prefix(env)
    if prepare(prefix) is not None:
        env[PREFIX_VARIABLE] = str(prefix)
        env.pop(NO_WRITE_VARIABLE, None)


def notice(env: Mapping[str, str]) -> str | None:
    """What a run says when it lets graders write bytecode the user's environment forbids."""
    if env.get(NO_WRITE_VARIABLE) and PREFIX_VARIABLE not in env:
        return (
            f"graders write their bytecode to {pycache_prefix(env)} although "
            f"{NO_WRITE_VARIABLE} is set (a grader whose env: names it keeps it; "
            "docs/performance.md, 'Bytecode')"
        )
    return None


def strict_binds(env: Mapping[str, str]) -> tuple[tuple[str, Path], ...]:
    """bwrap binds for a strict grader: the whole prefix read-only. Bytecode there runs in every
    later grader of the user, of any run, so a grader that may write nowhere else must not plant
    any (docs/security.md, "Grader sandbox"); it reads what evalrun and earlier graders compiled."""
    prefix = pycache_prefix(env)
    if prepare(prefix) is None:
        return ()
    return (("--ro-bind", prefix),)
