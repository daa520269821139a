"""`evalrun cache clear` (docs/config.md, "Caches"): the project's response cache goes, files
beside it stay; `--user` removes the one XDG user cache folder that grader bytecode lives in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalrun.launcher.bytecode import pycache_prefix
from evalrun.targets.stores.cache import FILENAME, ResponseCache
from evalrun.userdirs import user_cache_dir
from tests.conftest import run_cli


@pytest.mark.slow
def test_clear_removes_the_response_cache_the_config_names_and_nothing_else(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "shared-cache"
    ResponseCache(cache).close()  # a real database, as a run leaves it
    assert (cache / FILENAME).is_file()
    (cache / "notes.txt").write_text("mine")
    (tmp_path / "evalrun.toml").write_text('cache-dir = "shared-cache"\n')
    xdg = tmp_path / "xdg"
    (xdg / "evalrun" / "pycache").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALRUN_")}
    env["XDG_CACHE_HOME"] = str(xdg)
    (tmp_path / "sub").mkdir()
    done = run_cli("cache", "clear", cwd=tmp_path / "sub", env=env)
    assert done.returncode == 0, done.stderr
    assert f"removed the response cache in {cache}" in done.stdout
    assert sorted(p.name for p in cache.iterdir()) == ["notes.txt"]
    assert (xdg / "evalrun").is_dir()  # without --user the user cache stays
    done = run_cli("cache", "clear", "--user", cwd=tmp_path / "sub", env=env)
    assert done.returncode == 0, done.stderr
    assert "no response cache in" in done.stdout
    assert not (xdg / "evalrun").exists() and xdg.is_dir()


def test_the_user_cache_follows_xdg_and_holds_the_bytecode(tmp_path: Path) -> None:
    assert user_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "evalrun"
    home = {"HOME": str(tmp_path), "XDG_CACHE_HOME": "relative/ignored"}
    assert user_cache_dir(home) == tmp_path / ".cache" / "evalrun"
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert pycache_prefix(env) == user_cache_dir(env) / "pycache"
