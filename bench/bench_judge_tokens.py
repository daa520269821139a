"""Judge prompt tokens per RAG case: evalrun's RAG graders in each judge mode against DeepEval's
ContextualPrecisionMetric and ContextualRecallMetric (``include_reason=False``), on the same cases
and the same loopback fake judge (docs/contextual-recall.md, "Judge modes").

    python bench/bench_judge_tokens.py [--cases 200] [--deepeval-python PATH] [--json out.json]

A RAG case is graded for precision and recall. The cases are the six RAG examples of ``evals/``
(question, expected answer, retrieved passages), cycled to ``--cases`` with the case number in
the question and in every passage, so no two requests are the same. The fake judge speaks
OpenAI's Chat Completions and records every request; both sides reach it the ordinary way:
evalrun through an ``openai``-kind judge target behind its proxy (response cache off), DeepEval
through its OpenAI model with ``base_url`` set. Prompt tokens are counted by one rule for both:
the characters of every message of a request / 4, rounded up per request (no tokenizer is
installed offline; the response-format schema is not counted on either side). DeepEval runs in
its own virtualenv (never a dependency of evalrun): ``--deepeval-python`` (default
/work/peers-tokens/.venv/bin/python when it exists, else this interpreter); when it cannot
import deepeval, its side is skipped with a line saying so and evalrun's side still runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEER_PYTHON = Path("/work/peers-tokens/.venv/bin/python")
MODES = ("per-item", "batched")
MODEL = "gpt-4o-mini"
#: What the fake judge's key variable holds: a loopback fake needs a key-shaped string, not a key.
FAKE_KEY = "loopback-fake-judge"


# --- the cases -------------------------------------------------------------------------------


def _passages(case: dict[str, Any]) -> list[str]:
    return [
        str(text)
        for message in case.get("expected_output") or []
        for call in message.get("tool_calls") or []
        for text in (call.get("output") or {}).get("results") or []
    ]


def example_cases() -> list[dict[str, Any]]:
    """The six RAG example cases: question, expected answer (``criteria``), passages."""
    import yaml

    out = []
    for name in ("contextual-precision", "contextual-recall"):
        data = yaml.safe_load((ROOT / "evals" / f"{name}.eval.yaml").read_text(encoding="utf-8"))
        for case in data["tests"]:
            question = next(m["content"] for m in case["input"] if m["role"] == "user")
            out.append(
                {"question": question, "expected": case["criteria"], "passages": _passages(case)}
            )
    return out


def rag_cases(count: int) -> list[dict[str, Any]]:
    base = example_cases()
    cases = []
    for i in range(count):
        case = base[i % len(base)]
        cases.append(
            {
                "id": f"rag-{i:04d}",
                "question": f"{case['question']} (case {i})",
                "expected": case["expected"],
                "passages": [f"{p} (case {i})" for p in case["passages"]],
            }
        )
    return cases


# --- the fake judge --------------------------------------------------------------------------


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _between(text: str, start: str, end: str) -> str:
    found = re.search(re.escape(start) + r"(.*?)" + re.escape(end), text, re.DOTALL)
    return found.group(1).strip() if found else ""


def fake_reply(schema: str, prompt: str) -> Any:
    """A well-formed reply to each request shape the two sides send; its content does not change
    what is counted (prompt tokens), only that no reply is asked again."""
    yes = {"reason": "fake judge", "confidence": 0.9}
    if schema == "relevance_verdicts":
        count = len(re.findall(r"^\[\d+\] ", _between(prompt, "<passages>", "</passages>"), re.M))
        return {"verdicts": [{"number": n, "relevant": True, **yes} for n in range(1, count + 1)]}
    if schema == "recall_verdicts":
        said = sentences(_between(prompt, "<expected_answer>", "</expected_answer>"))
        return {
            "verdicts": [
                {"number": n, "statement": s, "attributable": True, "node": 1, **yes}
                for n, s in enumerate(said, 1)
            ]
        }
    if schema == "statements":
        return {"statements": sentences(_between(prompt, "<text>", "</text>"))}
    if schema == "relevance_verdict":
        return {"relevant": True, **yes}
    if schema == "attribution_verdict":
        return {"attributable": True, "node": 1, **yes}
    documents = re.search(r"Retrieval Context\s*\((\d+) document", prompt)
    if documents:  # DeepEval's contextual precision: one verdict per document
        return {"verdicts": [{"verdict": "yes", "reason": "fake"}] * int(documents.group(1))}
    expected = _between(prompt, "Expected Output:", "Retrieval Context:")
    if expected:  # DeepEval's contextual recall: one verdict per sentence
        return {"verdicts": [{"verdict": "yes", "reason": "fake"}] * len(sentences(expected))}
    raise ValueError(f"the fake judge has no reply for schema {schema!r}: {prompt[:200]!r}")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class FakeJudge:
    """Chat Completions on 127.0.0.1; every request's prompt counted under the current side."""

    def __init__(self) -> None:
        self.side = ""
        self.calls: dict[str, int] = {}
        self.tokens: dict[str, int] = {}
        self.failures: list[str] = []
        self.lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, reply = judge.answer(body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        texts = [_content_text(m.get("content")) for m in body.get("messages") or []]
        prompt = "\n\n".join(texts)
        tokens = math.ceil(sum(len(t) for t in texts) / 4)
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        with self.lock:
            self.calls[self.side] = self.calls.get(self.side, 0) + 1
            self.tokens[self.side] = self.tokens.get(self.side, 0) + tokens
        try:
            content = json.dumps(fake_reply(schema, prompt))
        except ValueError as exc:
            with self.lock:
                self.failures.append(str(exc))
            return 400, {"error": {"message": str(exc), "type": "invalid_request_error"}}
        choice = {"index": 0, "message": {"role": "assistant", "content": content}}
        usage = {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}
        reply = {"id": "fake", "object": "chat.completion", "created": 0, "model": MODEL}
        return 200, {**reply, "choices": [{**choice, "finish_reason": "stop"}], "usage": usage}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- evalrun's side --------------------------------------------------------------------------


def evalrun_side(mode: str, cases: list[dict[str, Any]], port: int, folder: Path) -> int:
    """Both RAG graders over every case through ``evalrun``; returns how many graders scored."""
    import yaml

    graders = [
        {"name": kind, "type": kind, "target": {"max_calls": 20}, "config": {"mode": mode}}
        for kind in ("contextual-precision", "contextual-recall")
    ]
    tests = [
        {
            "id": case["id"],
            "input": case["question"],
            "criteria": case["expected"],
            "output": case["expected"],
            "expected_output": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"tool": "vector_search", "output": {"results": case["passages"]}}
                    ],
                }
            ],
        }
        for case in cases
    ]
    eval_file = folder / f"tokens-{mode}.eval.yaml"
    eval_file.write_text(yaml.safe_dump({"graders": graders, "tests": tests}, sort_keys=False))
    target = {"name": "fake", "kind": "openai", "model": MODEL}
    target |= {"base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": "BENCH_FAKE_JUDGE_KEY"}
    targets = folder / "targets.yaml"
    targets.write_text(yaml.safe_dump({"targets": [target]}))
    out = folder / f"run-{mode}"
    argv = [sys.executable, "-m", "evalrun", str(eval_file), "--targets", str(targets)]
    argv += ["--target", "fake", "--no-cache", "--quiet", "--out", str(out)]
    env = {**os.environ, "BENCH_FAKE_JUDGE_KEY": FAKE_KEY}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    if not (out / "results.jsonl").is_file():
        raise SystemExit(f"evalrun wrote no results ({mode}): {done.stderr[-2000:]}")
    scored = 0
    for line in (out / "results.jsonl").read_text().splitlines():
        scored += sum(g.get("score") is not None for g in json.loads(line)["graders"])
    return scored


