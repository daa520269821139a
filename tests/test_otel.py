"""OpenTelemetry spans of a run (docs/otel.md): a real ``python -m evalrun`` process sends them
over OTLP/HTTP to a collector this test runs on loopback, which decodes each
``ExportTraceServiceRequest`` with ``opentelemetry-proto``."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, read_bundle, run_cli

trace_service = pytest.importorskip(
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    reason="needs the [otel] extra (pip install -e '.[otel]')",
)
pytest.importorskip("opentelemetry.sdk", reason="needs the [otel] extra")

DOC = ROOT / "docs" / "otel.md"
#: the install hint of the [otel] extra (docs/targets.md, "Installing an extra")
HINT = (
    "pip install 'opentelemetry-sdk>=1.27' 'opentelemetry-exporter-otlp-proto-http>=1.27' "
    "(or, in a checkout of evalrun: pip install -e '.[otel]')"
)


@dataclass
class Span:
    name: str
    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    kind: int
    start: int
    end: int
    status: int
    attributes: dict[str, Any]
    children: list[Span] = field(default_factory=list)


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    return getattr(value, which) if which else None


class Collector:
    """POST /v1/traces on loopback; keeps every span it was sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = trace_service.ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.add(request)
                reply = trace_service.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, request: Any) -> None:
        with self.lock:
            for resource_spans in request.resource_spans:
                service = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for s in scope.spans:
                        attributes = {a.key: _value(a.value) for a in s.attributes}
                        attributes["service.name"] = service.get("service.name")
                        self.spans.append(
                            Span(
                                s.name,
                                s.trace_id,
                                s.span_id,
                                s.parent_span_id,
                                s.kind,
                                s.start_time_unix_nano,
                                s.end_time_unix_nano,
                                s.status.code,
                                attributes,
                            )
                        )

    def tree(self) -> list[Span]:
        """The root spans, each with its children linked, siblings by name."""
        by_id = {s.span_id: s for s in self.spans}
        roots = []
        for s in self.spans:
            s.children = []
        for s in sorted(self.spans, key=lambda s: (s.name, s.start)):
            if s.parent_id and s.parent_id in by_id:
                by_id[s.parent_id].children.append(s)
            else:
                roots.append(s)
        return roots


@pytest.fixture
def collector() -> Iterator[Collector]:
    found = Collector()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def render(spans: list[Span], prefix: str = "") -> list[str]:
    """The tree as docs/otel.md draws it."""
    lines = []
    for i, s in enumerate(spans):
        last = i == len(spans) - 1
        lines.append(f"{prefix}{'└── ' if last else '├── '}{s.name}")
        lines += render(s.children, prefix + ("    " if last else "│   "))
    return lines


def doc_blocks() -> tuple[dict[str, str], str, str]:
    """The example's files (a block after a line "`NAME`:"), its command and its tree."""
    text = DOC.read_text()
    files = {
        name: body
        for name, body in re.findall(r"^`([\w.-]+)`:\n\n```\w+\n(.*?)^```", text, re.M | re.S)
    }
    command = re.search(r"```bash\n(.*?)\n```", text, re.S)
    tree = re.search(r"```\n(evalrun .*?)\n```", text, re.S)
    assert files and command and tree, "docs/otel.md lost its worked example"
    return files, command.group(1), tree.group(1)


def env_for(collector: Collector, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_BSP_SCHEDULE_DELAY="50", **extra)
    return env


def run_example(tmp_path: Path, collector: Collector, **extra: str) -> subprocess.CompletedProcess:
    files, command, _ = doc_blocks()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    words = shlex.split(command)
    assert words[0].startswith("OTEL_EXPORTER_OTLP_ENDPOINT=") and words[1] == "evalrun"
    return run_cli(
        *words[2:], "--out", str(tmp_path / "bundle"), cwd=tmp_path, env=env_for(collector, **extra)
    )


def test_the_worked_example_sends_the_tree_docs_otel_md_draws(tmp_path, collector):
    run = run_example(tmp_path, collector)
    assert run.returncode == 0, run.stdout + run.stderr
    roots = collector.tree()
    assert len(roots) == 1, [s.name for s in roots]
    _, _, tree = doc_blocks()
    assert "\n".join([roots[0].name, *render(roots[0].children)]) == tree
    assert len({s.trace_id for s in collector.spans}) == 1


