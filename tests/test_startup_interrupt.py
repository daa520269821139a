"""Ctrl-C while ``evalrun`` starts (imports, the command's modules, preflight, the proxy) exits
130 without a traceback (docs/results.md, exit codes). The signal is sent from a real
``python -m evalrun`` process's own progress, read from ``-X importtime``: each module's line is
printed as its import ends, so the points do not depend on how fast the machine is."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fault_helpers import cli_env, write_suite

#: A grader that never answers: the run cannot end before the signal, whenever it lands.
HANGING_GRADER = "import time\ntime.sleep(120)\n"

#: (module whose import line triggers the signal, whether the command itself has not started
#: yet, so the one line is all stderr holds). ``None``: the first module imported once
#: ``evalrun/__main__.py`` runs, i.e. as soon as evalrun's own code is in control.
POINTS = [
    (None, True),
    ("typer", True),
    ("evalrun.cli", True),
    ("evalrun.runner.options", False),
    ("evalrun.runner.preflight", False),
    ("evalrun.runner.runner", False),
    ("evalrun.runner.judging", False),  # the judge proxy is being started
]


def _suite(folder: Path) -> Path:
    (folder / "grader.py").write_text(textwrap.dedent(HANGING_GRADER))
    grader = {
        "name": "hangs",
        "command": [sys.executable, "grader.py"],
        "target": {"max_calls": 1},
        "timeout": 120,
    }
    return write_suite(
        folder,
        graders=[grader],
        cases=[{"id": "c1", "input": "q", "output": "a"}],
        targets=[{"name": "judge", "kind": "mock", "default": "yes"}],
    )


def _module(line: str) -> str | None:
    """The module an ``import time: self | cumulative | name`` line is about."""
    if not line.startswith("import time:"):
        return None
    return line.rsplit("|", 1)[-1].strip()


#: The ``evalrun`` console script of this interpreter's environment (it imports evalrun.cli
#: itself before it calls ``entry``).
SCRIPT = Path(sys.executable).parent / "evalrun"


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(("marker", "before_command"), POINTS)
def test_ctrl_c_during_start_up_exits_130_without_a_traceback(
    tmp_path: Path, marker: str | None, before_command: bool
) -> None:
    _interrupt(tmp_path, [sys.executable, "-m", "evalrun"], marker, before_command)


@pytest.mark.skipif(not SCRIPT.is_file(), reason="no evalrun script beside this interpreter")
def test_ctrl_c_while_the_evalrun_script_loads_exits_130_without_a_traceback(
    tmp_path: Path,
) -> None:
    _interrupt(tmp_path, [str(SCRIPT)], None, True)


def _interrupt(
    tmp_path: Path, evalrun: list[str], marker: str | None, before_command: bool
) -> None:
    """Start a run, send SIGINT once ``marker`` is imported, check how the run ended."""
    suite = _suite(tmp_path)
    proc = subprocess.Popen(
        [*evalrun, str(suite), "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        env=cli_env(PYTHONPROFILEIMPORTTIME="1"),  # -X importtime, for the script too
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    evalrun_loaded = False
    for line in proc.stderr:
        seen.append(line)
        name = _module(line)
        if marker is None:
            if evalrun_loaded and name is not None:
                break
            evalrun_loaded = evalrun_loaded or name == "evalrun"
        elif name == marker:
            break
    else:
        pytest.fail(f"evalrun ended before it imported {marker}: {''.join(seen)[-2000:]}")
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    text = "".join(seen) + rest
    said = [line for line in text.splitlines() if _module(line) is None and line.strip()]
    assert proc.returncode == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert said, "a Ctrl-C must say what happened"
    if before_command:
        assert said == ["evalrun: interrupted"]


def test_an_interrupt_wrapped_while_a_class_is_made_counts_as_a_ctrl_c() -> None:
    """Python 3.11 wraps an exception raised in ``__set_name__`` (a pydantic model's fields, as
    a command's module loads) in a RuntimeError: CI saw such a Ctrl-C end with a traceback."""
    from evalrun.cli import _by_ctrl_c

    class Field:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    with pytest.raises(BaseException) as caught:  # noqa: PT011 (RuntimeError on 3.11 only)
        type("Settings", (), {"field": Field()})
    assert _by_ctrl_c(caught.value)
    assert not _by_ctrl_c(RuntimeError("no interrupt"))
