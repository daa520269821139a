"""The grader protocol, rule by rule, with real grader processes (Python and shell)."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalrun.launcher.environment import grader_environment
from evalrun.launcher.launch import LaunchContext, launch_grader
from evalrun.launcher.payload import build_payload
from evalrun.launcher.process import run_process
from evalrun.launcher.protocol import interpret
from evalrun.results.models import GraderOutcome
from evalrun.spec.models import GraderSpec, TestCase

CASE = TestCase.model_validate(
    {
        "id": "c1",
        "criteria": "Paris",
        "input": [{"role": "user", "content": "Capital of France?"}],
        "expected_output": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"tool": "search", "input": {"query": "q"}, "output": {"results": ["a"]}}
                ],
            },
            {"role": "assistant", "content": "Paris is the capital."},
        ],
    }
)


def grade(
    tmp_path: Path,
    source: str,
    *,
    timeout: float = 10,
    shell: bool = False,
    output: str | None = "Paris.",
) -> GraderOutcome:
    script = tmp_path / ("g.sh" if shell else "g.py")
    script.write_text(textwrap.dedent(source))
    command = ["sh", str(script)] if shell else [sys.executable, str(script)]
    spec = GraderSpec(name="g", command=command, timeout=timeout)
    ctx = LaunchContext(eval_dir=tmp_path, judge=None)
    return asyncio.run(launch_grader(spec, CASE, output, ctx)).result


def test_payload_follows_the_protocol():
    spec = GraderSpec(name="g", command=["x"], target={"max_calls": 7}, config={"k": 1})
    payload = build_payload(CASE, spec, "Paris.", attempt=2)
    assert payload["protocol"] == "evalrun.grader/1"
    assert payload["question"] == "Capital of France?"
    assert payload["reference_answer"] == "Paris is the capital."
    assert payload["expected_output"][0]["tool_calls"][0] == {
        "tool": "search",
        "input": {"query": "q"},
        "output": {"results": ["a"]},
    }
    assert payload["messages"][-1] == {"role": "assistant", "content": "Paris."}
    assert payload["grader"] == {"name": "g", "max_calls": 7}
    assert payload["config"] == {"k": 1} and payload["attempt"] == 2


def test_json_object_is_graded_and_pass_defaults_to_threshold(tmp_path):
    result = grade(
        tmp_path,
        """
        import json, sys
        data = json.load(sys.stdin)
        print(json.dumps({"score": 0.4, "reasoning": data["question"], "hits": ["h"], "misses": ["m"]}))
        """,
    )
    assert (result.status, result.score, result.passed) == ("failed", 0.4, False)
    assert result.reason == "Capital of France?"
    assert result.hits == ["h"] and result.misses == ["m"]


def test_explicit_pass_and_checks(tmp_path):
    result = grade(
        tmp_path,
        """
        import json
        print(json.dumps({"checks": [{"text": "a", "pass": True}, {"text": "b", "passed": False}]}))
        """,
    )
    assert result.score == 0.5 and result.passed is True  # 0.5 >= default threshold 0.5
    assert [c["text"] for c in result.checks] == ["a", "b"]
    result = grade(tmp_path, 'print(\'{"score": 0.9, "pass": false}\')')
    assert result.status == "failed" and result.score == 0.9


def test_plain_text_exit_zero_is_a_pass(tmp_path):
    result = grade(tmp_path, 'echo "looks right"\n', shell=True)
    assert (result.status, result.score, result.reason) == ("passed", 1.0, "looks right")


def test_plain_text_nonzero_with_empty_stderr_is_a_fail(tmp_path):
    result = grade(tmp_path, 'echo "wrong capital"\nexit 1\n', shell=True)
    assert (result.status, result.score, result.reason) == ("failed", 0.0, "wrong capital")


def test_a_json_result_after_a_debug_line_is_the_result_not_plain_text(tmp_path):
    """#32: ``debug: starting`` then ``{"score": 0.0}`` was recorded as passed, 1.0."""
    result = grade(
        tmp_path,
        """
        import json
        print("debug: starting")
        print(json.dumps({"score": 0.0, "reason": "wrong"}))
        """,
    )
    assert (result.status, result.score, result.reason) == ("failed", 0.0, "wrong")
    assert len(result.warnings) == 1
    assert "other stdout lines" in result.warnings[0] and "debug: starting" in result.warnings[0]


def test_the_last_result_line_wins_and_pretty_printed_json_still_reads(tmp_path):
    last = grade(
        tmp_path,
        """
        import json
        print(json.dumps({"score": 1.0}))
        print(json.dumps({"score": 0.25, "reason": "second"}))
        print("done")
        """,
    )
    assert (last.status, last.score, last.reason) == ("failed", 0.25, "second")
    assert "(2, " in last.warnings[0]
    pretty = grade(
        tmp_path,
        """
        import json
        print("loading")
        print(json.dumps({"score": 0.75, "checks": [{"text": "a", "pass": True}]}, indent=2))
        """,
    )
    assert (pretty.status, pretty.score) == ("passed", 0.75)
    assert [c["text"] for c in pretty.checks] == ["a"]


