"""Graders keep their bytecode in evalrun's folder of the user's cache (docs/performance.md,
"Bytecode"): real grader processes, some in the strict sandbox, and what they report of their
own imports."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalrun.launcher import bytecode
from evalrun.launcher.launch import LaunchContext, launch_grader
from evalrun.launcher.sandbox import SandboxPolicy, why_unavailable
from evalrun.spec.models import GraderSpec, TestCase

needs_bwrap = pytest.mark.skipif(why_unavailable() is not None, reason=str(why_unavailable()))

CASE = TestCase.model_validate({"id": "c1", "input": "q", "output": "a"})

#: reports where each module it imports keeps its bytecode, whether that bytecode matches the
#: source (what the import system checks before it uses it), and whether it could overwrite it
REPORTER = """
import importlib.util, json, os, sys
import grader_sdk, helper

def seen(module):
    cached = module.__cached__
    valid = False
    if os.path.exists(cached):
        with open(cached, "rb") as f:
            head = f.read(16)
        st = os.stat(module.__file__)
        valid = (head[:4] == importlib.util.MAGIC_NUMBER
                 and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                 and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)
    try:
        open(cached, "ab").close()
        writable = True
    except OSError:
        writable = False
    return {"cached": cached, "valid": valid, "writable": writable}

report = {"sdk": seen(grader_sdk), "helper": seen(helper),
          "dont_write": sys.flags.dont_write_bytecode}
print(json.dumps({"score": 1.0, "reason": json.dumps(report)}))
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh user cache folder, and graders whose helper module lives in a read-only folder of
    its own on PYTHONPATH (inside the eval's folder, which strict shows again, read-only)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    lib = tmp_path / "eval" / "lib"
    lib.mkdir(parents=True)
    (lib / "helper.py").write_text("ANSWER = 42\n")
    lib.chmod(0o555)
    monkeypatch.setenv("PYTHONPATH", str(lib))
    bytecode.prepare.cache_clear()
    yield tmp_path / "cache" / "evalrun" / "pycache"
    lib.chmod(0o755)
    bytecode.prepare.cache_clear()


def report(
    tmp_path: Path, sandbox: SandboxPolicy | None = None, env: list[str] | None = None
) -> dict:
    folder = tmp_path / "eval"
    folder.mkdir(exist_ok=True)
    (folder / "g.py").write_text(textwrap.dedent(REPORTER))
    spec = GraderSpec(name="g", command=[sys.executable, "g.py"], timeout=30, env=env or [])
    ctx = LaunchContext(eval_dir=folder, judge=None, sandbox=sandbox or SandboxPolicy())
    result = asyncio.run(launch_grader(spec, CASE, "a", ctx)).result
    assert result.score == 1.0, (result.reason, result.stderr_tail)
    return json.loads(result.reason or "")


def sdk_bytecode(prefix: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in prefix.rglob("grader_sdk/*.pyc")}


def test_the_sdk_is_compiled_once_into_the_cache_and_reused_without_writing(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = report(tmp_path)
    compiled = sdk_bytecode(cache)
    assert compiled, f"no grader_sdk bytecode under {cache}"
    assert Path(first["sdk"]["cached"]).is_relative_to(cache), first
    assert first["sdk"]["valid"]
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    bytecode.prepare.cache_clear()  # a second run of evalrun
    second = report(tmp_path)
    assert second["dont_write"] == 0  # lifted for graders that write to the prefix
    assert second["sdk"] == first["sdk"]  # the same valid bytecode, so the import used it
    assert sdk_bytecode(cache) == compiled  # and nothing was compiled again


def test_a_grader_whose_env_names_the_variables_keeps_the_users_environment(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    seen = report(tmp_path, env=["PYTHONDONTWRITEBYTECODE"])
    assert seen["dont_write"] == 1
    assert not Path(seen["helper"]["cached"]).is_relative_to(cache), seen


def test_a_read_only_source_folder_still_gets_bytecode(tmp_path: Path, cache: Path) -> None:
    seen = report(tmp_path)["helper"]
    assert Path(seen["cached"]).is_relative_to(cache), seen
    assert seen["valid"]  # written by the grader, next to nothing of the read-only folder


def test_a_prefix_the_user_set_is_kept(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(mine))
    seen = report(tmp_path)["sdk"]
    assert Path(seen["cached"]).is_relative_to(mine) and seen["valid"], seen
    assert not cache.exists()


@needs_bwrap
def test_strict_graders_read_the_sdks_bytecode_and_write_none(tmp_path: Path, cache: Path) -> None:
    """Bytecode in the prefix runs in every later grader of the user, so a strict grader may
    plant none: not for its own modules either (they would be another grader's next time)."""
    seen = report(tmp_path, SandboxPolicy(default="strict"))
    assert Path(seen["helper"]["cached"]).is_relative_to(cache), seen
    assert not seen["helper"]["writable"], seen
    assert seen["sdk"]["valid"] and not seen["sdk"]["writable"], seen
