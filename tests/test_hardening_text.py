"""Text is never fatal (docs/security.md): a lone UTF-16 surrogate in a grader's output or in a
judge's reply is repaired where it enters and flagged, every case is recorded exactly once, the
bundle agrees with itself, and a result that cannot be written fails the run with exit 3."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tests.fault_helpers import cli_env, one_result_per_case, run_suite, write_suite
from tests.hardening_helpers import (
    RecordingOpenAI,
    assert_bundle_agrees,
    openai_target,
    run_cli_limited,
)

#: Prints its JSON by hand so the lone surrogate travels as the escape ``\ud83d``, as a grader
#: echoing a judge's truncated emoji would.
ECHO_GRADER = r"""
import json, sys
case = json.load(sys.stdin)
reason = "ends in a cut emoji \\ud83d" if case["case_id"] == "cut-emoji" else "fine"
sys.stdout.write('{"score": 1, "reason": "' + reason + '"}')
"""

JUDGED_GRADER = """
import json
from grader_sdk import TargetClient, script_grader


@script_grader
def grade(inp):
    reply = TargetClient.from_env(timeout=30).invoke(inp.question)
    verdict = json.loads(reply.raw_text)["verdict"]
    return {"score": 1.0 if verdict == "yes" else 0.0, "reason": reply.raw_text}
"""


@pytest.mark.parametrize("n_cases", [2, 6])
def test_a_lone_surrogate_in_a_grader_reason_loses_no_case(tmp_path: Path, n_cases: int) -> None:
    (tmp_path / "grader.py").write_text(ECHO_GRADER)
    ids = ["cut-emoji", *(f"case-{i}" for i in range(1, n_cases))]
    path = write_suite(
        tmp_path,
        graders=[{"name": "echo", "command": [sys.executable, "grader.py"]}],
        cases=[{"id": i, "input": "q", "output": "a"} for i in ids],
        targets=[{"name": "judge", "kind": "mock", "default": "{}"}],
    )
    out = tmp_path / "out"
    result = run_cli(str(path), "--out", str(out), cwd=tmp_path, env=cli_env())

    assert result.returncode == 0, result.stdout + result.stderr  # every case passed, honestly
    assert "Traceback" not in result.stderr and "interrupted" not in result.stdout
    rows, summary = [json.loads(line) for line in (out / "results.jsonl").open()], None
    by_id = one_result_per_case(rows, ids)
    grader = by_id["cut-emoji"]["graders"][0]
    assert grader["reason"] == "ends in a cut emoji \ufffd"
    assert grader["warnings"] == [
        "grader output held 1 lone UTF-16 surrogate(s), replaced with U+FFFD"
    ]
    assert all(r["status"] == "passed" for r in rows)
    summary = assert_bundle_agrees(out)
    assert summary["complete"] is True and summary["interrupted"] is False
    assert summary["counts"]["total"] == n_cases


def test_a_lone_surrogate_in_a_judge_reply_is_repaired_once_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "grader.py").write_text(textwrap.dedent(JUDGED_GRADER))
    ids = ["a", "b", "c"]
    with RecordingOpenAI() as fake:
        path = write_suite(
            tmp_path,
            graders=[
                {
                    "name": "judged",
                    "command": [sys.executable, "grader.py"],
                    "target": {"max_calls": 2},
                }
            ],
            cases=[{"id": i, "input": "Right? [fault:surrogate]", "output": "yes"} for i in ids],
            targets=[openai_target(fake)],
        )
        out = tmp_path / "out"
        result = run_suite(path, out, FAKE_JUDGE_KEY="sk-fake-judge-key")
        upstream_calls = fake.count

    assert result.returncode == 0, result.stdout + result.stderr
    assert upstream_calls == 3  # each judge call made (and billed) once: no 500, no retry
    by_id = one_result_per_case([json.loads(line) for line in (out / "results.jsonl").open()], ids)
    for row in by_id.values():
        assert row["status"] == "passed", row
        assert row["graders"][0]["reason"] == '{"verdict": "yes", "note": "a cut emoji \ufffd"}'
        assert row["graders"][0]["proxy"]["calls"] == 1
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").open()]
    assert sorted(c["case_id"] for c in calls) == ids
    for call in calls:
        assert call["status"] == "ok" and "\ufffd" in call["response"]
        assert call["warnings"] == [
            "the judge's reply held 1 lone UTF-16 surrogate(s), replaced with U+FFFD"
        ]
    assert assert_bundle_agrees(out)["counts"]["passed"] == 3


def test_a_result_that_cannot_be_written_fails_the_run_loudly(tmp_path: Path) -> None:
    """The file-size limit (RLIMIT_FSIZE, inherited by nothing but this run) makes the disk
    "full" after a few results: the run must say so and exit 3, never 0."""
    ids = [f"case-{i:02d}" for i in range(12)]
    path = write_suite(
        tmp_path,
        graders=[{"type": "contains", "value": "a"}],
        cases=[{"id": i, "input": "q", "output": "a" * 200} for i in ids],
        targets=[{"name": "judge", "kind": "mock", "default": "{}"}],
    )
    out = tmp_path / "out"
    result = run_cli_limited(
        str(path), "--out", str(out), "--no-cache", cwd=tmp_path, env=cli_env(), fsize=3000
    )

    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot write results.jsonl" in result.stderr, result.stderr
    assert "File too large" in result.stderr
    assert "Traceback" not in result.stderr


#: text with lone and paired surrogates, backslashes and a ``u`` among ordinary characters
_TRICKY_TEXT = st.lists(
    st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude00", "\\", "u", "d", "8"])
    | st.characters(),
    max_size=8,
).map("".join)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | _TRICKY_TEXT,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(_TRICKY_TEXT, inner, max_size=4)
        ),
        max_leaves=12,
    ),
    st.booleans(),
)
def test_the_surrogate_precheck_never_misses_one(value: object, ascii_only: bool) -> None:
    """Whatever JSON a grader prints (escaped or raw UTF-8), the pre-check sends every text whose
    parsed data holds a surrogate to the full repair."""
    from evalrun.safetext import json_text_may_hold_surrogates, repair_json

    text = json.dumps(value, ensure_ascii=ascii_only)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # raw lone surrogates are not valid UTF-8: no grader prints them
        return
    if repair_json(json.loads(text))[1]:
        assert json_text_may_hold_surrogates(text)
    assert json_text_may_hold_surrogates('{"reason": "cut \\ud83d"}')
    assert not json_text_may_hold_surrogates('{"reason": "caf\\u00e9 \u00e9"}')