def test_spans_carry_the_genai_and_evalrun_attributes_of_the_bundle(tmp_path, collector):
    run = run_example(tmp_path, collector)
    assert run.returncode == 0, run.stdout + run.stderr
    results, summary = read_bundle(tmp_path / "bundle")
    calls = [json.loads(line) for line in (tmp_path / "bundle" / "judge-calls.jsonl").open()]
    (root,) = collector.tree()
    assert root.attributes["service.name"] == "evalrun"
    assert root.attributes["evalrun.eval"] == "capitals"
    assert root.attributes["evalrun.target"] == root.attributes["evalrun.judge"] == "mock"
    assert root.attributes["evalrun.exit_code"] == 0
    assert root.attributes["evalrun.cases.total"] == root.attributes["evalrun.cases.passed"] == 2
    assert root.attributes["evalrun.mean_score"] == summary["mean_score"] == 1.0
    cases = {s.attributes["evalrun.case.id"]: s for s in root.children}
    assert set(cases) == {r["id"] for r in results} == {"france", "peru"}
    for result in results:
        case = cases[result["id"]]
        assert case.name == f"case {result['id']}"
        assert case.attributes["evalrun.case.status"] == result["status"] == "passed"
        assert case.attributes["evalrun.case.score"] == result["score"]
        assert case.attributes["evalrun.case.repeat"] == 0
        assert root.start <= case.start <= case.end <= root.end
        target, grader = case.children
        assert target.attributes["evalrun.role"] == "target"
        usage = result["usage"]["target"]
        assert target.kind == grader.children[0].kind == 3  # SPAN_KIND_CLIENT
        assert target.attributes["gen_ai.usage.input_tokens"] == usage["input"] > 0
        assert target.attributes["gen_ai.usage.output_tokens"] == usage["output"] > 0
        assert target.attributes["gen_ai.response.model"] == "mock"
        assert grader.name == "grader judged"
        assert grader.attributes["evalrun.grader.name"] == "judged"
        assert grader.attributes["evalrun.grader.status"] == result["graders"][0]["status"]
        assert grader.attributes["evalrun.grader.score"] == result["graders"][0]["score"] == 1.0
        assert grader.attributes["evalrun.grader.judge_calls"] == 1
        (judge,) = grader.children
        (call,) = [c for c in calls if c["case_id"] == result["id"]]
        assert "finished_ns" not in call  # in memory only: the log stays as it was
        assert judge.attributes["evalrun.role"] == "judge"
        assert judge.attributes["evalrun.case.id"] == result["id"]
        assert judge.attributes["evalrun.grader.name"] == "judged"
        assert judge.attributes["evalrun.judge_call.status"] == call["status"] == "ok"
        assert judge.attributes["gen_ai.usage.input_tokens"] == call["input_tokens"] > 0
        assert judge.attributes["gen_ai.usage.output_tokens"] == call["output_tokens"] > 0
        # the record's real times: inside its grader's span, as long as its latency
        assert judge.end - judge.start == round(call["latency_ms"] * 1_000_000)
        assert grader.start <= judge.start <= judge.end <= grader.end
        assert target.end <= grader.start  # the graders run on the target's answer
        for span in (target, judge):
            assert span.name == "chat mock"
            assert span.attributes["gen_ai.operation.name"] == "chat"
            assert span.attributes["gen_ai.provider.name"] == "mock"
            assert span.attributes["gen_ai.system"] == "mock"
            assert span.attributes["gen_ai.request.model"] == "mock"
            assert span.attributes["evalrun.target"] == "mock"
    # no prompt or answer text unless asked for (docs/otel.md)
    every_value = json.dumps([s.attributes for s in collector.spans])
    assert "capital of" not in every_value and "mock answer" not in every_value
    assert "gen_ai.input.messages" not in every_value


