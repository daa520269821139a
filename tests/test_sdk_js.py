"""The JS/TS SDK (grader_sdk/js/index.mjs) run by real ``node`` processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from grader_sdk._judge import (
    attribution_requests,
    read_attribution,
    read_relevance,
    relevance_requests,
    statements_request,
)
from grader_sdk.replies import parse_json_reply, read_statements
from tests.sdk_helpers import ROOT, FakeProxy
from tests.test_replies import VECTORS, corpus_vectors, meets, run_vector

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

SDK_URL = (ROOT / "grader_sdk" / "js" / "index.mjs").as_uri()


def node(
    code: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run an ES module snippet with ``sdk`` bound to the SDK; it prints JSON on stdout."""
    source = f"import * as sdk from {json.dumps(SDK_URL)};\n" + textwrap.dedent(code)
    base = {k: v for k, v in os.environ.items() if "PROXY" not in k}
    return subprocess.run(
        ["node", "--input-type=module", "-e", source],
        input=stdin,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=30,
    )


def node_json(code: str, env: dict[str, str] | None = None) -> Any:
    proc = node(code, env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_package_json_is_zero_dependency_esm() -> None:
    package = json.loads((ROOT / "grader_sdk" / "js" / "package.json").read_text())
    assert package["name"] == "@evalrun/grader-sdk"
    assert package["type"] == "module"
    assert not package.get("dependencies")
    assert (ROOT / "grader_sdk" / "js" / package["types"]).is_file()


def test_client_invoke_batch_and_info() -> None:
    with FakeProxy(lambda r: r["question"].upper(), max_calls=5) as proxy:
        out = node_json(
            """
            const client = sdk.createTargetClient();
            const one = await client.invoke({question: 'a', systemPrompt: 's', maxTokens: 3});
            const many = await client.invokeBatch(['b', {question: 'c', system_prompt: 't'}]);
            const info = await client.getInfo();
            console.log(JSON.stringify({one, many: many.map((r) => r.rawText), info}));
            """,
            proxy.env(),
        )
        assert proxy.http_requests == [
            ("POST", "/invoke"),
            ("POST", "/invokeBatch"),
            ("GET", "/info"),
        ]
        assert proxy.requests[0] == {"question": "a", "systemPrompt": "s", "maxTokens": 3}
        assert proxy.requests[2] == {"question": "c", "systemPrompt": "t"}
    assert out["one"] == {
        "output": [{"role": "assistant", "content": "A"}],
        "rawText": "A",
        "tokenUsage": {"input": 10, "output": 5, "total": 15},
        "target": "mock",
        "cached": False,
        "latencyMs": 1.5,
        "finishReason": "stop",
        "refusal": None,
    }
    assert out["many"] == ["B", "C"]
    assert out["info"] == {
        "targetName": "mock",
        "callCount": 3,
        "maxCalls": 5,
        "availableTargets": ["mock"],
        "callsPerRequest": 1,
        "remaining": 2,
    }


def test_client_reads_evalrun_env_names() -> None:
    with FakeProxy() as proxy:
        env = {"EVALRUN_PROXY_URL": proxy.url, "EVALRUN_PROXY_TOKEN": proxy.token}
        out = node_json(
            "console.log(JSON.stringify(await sdk.createTargetClient().getInfo()));", env
        )
    assert out["maxCalls"] == 50
    missing = node_json(
        """
        try { sdk.createTargetClient(); console.log('null'); }
        catch (e) { console.log(JSON.stringify(e.name)); }
        """
    )
    assert missing == "ProxyNotConfigured"


def test_typed_errors() -> None:
    with FakeProxy(max_calls=1, available=("mock", "judge")) as proxy:
        proxy.fail_next(502, "upstream_error")
        proxy.fail_next(504, "upstream_timeout")
        proxy.fail_next(422, "unsupported_request")
        proxy.fail_next(503, "shutting_down")
        out = node_json(
            """
            const client = sdk.createTargetClient();
            const bad = new sdk.TargetClient({url: client.url, token: 'wrong'});
            const seen = [];
            const attempt = async (f) => {
              try { await f(); seen.push(null); }
              catch (e) {
                seen.push({name: e.name, status: e.status, code: e.code, proxy: e instanceof sdk.ProxyError,
                           limit: e.limit, allowed: e.allowed, upstream: e instanceof sdk.UpstreamError});
              }
            };
            for (let i = 0; i < 4; i++) await attempt(() => client.invoke('q'));
            await attempt(() => bad.getInfo());
            await attempt(() => client.invokeBatch(['a', 'b']));
            await attempt(() => client.invoke({question: 'q', target: 'nope'}));
            const closed = new sdk.TargetClient({url: 'http://127.0.0.1:9', token: 't'});
            await attempt(() => closed.getInfo());
            console.log(JSON.stringify(seen));
            """,
            proxy.env(),
        )
    names = [(e["name"], e["status"], e["code"]) for e in out]
    assert names == [
        ("UpstreamError", 502, "upstream_error"),
        ("UpstreamTimeout", 504, "upstream_timeout"),
        ("UnsupportedRequest", 422, "unsupported_request"),
        ("ShuttingDown", 503, "shutting_down"),
        ("Unauthorized", 401, "unauthorized"),
        ("BudgetExceeded", 429, "max_calls_exceeded"),
        ("UnknownTarget", 400, "unknown_target"),
        ("ProxyUnavailable", None, None),
    ]
    assert all(e["proxy"] for e in out)
    assert out[1]["upstream"] is True
    assert out[5]["limit"] == 1
    assert out[6]["allowed"] == ["mock", "judge"]


REPLIES = [
    '{"relevant": true, "reason": "r", "confidence": 0.7}',
    '```json\n{"relevant": "no", "reason": "fenced"}\n```',
    'Verdict: {"relevant": "Yes", "explanation": "prose"} -- end',
    'See [2]. {"attributable": true, "node": "2", "reason": "n"}',
    '{"attributable": true, "node": 9}',
    "{'relevant': True, 'reason': 'python'}",
    '{"relevant": false, "confidence": 90,}',
    '{"statements": ["A is B.", "a is b", "C."]}',
    "- one\n- two",
    '["x", "y"]',
    "Yes.",
    "Not relevant.",
    "No idea",
    "nothing here",
    "",
]


def test_lenient_parsing_agrees_with_python() -> None:
    js = node_json(
        f"""
        const replies = {json.dumps(REPLIES)};
        const reading = (r) => ({{ok: r.ok, value: r.value, problem: r.problem}});
        console.log(JSON.stringify(replies.map((r) => [
          sdk.parseJsonReply(r), sdk.readRelevance(r), sdk.readAttribution(r, 3),
          reading(sdk.readStatements(r)),
        ])));
        """
    )

    def plain(v: Any) -> Any:
        return {k: getattr(v, k) for k in ("ok", "reason", "node", "confidence", "raw")}

    def reading(r: Any) -> Any:
        return {"ok": r.ok, "value": r.value, "problem": r.problem}

    py = [
        [
            parse_json_reply(r),
            plain(read_relevance(r)),
            plain(read_attribution(r, 3)),
            reading(read_statements(r)),
        ]
        for r in REPLIES
    ]
    for reply, mine, theirs in zip(REPLIES, py, js, strict=True):
        assert mine == theirs, reply


#: runs one vector of tests/data/reply_vectors.json in the JS SDK, as tests/test_replies.py does
JS_VECTOR_RUNNER = """
const run = (v) => {
  if (v.read === 'number') {
    const [n] = sdk.scaledNumber(v.value, v.low, v.high);
    return {ok: n !== null, value: n};
  }
  if (v.read === 'problem') return {ok: true, value: sdk.replyProblem(v.reply, v.finish_reason ?? null, v.refusal ?? null) !== null};
  if (v.read === 'json') return {ok: true, value: sdk.parseJsonReply(v.reply)};
  let r;
  const problem = sdk.replyProblem(v.reply, v.finish_reason ?? null, v.refusal ?? null);
  if (problem) r = new sdk.Reading(null, problem);
  else if (v.read === 'verdict') r = sdk.readVerdict(v.reply, v.keys);
  else if (v.read === 'statements') r = sdk.readStatements(v.reply);
  else if (v.read === 'rating') r = sdk.readRating(v.reply, v.low, v.high, {names: v.names, integer: v.integer ?? true});
  else r = sdk.readScores(v.reply, v.dimensions.map((d) => sdk.dimension(d.code, d.aliases, d.low, d.high)));
  return {ok: r.ok, value: r.ok ? r.value : null};
};
"""


@pytest.mark.parametrize("source", ["vectors", "corpus"])
def test_js_reads_the_shared_vectors_and_the_corpus_like_python(
    source: str, tmp_path: Path
) -> None:
    vectors = VECTORS if source == "vectors" else corpus_vectors()
    path = tmp_path / "vectors.json"
    path.write_text(json.dumps(vectors), encoding="utf-8")
    js = node_json(
        JS_VECTOR_RUNNER
        + f"""
        const fs = await import('node:fs');
        const vectors = JSON.parse(fs.readFileSync({json.dumps(str(path))}, 'utf8'));
        console.log(JSON.stringify(vectors.map(run)));
        """
    )
    assert len(js) == len(vectors)
    missed = [
        (v.get("id") or v.get("reply") or v.get("value"), v["expect"], got)
        for v, got in zip(vectors, js, strict=True)
        if not meets(got, v["expect"])
    ]
    assert missed == []
    differ = [
        (v.get("id") or v.get("reply"), run_vector(v), got)
        for v, got in zip(vectors, js, strict=True)
        if not meets(got, run_vector(v)["value"] if run_vector(v)["ok"] else "unreadable")
    ]
    assert differ == []


def test_requests_and_prompts_are_identical_to_python() -> None:
    passages = ["P one.", "P two."]
    js = node_json(
        f"""
        const p = {json.dumps(passages)};
        console.log(JSON.stringify([
          sdk.relevanceRequests('Q?', p, 'Expected.', {{target: 'judge'}}),
          sdk.relevanceRequests('Q?', p),
          sdk.attributionRequests(['S1.'], p),
          sdk.statementsRequest('Some text.'),
        ]));
        """
    )
    assert js == [
        relevance_requests("Q?", passages, "Expected.", target="judge"),
        relevance_requests("Q?", passages),
        attribution_requests(["S1."], passages),
        statements_request("Some text."),
    ]


def test_judge_relevance_retries_once() -> None:
    def judge(request: dict[str, Any]) -> str:
        if "Note: your previous reply" in request["question"]:
            return '{"relevant": true, "reason": "retried"}'
        return '{"relevant": false}' if request["task"]["passage"] == "a" else "garbled"

    with FakeProxy(judge) as proxy:
        out = node_json(
            """
            const v = await sdk.judgeRelevance(sdk.createTargetClient(), 'q', ['a', 'b', 'c']);
            console.log(JSON.stringify(v.map((x) => [x.ok, x.reason])));
            """,
            proxy.env(),
        )
        assert proxy.call_count == 5
        assert [r["task"]["siblings"] for r in proxy.requests[:3]] == [["a", "b", "c"]] * 3
    assert out == [[False, ""], [True, "retried"], [True, "retried"]]


def test_attribution_and_statements() -> None:
    def judge(request: dict[str, Any]) -> str:
        if request["task"]["kind"] == "statements":
            return '{"statements": ["A.", "B."]}'
        return '{"attributable": true, "node": 1}' if request["task"]["statement"] == "A." else "No"

    with FakeProxy(judge) as proxy:
        out = node_json(
            """
            const client = sdk.createTargetClient();
            const s = await sdk.extractStatements(client, 'A and B');
            const v = await sdk.judgeAttribution(client, s, ['ctx']);
            console.log(JSON.stringify([s, v.map((x) => [x.ok, x.node])]));
            """,
            proxy.env(),
        )
    assert out == [["A.", "B."], [[True, 1], [False, None]]]


# --- defineScriptGrader --------------------------------------------------------------------


def run_js_grader(
    tmp_path: Path, body: str, payload: Any, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "grader.mjs"
    script.write_text(f"import * as sdk from {json.dumps(SDK_URL)};\n" + textwrap.dedent(body))
    base = {k: v for k, v in os.environ.items() if "PROXY" not in k}
    return subprocess.run(
        ["node", str(script)],
        input=payload if isinstance(payload, str) else json.dumps(payload),
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=30,
    )


AGENTV_PAYLOAD = {
    "caseId": "k1",
    "input": [{"role": "user", "content": "Capital?"}],
    "expectedOutput": [
        {
            "role": "assistant",
            "toolCalls": [
                {
                    "tool": "vector_search",
                    "input": {"query": "cap"},
                    "output": {"results": ["P", "Q"]},
                }
            ],
        },
        {"role": "assistant", "content": "Paris."},
    ],
    "config": {"x": 1},
}


def test_grader_sees_snake_and_camel_views(tmp_path: Path) -> None:
    proc = run_js_grader(
        tmp_path,
        """
        sdk.defineScriptGrader(async (input) => ({
          score: 1,
          details: {
            caseId: input.caseId, case_id: input.case_id, question: input.question,
            tool: input.expectedOutput[0].toolCalls[0].tool, snake: input.expected_output[0].tool_calls.length,
            reference: input.referenceAnswer, context: input.retrievalContext(), calls: input.toolCallResults(),
          },
        }));
        """,
        AGENTV_PAYLOAD,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "score": 1,
        "details": {
            "caseId": "k1",
            "case_id": "k1",
            "question": "Capital?",
            "tool": "vector_search",
            "snake": 1,
            "reference": "Paris.",
            "context": ["P", "Q"],
            "calls": [{"tool": "vector_search", "query": "cap", "results": ["P", "Q"]}],
        },
    }


@pytest.mark.parametrize(
    ("body", "code", "stdout", "stderr"),
    [
        ("return true;", 0, {"score": 1, "pass": True}, ""),
        ("return 0.5;", 0, {"score": 0.5}, ""),
        (
            "throw new sdk.Abstain('no judge', {a: 1});",
            3,
            {"abstain": True, "reason": "no judge", "details": {"a": 1}},
            "",
        ),
        ("throw new TypeError('boom');", 1, None, "TypeError: boom"),
        ("return {score: 2};", 1, None, "score must be a number in 0..1"),
        ("return {reason: 'x'};", 1, None, "needs 'score'"),
        (
            "throw new sdk.UpstreamError('judge down');",
            3,
            {"abstain": True, "reason": "the judge could not be used: judge down"},
            "",
        ),
    ],
)
def test_exit_codes(tmp_path: Path, body: str, code: int, stdout: Any, stderr: str) -> None:
    proc = run_js_grader(
        tmp_path, f"sdk.defineScriptGrader(async (input) => {{ {body} }});", AGENTV_PAYLOAD
    )
    assert proc.returncode == code, proc.stderr
    assert (json.loads(proc.stdout) if proc.stdout.strip() else None) == stdout
    assert stderr in proc.stderr
    if code == 1:
        assert proc.stdout == ""


def test_bad_stdin_is_an_error(tmp_path: Path) -> None:
    proc = run_js_grader(tmp_path, "sdk.defineScriptGrader(() => 1);", "not json")
    assert proc.returncode == 1 and proc.stderr


RUNTIMES = {
    "bun": ["bun"],
    "deno": ["deno", "run", "--allow-env", "--allow-net"],
}


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_precision_grader_on_other_runtimes(runtime: str) -> None:
    """Bun and Deno run the same grader (skipped where they are not installed)."""
    if shutil.which(runtime) is None:
        pytest.skip(f"{runtime} is not installed")
    from tests.sdk_helpers import eval_cases, mock_judge, payload_for

    case = next(c for c in eval_cases("contextual-precision") if c["id"] == "mixed-ranking")
    script = ROOT / "graders" / "js" / "contextual-precision.mjs"
    with FakeProxy(mock_judge()) as proxy:
        proc = subprocess.run(
            [*RUNTIMES[runtime], str(script)],
            input=json.dumps(payload_for(case)),
            capture_output=True,
            text=True,
            env=proxy.env(),
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["score"] == pytest.approx(5 / 6)


def test_served_answers_echo_the_nonce_like_python(tmp_path: Path) -> None:
    """Stream mode (docs/grader-protocol.md): each answer carries its case line's nonce, and a
    line that cannot be read is answered with none, in both SDKs."""
    lines = (
        "".join(
            json.dumps({"nonce": f"n-{i}", "payload": {"case_id": f"c{i}"}, "env": {}}) + "\n"
            for i in range(2)
        )
        + '{"nonce": "n-bad", "payload": "not an object"}\n'
    )
    python = tmp_path / "g.py"
    python.write_text(
        "from grader_sdk import script_grader\n"
        "@script_grader\n"
        "def grade(inp):\n"
        "    return {'score': 1.0, 'reason': inp.case_id}\n"
    )
    js = tmp_path / "g.mjs"
    js.write_text(
        f"import {{ defineScriptGrader }} from {json.dumps(SDK_URL)};\n"
        "defineScriptGrader((input) => ({ score: 1, reason: input.caseId }));\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALRUN_GRADER_MODE": "serve"}
    answers = []
    for argv in ([sys.executable, str(python)], ["node", str(js)]):
        done = subprocess.run(
            argv, input=lines, capture_output=True, text=True, env=env, timeout=30
        )
        assert done.returncode == 0, done.stderr
        answers.append([json.loads(line) for line in done.stdout.splitlines()])
    by_python, by_js = answers
    assert [(a["nonce"], a["exit"]) for a in by_python] == [("n-0", 0), ("n-1", 0), (None, 1)]
    assert [(a["nonce"], a["exit"]) for a in by_js] == [(a["nonce"], a["exit"]) for a in by_python]
    assert [a["result"] and a["result"]["reason"] for a in by_js] == ["c0", "c1", None]
