"""YAML with limits (docs/security.md): an alias bomb, a huge document and absurd nesting are
refused with exit 2 and a ``file:line:`` message, quickly, without eating memory. The CLI runs
under a 2 GB address-space limit, so a regression fails with MemoryError instead of swapping."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalrun.yamlsource import MAX_YAML_BYTES
from tests.fault_helpers import cli_env
from tests.hardening_helpers import run_cli_limited

TWO_GB = 2 * 1024**3


def _alias_bomb() -> str:
    """Ten levels of nine aliases: 9**10 (3.5 billion) strings once expanded."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{refs}]")
    lines.append("description: " + "*a9")
    lines.append("graders: [{type: contains, value: lol}]")
    lines.append("tests: [{id: one, input: q, output: lol}]")
    return "\n".join(lines) + "\n"


CASES = {
    "alias-bomb": (_alias_bomb, r":\d+: YAML aliases expand to more than 100000 nodes"),
    "huge": (
        lambda: "tests:\n" + "  - {id: x, input: q}\n" * (MAX_YAML_BYTES // 20 + 1),
        rf":1: \d+ bytes is over the {MAX_YAML_BYTES}-byte limit",
    ),
    "deep": (lambda: "tests: " + "[" * 5000 + "]" * 5000 + "\n", r":\d+: nested too deeply"),
}


@pytest.mark.parametrize(
    ("kind", "command"),
    [
        pytest.param(
            kind,
            command,
            id=f"{kind}-{command}",
            # a run reads the file with validate's loader: one kind of it in the default run
            marks=pytest.mark.slow if command == "run" and kind != "alias-bomb" else (),
        )
        for kind in CASES
        for command in ("validate", "run")
    ],
)
def test_hostile_yaml_is_refused_with_file_and_line(
    tmp_path: Path, kind: str, command: str
) -> None:
    make, message = CASES[kind]
    path = tmp_path / f"{kind}.eval.yaml"
    path.write_text(make())
    args = [command, str(path)] if command == "validate" else [str(path), "--no-cache"]
    result = run_cli_limited(*args, cwd=tmp_path, env=cli_env(), timeout=60, as_=TWO_GB)

    assert result.returncode == 2, result.stderr[-2000:]
    assert re.search(re.escape(str(path)) + message, result.stderr), result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
    assert not (tmp_path / ".evalrun").exists()  # nothing ran