def test_captured_content_is_redacted_like_the_judge_call_records(tmp_path, collector):
    key = "sk-otel-test-key-0123456789"
    (tmp_path / "targets.yaml").write_text(
        "targets:\n"
        "  - name: unused-openai\n"
        "    kind: openai\n"
        "    model: gpt-4o-mini\n"
        "    api_key_env: OTEL_TEST_KEY\n"
    )
    files, _, _ = doc_blocks()
    eval_text = files["capitals.eval.yaml"].replace(
        "What is the capital of Peru?", f"Is {key} the capital of Peru?"
    )
    assert key in eval_text
    (tmp_path / "capitals.eval.yaml").write_text(eval_text)
    (tmp_path / "judged.py").write_text(files["judged.py"])
    env = env_for(
        collector, OTEL_TEST_KEY=key, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true"
    )
    run = run_cli("capitals.eval.yaml", "--out", str(tmp_path / "bundle"), cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    (root,) = collector.tree()
    peru = next(s for s in root.children if s.attributes["evalrun.case.id"] == "peru")
    target, grader = peru.children
    (judge,) = grader.children
    asked = json.loads(target.attributes["gen_ai.input.messages"])
    assert asked == [{"role": "user", "content": "Is *** the capital of Peru?"}]
    answer = json.loads(target.attributes["gen_ai.output.messages"])
    assert answer == [{"role": "assistant", "content": "mock answer"}]
    judged = json.loads(judge.attributes["gen_ai.input.messages"])
    assert "Is *** the capital of Peru?" in judged[-1]["content"]
    assert json.loads(judge.attributes["gen_ai.output.messages"])[0]["content"] == "yes"
    assert key not in json.dumps([s.attributes for s in collector.spans])


def test_ctrl_c_still_sends_the_run_and_the_stopped_cases(tmp_path, collector):
    files, _, _ = doc_blocks()
    (tmp_path / "capitals.eval.yaml").write_text(
        files["capitals.eval.yaml"].replace("judged.py", "slow.py")
    )
    started = tmp_path / "started"
    (tmp_path / "slow.py").write_text(
        "import pathlib, sys, time\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        "sys.stdin.read()\n"
        "time.sleep(600)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "evalrun", "capitals.eval.yaml", "--out", str(tmp_path / "b")],
        cwd=tmp_path,
        env=env_for(collector),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(600):  # until a grader runs; no time is asserted
            if started.exists() or process.poll() is not None:
                break
            time.sleep(0.1)
        assert started.exists(), process.communicate()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out + err
    (root,) = collector.tree()
    assert root.attributes["evalrun.interrupted"] is True
    assert root.attributes["evalrun.exit_code"] == 130
    assert root.status == 2  # STATUS_CODE_ERROR
    assert sorted(s.attributes["evalrun.case.id"] for s in root.children) == ["france", "peru"]
    for case in root.children:
        assert case.attributes["evalrun.case.status"] == "error"
        assert case.attributes["error.type"] == "interrupted"


@pytest.fixture
def no_otel_extra(tmp_path: Path) -> dict[str, str]:
    """An environment where the SDK looks uninstalled (opentelemetry-api stays: fastapi's)."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "for name in ('opentelemetry.sdk', 'opentelemetry.exporter.otlp.proto.http'):\n"
        "    sys.modules[name] = None\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(hide), str(ROOT)])
    probe = subprocess.run(
        [sys.executable, "-c", "import opentelemetry.sdk"], env=env, capture_output=True
    )
    assert probe.returncode != 0, "the hiding sitecustomize did not take effect"
    return env


def test_otel_without_the_extra_is_a_config_error_with_the_install_hint(tmp_path, no_otel_extra):
    files, _, _ = doc_blocks()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    out = tmp_path / "bundle"
    run = run_cli(
        "capitals.eval.yaml", "--otel", "--out", str(out), cwd=tmp_path, env=no_otel_extra
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"--otel needs OpenTelemetry's SDK: {HINT}" in run.stderr
    assert "Traceback" not in run.stderr and not out.exists()
    # an endpoint in the environment is no request for the extra: the run goes on, spanless
    env = {**no_otel_extra, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    run = run_cli("capitals.eval.yaml", "--out", str(out), cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and read_bundle(out)[1]["counts"]["passed"] == 2


def test_a_run_without_otel_imports_none_of_it(tmp_path):
    files, _, _ = doc_blocks()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "evalrun", "capitals.eval.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"\|\s+evalrun\.telemetry$", run.stderr, re.M)  # the hooks are there
    assert "opentelemetry" not in run.stderr


def test_a_judge_call_span_ends_when_the_proxy_recorded_the_call(tmp_path, collector):
    """Built from the record when the grader ends, the span still has the call's own end: the
    proxy records the call before the grader reads the reply, so before the grader's stamp."""
    files, _, _ = doc_blocks()
    (tmp_path / "capitals.eval.yaml").write_text(files["capitals.eval.yaml"])
    (tmp_path / "judged.py").write_text(
        files["judged.py"]
        .replace(
            "    return {", "    read_reply = time.time_ns()\n    time.sleep(0.2)\n    return {"
        )
        .replace("0.0}", "0.0, 'details': {'read_reply_ns': read_reply}}")
        .replace("from grader_sdk", "import time\n\nfrom grader_sdk")
    )
    run = run_cli(
        "capitals.eval.yaml", "--out", str(tmp_path / "b"), cwd=tmp_path, env=env_for(collector)
    )
    assert run.returncode == 0, run.stdout + run.stderr
    results, _ = read_bundle(tmp_path / "b")
    stamps = {r["id"]: r["graders"][0]["details"]["read_reply_ns"] for r in results}
    (root,) = collector.tree()
    for case in root.children:
        _, grader = case.children
        (judge,) = grader.children
        read_reply = stamps[case.attributes["evalrun.case.id"]]
        assert grader.start <= judge.start < judge.end <= read_reply < grader.end