def test_mixed_output_keeps_the_exit_status_rules(tmp_path):
    failed = grade(
        tmp_path,
        """
        import json, sys
        print("debug")
        print(json.dumps({"score": 0, "reason": "Evaluation failed: boom"}))
        sys.exit(1)
        """,
    )
    assert (failed.status, failed.reason) == ("error", "Evaluation failed: boom")
    not_a_result = grade(tmp_path, 'print("debug")\nprint(\'{"note": 1}\')\n')
    assert not_a_result.status == "error" and "not a result" in not_a_result.reason


def test_exit_3_abstains(tmp_path):
    result = grade(
        tmp_path,
        """
        import json, sys
        print(json.dumps({"reason": "judge unavailable"}))
        sys.exit(3)
        """,
    )
    assert result.status == "unscored" and result.score is None
    assert result.reason == "judge unavailable"


def test_crash_with_stderr_is_an_error_with_exit_code_and_stderr_tail(tmp_path):
    result = grade(tmp_path, "raise RuntimeError('boom in grader')\n")
    assert result.status == "error" and result.exit_code == 1
    assert "RuntimeError: boom in grader" in result.stderr_tail
    assert "boom in grader" in result.reason


def test_garbage_and_contract_violations_are_errors(tmp_path):
    assert grade(tmp_path, "print('{not json')").status == "error"
    for bad in (
        '{"score": 7}',
        '{"score": "high"}',
        '{"reason": "no score"}',
        '{"score": 1, "pass": "yes"}',
    ):
        result = grade(tmp_path, f"print({bad!r})")
        assert result.status == "error", bad
        assert "contract" in result.reason
    assert grade(tmp_path, "pass").reason == "grader exited 0 but printed nothing"


def test_invalid_utf8_is_an_error(tmp_path):
    result = grade(tmp_path, "import sys; sys.stdout.buffer.write(b'\\xff\\xfe score')")
    assert result.status == "error" and "UTF-8" in result.reason


def test_timeout_kills_a_hung_grader_that_ignores_sigterm(tmp_path):
    pidfile = tmp_path / "pid"
    result = grade(
        tmp_path,
        f"""
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
        """,
        timeout=1.0,
    )
    assert result.status == "error" and "timed out" in result.reason
    assert not _alive(int(pidfile.read_text()))


def test_grader_that_never_reads_a_large_stdin(tmp_path):
    spec = GraderSpec(name="g", command=[sys.executable, "-c", "print('fine')"], timeout=10)
    big_case = CASE.model_copy(update={"criteria": "x" * 5_000_000})
    result = asyncio.run(
        launch_grader(spec, big_case, "out", LaunchContext(eval_dir=tmp_path, judge=None))
    ).result
    assert result.status == "passed" and result.reason == "fine"


def test_huge_output_is_cut_off_and_reported(tmp_path):
    result = grade(tmp_path, "import sys\nwhile True: sys.stdout.write('x' * 65536)\n", timeout=20)
    assert result.status == "error" and "stdout limit" in result.reason


def test_forked_child_does_not_outlive_the_grader(tmp_path):
    pidfile = tmp_path / "child"
    result = grade(
        tmp_path,
        f"""
        import os, time
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        open({str(pidfile)!r}, "w").write(str(pid))
        print("done")
        """,
    )
    assert result.status == "passed"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_missing_executable_is_an_error(tmp_path):
    spec = GraderSpec(name="g", command=["definitely-not-a-command-xyz"], timeout=5)
    result = asyncio.run(
        launch_grader(spec, CASE, "o", LaunchContext(eval_dir=tmp_path, judge=None))
    ).result
    assert result.status == "error" and "cannot start" in result.reason


def test_environment_is_scrubbed_of_credentials():
    base = {
        "PATH": "/bin",
        "OPENAI_API_KEY": "sk-1",
        "GITHUB_TOKEN": "t",
        "MY_SECRET_THING": "s",
        "CUSTOM_CRED": "named-in-targets",
        "ALLOWED_API_KEY": "keep",
        "HOME": "/root",
    }
    env = grader_environment(
        secret_names={"CUSTOM_CRED"},
        allow=["ALLOWED_API_KEY"],
        proxy_url="http://127.0.0.1:1",
        proxy_token="tok",
        base=base,
    )
    assert env["PATH"] == "/bin" and env["HOME"] == "/root"
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "MY_SECRET_THING", "CUSTOM_CRED"):
        assert name not in env
    assert env["ALLOWED_API_KEY"] == "keep"
    assert env["AGENTV_TARGET_PROXY_TOKEN"] == env["EVALRUN_PROXY_TOKEN"] == "tok"
    assert env["AGENTV_TARGET_PROXY_URL"] == env["EVALRUN_PROXY_URL"] == "http://127.0.0.1:1"


