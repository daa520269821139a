"""`evalrun grader check`: the conformance kit passes a good grader and names a bad one's faults."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.conftest import run_cli


def test_builtin_grader_passes_the_check():
    result = run_cli("grader", "check", "--", sys.executable, "-m", "graders.contextual_precision")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "follows the protocol on all 4 payloads" in result.stdout


@pytest.mark.slow
def test_broken_grader_is_reported(tmp_path):
    grader = tmp_path / "broken.py"
    grader.write_text(
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        "if data['output'] is None:\n"
        "    raise RuntimeError('cannot handle a missing output')\n"
        "print(json.dumps({'score': 2.0}))\n"
    )
    wide = {**os.environ, "COLUMNS": "250"}  # one finding per line, unwrapped
    result = run_cli("grader", "check", "--", sys.executable, str(grader), env=wide)
    assert result.returncode == 1
    assert "4 of 4 payloads broke the protocol" in result.stdout
    assert "between 0 and 1" in result.stdout
    assert "RuntimeError" in result.stdout


def test_debug_lines_beside_the_result_are_flagged(tmp_path):
    """#32: a grader that prints a debug line before its JSON does not follow the protocol."""
    grader = tmp_path / "chatty.py"
    grader.write_text(
        "import json, sys\n"
        "print('debug: starting')\n"
        "data = json.load(sys.stdin)\n"
        "print(json.dumps({'score': 0.0, 'reason': 'wrong'}))\n"
    )
    wide = {**os.environ, "COLUMNS": "250"}
    result = run_cli(
        "grader", "check", "--mode", "process", "--", sys.executable, str(grader), env=wide
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 of 4 payloads broke the protocol" in result.stdout
    assert "stdout must carry the result only" in result.stdout
    assert "failed" in result.stdout and "passed" not in result.stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_js_grader_passes_in_both_modes():
    result = run_cli("grader", "check", "--", "node", "graders/js/contextual-precision.mjs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "follows the protocol on all 4 payloads (also in stream mode)" in result.stdout
    assert result.stdout.count("serve") >= 4


@pytest.mark.slow
def test_a_grader_that_does_not_serve_still_passes_per_process(tmp_path):
    grader = tmp_path / "once.py"
    grader.write_text("import sys\nsys.stdin.read()\nprint('{\"score\": 1}')\n")
    wide = {**os.environ, "COLUMNS": "250"}
    result = run_cli("grader", "check", "--", sys.executable, str(grader), env=wide)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "does not answer in stream mode" in result.stdout
    strict = run_cli(
        "grader", "check", "--mode", "serve", "--timeout", "2", "--", sys.executable, str(grader)
    )
    assert strict.returncode == 1


def test_a_served_answer_without_the_nonce_is_reported(tmp_path):
    """A hand-written stream-mode grader must echo each case line's nonce (#31)."""
    grader = tmp_path / "no_nonce.py"
    grader.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'exit': 0, 'result': {'score': 1}}), flush=True)\n"
    )
    wide = {**os.environ, "COLUMNS": "250"}
    result = run_cli(
        "grader", "check", "--mode", "serve", "--", sys.executable, str(grader), env=wide
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "answered without the nonce of the case in flight" in result.stdout