# --- DeepEval's side (run by the interpreter that has deepeval) ------------------------------


def deepeval_side(port: int, cases_file: Path) -> None:
    """ContextualPrecisionMetric and ContextualRecallMetric on every case, without reasons;
    prints how many metrics were measured."""
    from deepeval.metrics import ContextualPrecisionMetric, ContextualRecallMetric
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase

    model = GPTModel(model=MODEL, base_url=f"http://127.0.0.1:{port}/v1", api_key=FAKE_KEY)
    measured = 0
    for case in json.loads(cases_file.read_text()):
        test = LLMTestCase(
            input=case["question"],
            actual_output=case["expected"],
            expected_output=case["expected"],
            retrieval_context=case["passages"],
        )
        for metric in (
            ContextualPrecisionMetric(model=model, include_reason=False, async_mode=False),
            ContextualRecallMetric(model=model, include_reason=False, async_mode=False),
        ):
            metric.measure(test)
            measured += metric.score is not None
    print(json.dumps({"measured": measured}))


def run_deepeval(python: str, port: int, cases: list[dict[str, Any]], folder: Path) -> int | None:
    """How many metrics DeepEval measured, or None (with a line saying why) when ``python``
    cannot import deepeval."""
    probe = subprocess.run([python, "-c", "import deepeval"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"deepeval: skipped, {python} cannot import deepeval (pip install deepeval there)")
        return None
    cases_file = folder / "cases.json"
    cases_file.write_text(json.dumps(cases))
    env = {**os.environ, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES", "ERROR_REPORTING": "NO"}
    env |= {"OPENAI_API_KEY": FAKE_KEY, "DEEPEVAL_RESULTS_FOLDER": str(folder / "deepeval")}
    argv = [python, str(Path(__file__).resolve()), "--deepeval-side", str(cases_file)]
    done = subprocess.run(
        [*argv, "--port", str(port)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"DeepEval's side failed: {done.stderr[-3000:]}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["measured"])


# --- the figures -----------------------------------------------------------------------------


def measure(count: int, peer_python: str) -> dict[str, Any]:
    cases = rag_cases(count)
    judge = FakeJudge()
    sides: dict[str, dict[str, Any]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            judge.side = "deepeval"
            measured = run_deepeval(peer_python, judge.port, cases, folder)
            if measured is not None:
                sides["deepeval (no reasons)"] = {"scored": measured}
            for mode in MODES:
                judge.side = f"evalrun {mode}"
                sides[judge.side] = {"scored": evalrun_side(mode, cases, judge.port, folder)}
    finally:
        judge.close()
    if judge.failures:
        raise SystemExit(f"the fake judge could not answer: {judge.failures[:3]}")
    names = {"deepeval (no reasons)": "deepeval"}
    for name, side in sides.items():
        key = names.get(name, name)
        side["judge_calls_per_case"] = round(judge.calls.get(key, 0) / count, 2)
        side["prompt_tokens_per_case"] = round(judge.tokens.get(key, 0) / count, 1)
        side["metrics_per_case"] = 2
    figures: dict[str, Any] = {"cases": count, "token_rule": "characters / 4", "sides": sides}
    peer = sides.get("deepeval (no reasons)")
    if peer:
        figures["ratio_to_deepeval"] = {
            name: round(side["prompt_tokens_per_case"] / peer["prompt_tokens_per_case"], 3)
            for name, side in sides.items()
            if name.startswith("evalrun")
        }
    return figures


def table(figures: dict[str, Any]) -> str:
    ratios = figures.get("ratio_to_deepeval", {})
    lines = [
        f"{figures['cases']} RAG cases, precision + recall each; prompt tokens = characters / 4",
        "| side | judge calls / case | prompt tokens / case | vs DeepEval | scored |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, side in figures["sides"].items():
        ratio = f"{ratios[name]:.2f}x" if name in ratios else "-"
        lines.append(
            f"| {name} | {side['judge_calls_per_case']:.2f} | "
            f"{side['prompt_tokens_per_case']:,.1f} | {ratio} | "
            f"{side['scored']} of {2 * figures['cases']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=200)
    default_peer = str(PEER_PYTHON) if PEER_PYTHON.is_file() else sys.executable
    parser.add_argument("--deepeval-python", default=default_peer)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--deepeval-side", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.deepeval_side:
        deepeval_side(args.port, args.deepeval_side)
        return
    figures = measure(args.cases, args.deepeval_python)
    print(table(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