#: (value in evalrun's environment, what a grader gets)
URL_VALUES = {
    "DATABASE_URL": ("postgres://admin:hunter2@db:5432/app", "postgres://db:5432/app"),
    "HTTPS_PROXY": ("http://proxyuser:pr0xy-pw@proxy.corp:3128", "http://proxy.corp:3128"),
    "PIP_INDEX_URL": (
        "https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.corp/simple",
        "https://pypi.corp/simple",
    ),
    "PIP_EXTRA_INDEX_URL": (
        "https://u1:first-pw@a.corp/simple https://u2:second-pw@b.corp/simple",
        "https://a.corp/simple https://b.corp/simple",
    ),
    "UPSTREAM_REPO": ("https://ghp_R3p0t0k3n@github.com/o/r.git", "https://github.com/o/r.git"),
    "BROKER": ("amqp://guest:p@ss@rabbit/vhost", "amqp://rabbit/vhost"),
    # no userinfo: unchanged
    "DOCS_HOME": (
        "https://example.com/a?mail=x@y.org#p@q",
        "https://example.com/a?mail=x@y.org#p@q",
    ),
    "SCP_LIKE": ("git@github.com:o/r.git", "git@github.com:o/r.git"),
}
URL_SECRETS = (
    "hunter2",
    "pr0xy-pw",
    "pypi-AgEIcHlwaS5vcmc",
    "first-pw",
    "second-pw",
    "ghp_R3p0t0k3n",
    "p@ss",
)


def test_credentials_inside_urls_are_stripped_from_the_environment():
    base = {name: value for name, (value, _) in URL_VALUES.items()}
    base["KEEP_MY_URL"] = "https://me:as-asked@host/x"
    env = grader_environment(secret_names=(), allow=["KEEP_MY_URL"], base=base)
    assert {name: env[name] for name in URL_VALUES} == {
        name: wanted for name, (_, wanted) in URL_VALUES.items()
    }
    assert env["KEEP_MY_URL"] == "https://me:as-asked@host/x"  # the env: list passes it as is


def test_grader_process_sees_no_credential_inside_a_url(tmp_path, monkeypatch):
    for name, (value, _) in URL_VALUES.items():
        monkeypatch.setenv(name, value)
    result = grade(
        tmp_path,
        f"""
        import json, os
        secrets = {list(URL_SECRETS)!r}
        leaked = sorted(k for k, v in os.environ.items() if any(s in v for s in secrets))
        seen = os.environ.get("DATABASE_URL")
        print(json.dumps({{"score": 0.0 if leaked else 1.0, "reason": ",".join(leaked) + " " + seen}}))
        """,
    )
    assert result.score == 1.0, result.reason
    assert result.reason.endswith("postgres://db:5432/app")


def test_grader_process_does_not_see_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "super-secret-value")
    result = grade(
        tmp_path,
        """
        import json, os
        leaked = [k for k, v in os.environ.items() if "super-secret-value" in v]
        print(json.dumps({"score": 0.0 if leaked else 1.0, "reason": ",".join(leaked)}))
        """,
    )
    assert result.score == 1.0, result.reason


def test_cancellation_kills_the_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    script = tmp_path / "hang.py"
    script.write_text(
        # written then renamed, so the test never reads a half-written file
        f"import os, time\nopen({str(pidfile)!r} + '.new', 'w').write(str(os.getpid()))\n"
        f"os.rename({str(pidfile)!r} + '.new', {str(pidfile)!r})\ntime.sleep(60)\n"
    )

    async def scenario() -> None:
        task = asyncio.create_task(
            run_process(
                [sys.executable, str(script)], b"{}", cwd=tmp_path, env=os.environ, timeout=30
            )
        )
        while not pidfile.exists():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_interpret_signal_death_is_an_error():
    from evalrun.launcher.process import ProcessOutcome

    result = interpret(ProcessOutcome(-9, b"", "", 1.0), name="g", threshold=0.5, weight=1)
    assert result.status == "error" and "SIGKILL" in result.reason


#: prctl(PR_GET_DUMPABLE) for the probe scripts below (Linux)
IS_DUMPABLE = (
    "import ctypes\ndef is_dumpable():\n    return bool(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n"
)


def test_evalrun_is_not_dumpable_but_its_graders_are(tmp_path):
    """Graders run as the same user must not read evalrun's environment (provider keys)."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, os\n"
        f"{IS_DUMPABLE}"
        "print(json.dumps({'score': 1.0 if is_dumpable() else 0.0}))\n"
    )
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from evalrun.hardening import make_undumpable\n"
        f"{IS_DUMPABLE}"
        "from evalrun.launcher.launch import LaunchContext, launch_grader\n"
        "from evalrun.spec.models import GraderSpec, TestCase\n"
        "assert make_undumpable() and is_dumpable() is False\n"
        f"spec = GraderSpec(name='p', command=[sys.executable, {str(probe)!r}])\n"
        "case = TestCase(id='c', input='x')\n"
        f"run = asyncio.run(launch_grader(spec, case, 'o', LaunchContext(eval_dir=Path({str(tmp_path)!r}), judge=None)))\n"
        "print(run.result.score)\n"
    )
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1.0"
