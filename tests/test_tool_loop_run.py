"""A tool-using model target through a whole run: ``evals/tools/shop.eval.yaml`` (the example of
docs/agents.md, "Model targets with tools") against the loopback fake model of
``toolloop_helpers.py``, graded by the trace graders from the case's transcript; its replay and
its cache; ``max_turns`` and a target that cannot call tools, as a case's result and a
preflight problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, read_bundle, run_cli
from targets_helpers import FakeServer
from toolloop_helpers import grade_one, openai_handler

from evalrun.results.models import CaseResult
from evalrun.runner.options import RunOptions
from evalrun.runner.plan import plan_run
from evalrun.runner.preflight import PreflightError
from evalrun.spec.loader import load_eval
from evalrun.targets import StoreOptions

EXAMPLE = ROOT / "evals" / "tools" / "shop.eval.yaml"


def _targets(folder: Path, url: str) -> Path:
    """The example's ``gpt`` target, pointed at the fake (no key: a keyless server)."""
    path = folder / "targets.yaml"
    path.write_text(
        f"targets:\n  - name: gpt\n    kind: openai\n    model: gpt-4o-mini\n"
        f"    base_url: {url}\n    temperature: 0\n    max_retries: 0\n"
    )
    return path


def _run(folder: Path, targets: Path, name: str, *options: str) -> tuple[dict[str, Any], Path]:
    out = folder / name
    result = run_cli(
        "run", str(EXAMPLE), "--target", "gpt", "--targets", str(targets), "--out", str(out),
        "--quiet", *options,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (line,), _summary = read_bundle(out)
    return line, out


def _steps(line: dict[str, Any]) -> list[dict[str, Any]]:
    """The transcript's steps without the measured times (a replay takes none)."""
    steps = json.loads(json.dumps(line["transcript"]["steps"]))
    for step in steps:
        step["duration_ms"] = None
        for call in step["tool_calls"]:
            call["duration_ms"] = None
    return steps


@pytest.mark.slow  # an evalrun process; the default run grades the example in-process below
def test_evalrun_run_completes_the_example_and_the_trace_graders_pass(tmp_path: Path) -> None:
    with FakeServer(openai_handler) as server:
        line, out = _run(tmp_path, _targets(tmp_path, server.url), "live")
        assert server.count == 4
        first = server.seen[0].json()
    assert [t["function"]["name"] for t in first["tools"]] == [
        "lookup_price",
        "multiply",
        "write_file",
    ]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["sku"]
    assert line["status"] == "passed" and line["output"] == (
        "The total is 7.5, written to total.txt."
    )
    graders = {g["name"]: (g["status"], g["score"]) for g in line["graders"]}
    assert graders == {
        "steps": ("passed", 1.0),
        "budget": ("passed", 1.0),
        "total": ("passed", 1.0),
    }
    transcript = line["transcript"]
    assert transcript["format"] == "tool-loop"
    calls = [c for step in transcript["steps"] for c in step["tool_calls"]]
    assert [(c["name"], c["arguments"], c["result"], c["is_error"]) for c in calls] == [
        ("lookup_price", {"sku": "A1"}, {"sku": "A1", "price": 2.5}, False),
        ("multiply", {"a": 2.5, "b": 3}, 7.5, False),
        ("write_file", {"path": "total.txt", "content": "7.5"}, "ok", False),
    ]
    assert transcript["usage"] == {"input": 406, "output": 40}  # four steps' usage summed
    assert line["usage"]["target"]["input"] == 406
    assert "lookup_price" in (out / "report.html").read_text()


@pytest.mark.slow  # two more evalrun runs; the default run keeps the one above
def test_the_example_replays_from_its_cassette_and_its_cache_without_the_model(
    tmp_path: Path,
) -> None:
    cassette, cache = tmp_path / "cassette.jsonl", tmp_path / "cache"
    with FakeServer(openai_handler) as server:
        targets = _targets(tmp_path, server.url)
        live, _ = _run(
            tmp_path, targets, "live", "--record", str(cassette), "--cache-dir", str(cache)
        )
        cached, _ = _run(tmp_path, targets, "cached", "--cache-dir", str(cache))
        assert server.count == 4  # the second run was answered from the cache, step by step
    replayed, _ = _run(tmp_path, targets, "replayed", "--replay", str(cassette))  # server gone
    assert _steps(live) == _steps(cached) == _steps(replayed)
    assert cached["usage"]["target"]["cached"] and replayed["usage"]["target"]["replayed"]
    assert replayed["status"] == "passed"


def _grade(folder: Path, eval_text: str) -> CaseResult:
    shutil.copy(EXAMPLE.parent / "multiply.py", folder / "multiply.py")

    def targets(url: str) -> str:
        return _targets(folder, url).read_text()

    return grade_one(folder, eval_text, openai_handler, targets)[0]


def test_the_example_case_is_graded_from_its_tool_loop_transcript(tmp_path: Path) -> None:
    """The default run's end-to-end check: plan, target, loop, graders, one result."""
    text = EXAMPLE.read_text().replace("description:", "target: gpt\ndescription:", 1)
    result = _grade(tmp_path, text)
    assert (result.status, result.output) == ("passed", "The total is 7.5, written to total.txt.")
    assert [(g.name, g.score) for g in result.graders] == [
        ("steps", 1.0),
        ("budget", 1.0),
        ("total", 1.0),
    ]
    assert result.transcript is not None
    calls = [c["name"] for s in result.transcript["steps"] for c in s["tool_calls"]]
    assert calls == ["lookup_price", "multiply", "write_file"]
    assert result.usage.target is not None and result.usage.target.input == 406


def test_a_case_that_hits_max_turns_is_an_error_that_keeps_its_transcript(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("max_turns: 6", "max_turns: 2")
    result = _grade(tmp_path, text.replace("description:", "target: gpt\ndescription:", 1))
    assert result.status == "error" and result.graders == []
    assert result.error is not None
    assert result.error.startswith("target 'gpt' failed: the tool loop reached max_turns (2 ")
    assert result.transcript is not None
    names = [c["name"] for s in result.transcript["steps"] for c in s["tool_calls"]]
    assert names == ["lookup_price", "multiply"]
    spent = result.usage.target  # the two model calls it made are counted
    assert spent is not None and (spent.input, spent.output, spent.total) == (201, 20, 221)


def test_tools_offered_to_a_target_that_cannot_call_them_stop_the_run_before_it_starts(
    tmp_path: Path,
) -> None:
    (tmp_path / "targets.yaml").write_text("targets:\n  - {name: m, kind: mock, default: hi}\n")
    path = tmp_path / "t.eval.yaml"
    path.write_text(
        "target: m\ngraders: [{type: contains, value: x}]\ntests:\n  - id: t\n    input: x\n"
        "    tools:\n"
        "      - {name: probe, command: [python, missing.py]}\n"
    )
    options = RunOptions(out=tmp_path / "out", stores=StoreOptions(), quiet=True, sandbox="none")
    with pytest.raises(PreflightError) as caught:
        plan_run(load_eval(path), options)
    problems = caught.value.problems
    assert any("t.eval.yaml:7: tests[0].tools[0]: tools are offered, but target 'm' (mock)" in p
               for p in problems), problems  # fmt: skip
    assert any("tests[0].tools[0].command: script 'missing.py' not found" in p for p in problems)


def test_the_docs_example_is_the_example_file() -> None:
    """docs/agents.md shows evals/tools/shop.eval.yaml, which the tests above run."""
    docs = (ROOT / "docs" / "agents.md").read_text()
    section = docs.split("## Model targets with tools", 1)[1]
    shown = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    body = EXAMPLE.read_text()
    assert shown == body[body.index("description:") :]
