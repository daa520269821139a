"""The ``cli`` target as real subprocesses, and the ``evalrun targets`` commands."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from evalrun.commands import targets as targets_command
from evalrun.targets import CompletionRequest, ConfigError, TargetError, TargetTimeout
from evalrun.targets.providers.cli import CliTarget
from tests.targets_helpers import FakeServer, Seen, config, openai_error, openai_reply

PY = sys.executable


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def cli_target(command: Any, **values: Any) -> CliTarget:
    return CliTarget(config(kind="cli", command=command, **values))


def test_prompt_placeholder_is_one_argument() -> None:
    script = "import sys, json; print(json.dumps(sys.argv[1:]))"
    target = cli_target([PY, "-c", script, "--ask={prompt}", "tail"])
    request = CompletionRequest.from_prompt(
        "it's a 'quoted' $HOME; rm -rf /", system_prompt="Be brief."
    )
    response = run(target.complete(request))
    assert response.text == '["--ask=Be brief.\\n\\nit\'s a \'quoted\' $HOME; rm -rf /", "tail"]'
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


def test_prompt_goes_to_stdin_without_placeholder(tmp_path: Path) -> None:
    script = (
        "import os, sys; print(os.getcwd(), os.environ['AGENT_MODE'], sys.stdin.read().upper())"
    )
    target = cli_target([PY, "-c", script], cwd=str(tmp_path), env={"AGENT_MODE": "eval"})
    response = run(target.complete(CompletionRequest.from_prompt("hello agent")))
    assert response.text == f"{tmp_path} eval HELLO AGENT"


def test_non_zero_exit_carries_the_stderr_tail() -> None:
    script = "import sys; sys.stderr.write('x' * 5000 + 'model refused'); sys.exit(4)"
    target = cli_target([PY, "-c", script])
    with pytest.raises(TargetError) as info:
        run(target.complete(CompletionRequest.from_prompt("q")))
    message = info.value.message
    assert "status 4" in message and message.endswith("model refused")
    assert len(message) < 1200 and not info.value.retryable


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    target = cli_target([PY, "-c", script], timeout=1.5)
    with pytest.raises(TargetTimeout, match="no answer within 1.5s"):
        run(target.complete(CompletionRequest.from_prompt("q")))
    child = int(pid_file.read_text())
    assert _gone_soon(child), "the agent's child process survived the timeout"


def _alive(pid: int) -> bool:
    """A killed orphan may linger as a zombie until init reaps it; that counts as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_soon(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not _alive(pid)


def test_missing_program_and_bad_config() -> None:
    with pytest.raises(TargetError, match="cannot start"):
        run(cli_target(["/nonexistent/agent-xyz"]).complete(CompletionRequest.from_prompt("q")))
    with pytest.raises(ConfigError, match="command"):
        cli_target([])


# --- evalrun targets list / check -----------------------------------------------------------


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """evalrun"""

    targets_command.register(app)
    return app


def _write_targets(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "targets.yaml"
    path.write_text(
        f"""
targets:
  - name: judge
    kind: openai
    model: gpt-4o-mini
    base_url: {url}/v1
    api_key_env: EVALRUN_TEST_JUDGE_KEY
  - name: gem
    kind: gemini
    model: gemini-2.5-flash
    api_key_env: EVALRUN_TEST_GEM_KEY
  - name: agent
    kind: cli
    command: [{PY}, -c, "print('OK from agent')"]
""",
        encoding="utf-8",
    )
    return path


SECRET = "sk-cli-secret-987654321"


def test_targets_list_shows_key_state_never_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write_targets(tmp_path, "http://127.0.0.1:9")
    monkeypatch.setenv("EVALRUN_TEST_JUDGE_KEY", SECRET)
    monkeypatch.delenv("EVALRUN_TEST_GEM_KEY", raising=False)
    result = CliRunner().invoke(_app(), ["targets", "list", "--targets", str(path)])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split() for line in result.output.splitlines()[2:]}
    assert lines["judge"] == ["judge", "openai", "gpt-4o-mini", "EVALRUN_TEST_JUDGE_KEY", "yes"]
    assert lines["gem"] == ["gem", "gemini", "gemini-2.5-flash", "EVALRUN_TEST_GEM_KEY", "no"]
    assert lines["agent"][:2] == ["agent", "cli"]
    assert {"local", "mock"} <= set(lines)
    assert SECRET not in result.output


def test_targets_check_live_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALRUN_TEST_JUDGE_KEY", SECRET)

    def handler(seen: Seen) -> Any:
        assert seen.headers["authorization"] == f"Bearer {SECRET}"
        return openai_reply("OK", 14, 1)

    with FakeServer(handler) as server:
        path = _write_targets(tmp_path, server.url)
        result = CliRunner().invoke(_app(), ["targets", "check", "judge", "--targets", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok judge (openai gpt-4o-mini):" in result.output
    assert "14 in / 1 out tokens" in result.output and "reply: 'OK'" in result.output
    assert server.count == 1


def test_targets_check_cli_kind(tmp_path: Path) -> None:
    path = _write_targets(tmp_path, "http://127.0.0.1:9")
    result = CliRunner().invoke(_app(), ["targets", "check", "agent", "--targets", str(path)])
    assert result.exit_code == 0, result.output
    assert "reply: 'OK from agent'" in result.output


def test_targets_check_failed_call_exits_1_without_leaking_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALRUN_TEST_JUDGE_KEY", SECRET)
    reply = openai_error(401, f"Incorrect API key provided: {SECRET}", "invalid_request_error")
    with FakeServer(lambda seen: reply) as server:
        path = _write_targets(tmp_path, server.url)
        result = CliRunner().invoke(_app(), ["targets", "check", "judge", "--targets", str(path)])
    assert result.exit_code == 1
    assert "HTTP 401" in result.output and "Incorrect API key provided: ***" in result.output
    assert SECRET not in result.output


@pytest.mark.parametrize(
    ("name", "expected"),
    [("gem", "EVALRUN_TEST_GEM_KEY"), ("nope", "unknown target 'nope'")],
)
def test_targets_check_config_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, expected: str
) -> None:
    monkeypatch.delenv("EVALRUN_TEST_GEM_KEY", raising=False)
    path = _write_targets(tmp_path, "http://127.0.0.1:9")
    result = CliRunner().invoke(_app(), ["targets", "check", name, "--targets", str(path)])
    assert result.exit_code == 2
    assert expected in result.output
