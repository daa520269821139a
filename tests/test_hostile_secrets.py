"""Secret hygiene, end to end through the CLI: provider keys live in evalrun's environment and
reach the (fake) upstream, but no grader sees them, and no file of the run and no line of
output contains them, also when the upstream echoes the key back."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from tests.conftest import read_bundle, run_cli
from tests.fault_helpers import FakeOpenAI, cli_env, one_result_per_case, write_suite

OPENAI_KEY = "sk-test-SECRET123"
#: a variable whose name does not look secret: scrubbed because a target reads it
OTHER_KEY = "cred-SECRET456-for-judge-b"
BYSTANDER_KEY = "ghp_BYSTANDER789"  # unrelated secret in the environment (a CI token)

GRADER = """
import json, os, sys
from grader_sdk import TargetClient, script_grader

HERE = os.path.dirname(os.path.abspath(__file__))


@script_grader
def grade(inp):
    with open(os.path.join(HERE, "env-" + inp.case_id + ".json"), "w") as f:
        json.dump(dict(os.environ), f)
    client = TargetClient.from_env(timeout=30)
    if inp.case_id == "env-to-stderr":
        sys.stderr.write(json.dumps(dict(os.environ)))
        sys.exit(1)
    reply = client.invoke(inp.question, target=inp.config.get("judge"))
    second = client.invoke(inp.question + " (second judge)", target="judge-b")
    return {"score": 1.0, "reason": reply.raw_text + " | " + second.raw_text,
            "details": {"env": dict(os.environ)}}
"""

CASES = {
    "ok": "Is this right? [fault:ok]",
    "echo-key-error": "Is this right? [fault:echo-key-error]",
    "echo-key-reply": "Is this right? [fault:echo-key-reply]",
    "env-to-stderr": "Is this right? [fault:ok]",
}


def test_no_grader_file_or_output_sees_a_provider_key(tmp_path: Path) -> None:
    (tmp_path / "grader.py").write_text(textwrap.dedent(GRADER))
    grader = {
        "name": "nosy",
        "command": [sys.executable, "grader.py"],
        "target": {"max_calls": 5, "allow": ["judge-b"]},
        # the allow-list passes a named variable through (here an unrelated CI token)
        "env": ["GITHUB_TOKEN"],
    }
    cases = [{"id": i, "input": q, "output": "Paris."} for i, q in CASES.items()]
    with FakeOpenAI() as fake:
        common = {"kind": "openai", "model": "m", "base_url": fake.base_url, "max_retries": 0}
        targets = [
            {**common, "name": "judge", "api_key_env": "OPENAI_API_KEY"},
            {**common, "name": "judge-b", "api_key": "${{ env.JUDGE_B_LOGIN }}"},
        ]
        path = write_suite(tmp_path, graders=[grader], cases=cases, targets=targets)
        out = tmp_path / "out"
        env = cli_env(
            OPENAI_API_KEY=OPENAI_KEY, JUDGE_B_LOGIN=OTHER_KEY, GITHUB_TOKEN=BYSTANDER_KEY
        )
        result = run_cli(
            str(path),
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--record",
            str(tmp_path / "cassette.jsonl"),
            "--max-errors",
            "10",
            cwd=tmp_path,
            env=env,
        )
        sent = set(fake.keys)

    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert sent == {OPENAI_KEY, OTHER_KEY}  # the keys were really used upstream
    results, _ = read_bundle(out)
    by_id = one_result_per_case(results, list(CASES))
    assert by_id["ok"]["status"] == "passed"
    assert by_id["echo-key-error"]["status"] == "unscored"
    assert "Incorrect API key provided: ***" in by_id["echo-key-error"]["graders"][0]["reason"]
    # an upstream that repeats the key in a successful reply: the provider redacts it
    assert by_id["echo-key-reply"]["graders"][0]["reason"] == "your key is *** | your key is ***"
    assert by_id["env-to-stderr"]["status"] == "error"
    assert "AGENTV_TARGET_PROXY_TOKEN" in by_id["env-to-stderr"]["graders"][0]["stderr_tail"]

    for case_id in CASES:
        seen = json.loads((tmp_path / f"env-{case_id}.json").read_text())
        assert "OPENAI_API_KEY" not in seen and "JUDGE_B_LOGIN" not in seen
        assert seen["GITHUB_TOKEN"] == BYSTANDER_KEY  # the allow-list works for others
        assert seen["AGENTV_TARGET_PROXY_TOKEN"] == seen["EVALRUN_PROXY_TOKEN"]

    for secret in (OPENAI_KEY, OTHER_KEY):
        for name in ("results.jsonl", "summary.json", "judge-calls.jsonl"):
            assert (out / name).is_file()
        leaks = [
            str(p.relative_to(tmp_path))
            for p in tmp_path.rglob("*")
            if p.is_file() and secret.encode() in p.read_bytes()
        ]
        assert leaks == [], f"{secret} found in {leaks}"
        assert secret not in result.stdout and secret not in result.stderr
    for report in ("report.md", "report.html", "junit.xml"):
        assert (out / report).is_file()
