"""What ``evalrun grader check`` (``commands/grader.py``) does: feed golden payloads to any
grader, behind a real proxy with a scripted judge, and list every way its behaviour breaks the
protocol."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from evalrun.judgecall import JudgeCall
from evalrun.launcher.launch import LaunchContext, launch_grader
from evalrun.launcher.payload import Wire, payload_for
from evalrun.launcher.pools import GraderPools
from evalrun.launcher.protocol import MIXED_OUTPUT, error_line
from evalrun.launcher.serve import NOT_AN_ANSWER
from evalrun.results.models import GraderOutcome
from evalrun.runner.judging import judge_proxy
from evalrun.spec.models import GraderSpec, TestCase
from evalrun.targets import TargetConfig, TargetPool, TargetsFile
from proxy import JudgeProxy

JUDGE = "conformance-judge"

#: Replies a careful judge could give, by typed task; a free-text yes/no question gets "yes",
#: other free-text prompts a neutral JSON.
_JUDGE_RULES = [
    {
        "task": "relevance",
        "response": '{"relevant": true, "reason": "scripted", "confidence": 0.9}',
    },
    {
        "task": "attribution",
        "response": '{"attributable": true, "node": 1, "reason": "scripted", "confidence": 0.9}',
    },
    {"task": "statements", "response": '{"statements": ["Paris is the capital of France."]}'},
    {"task": "similarity", "response": '{"similarity": 0.75, "choice": "4", "reason": "scripted"}'},
]
_JUDGE_DEFAULT = (
    '{"relevant": true, "attributable": true, "score": 4, "choice": "4", "reason": "scripted"}'
)

_RAG_EXPECTED = [
    {
        "role": "assistant",
        "tool_calls": [
            {
                "tool": "vector_search",
                "input": {"query": "capital of France"},
                "output": {
                    "results": ["Paris is the capital of France.", "The Eiffel Tower is tall."]
                },
            }
        ],
    },
    {"role": "assistant", "content": "Paris is the capital of France."},
]

GOLDEN: list[tuple[str, dict, str | None]] = [
    (
        "plain-text",
        {"id": "plain-text", "input": "What is the capital of France?", "criteria": "Paris"},
        "Paris.",
    ),
    (
        "rag-tool-calls",
        {
            "id": "rag-tool-calls",
            "criteria": "Paris is the capital of France.",
            "input": [{"role": "user", "content": "What is the capital of France?"}],
            "expected_output": _RAG_EXPECTED,
        },
        "Paris is the capital of France.",
    ),
    ("no-output", {"id": "no-output", "input": "Say something.", "criteria": None}, None),
    (
        "unicode-and-empty",
        {
            "id": "unicode-and-empty",
            "input": "Ça va? 東京 🚀",
            "expected_output": "",
            "metadata": {"k": [1, 2]},
        },
        "",
    ),
]


#: How long the first payload in stream mode may take before the grader counts as one that
#: does not serve (a per-process grader waits for the end of stdin, which never comes).
SERVE_PROBE_S = 5.0


@dataclass
class CheckResult:
    payload: str
    result: GraderOutcome
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The proxy's records of this payload's judge calls (question, task, reply).
    judge_calls: list[JudgeCall] = field(default_factory=list)
    mode: str = "process"


def _problems(result: GraderOutcome) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    warnings: list[str] = []
    if result.status == "error":
        last = error_line(result.stderr_tail) if result.stderr_tail else ""
        detail = f" (stderr: {last})" if last and last not in result.reason else ""
        problems.append(f"error: {result.reason}{detail}")
    problems += [
        f"stdout must carry the result only: {w}"
        for w in result.warnings
        if w.startswith(MIXED_OUTPUT)
    ]
    if result.status in ("passed", "failed") and result.stderr_tail:
        warnings.append("wrote to stderr although it graded")
    if result.status == "unscored" and result.reason == "grader abstained":
        warnings.append("abstained (exit 3) without saying why")
    return problems, warnings


async def check_grader(
    argv: list[str],
    *,
    cwd: Path,
    max_calls: int = 20,
    timeout: float = 60,
    config: dict | None = None,
    modes: tuple[str, ...] = ("process", "serve"),
    wire: Wire = "evalrun",
) -> list[CheckResult]:
    """Every golden payload in each mode, in the payload generation ``wire``. In stream mode one worker serves them all, and its
    results must match the per-process ones; with both modes asked, a grader that does not
    answer its first line at all is reported as one that does not serve, not as broken."""
    judge = TargetConfig(
        name=JUDGE, kind="mock", rules=_JUDGE_RULES, default=_JUDGE_DEFAULT, yes_no="yes"
    )
    pool = TargetPool(TargetsFile(targets=[judge]))
    spec = GraderSpec(
        name="grader-under-check",
        command=argv,
        target={"max_calls": max_calls},
        timeout=timeout,
        config=config or {},
        mode="process",
    )
    out: list[CheckResult] = []
    async with judge_proxy(pool) as proxy:

        async def started() -> JudgeProxy:
            return proxy

        ctx = LaunchContext(eval_dir=cwd, judge=JUDGE, proxy=started, wire=wire)
        by_payload: dict[str, GraderOutcome] = {}
        if "process" in modes:
            for name, case_data, output in GOLDEN:
                case = TestCase.model_validate(case_data)
                run = await launch_grader(spec, case, output, ctx)
                first = run.result
                problems, warnings = _problems(first)
                if first.status in ("passed", "failed"):
                    second = (await launch_grader(spec, case, output, ctx)).result
                    if second.score != first.score:
                        warnings.append(
                            f"not deterministic against a scripted judge: {first.score} then {second.score}"
                        )
                by_payload[name] = first
                out.append(CheckResult(name, first, problems, warnings, run.judge_calls))
        if "serve" in modes:
            out += await _check_serving(spec, ctx, by_payload, strict=modes == ("serve",))
    await pool.aclose()
    return out


async def _check_serving(
    spec: GraderSpec, ctx: LaunchContext, per_process: dict[str, GraderOutcome], *, strict: bool
) -> list[CheckResult]:
    pools = GraderPools(1)
    serving = replace(ctx, pools=pools)
    out: list[CheckResult] = []
    try:
        for index, (name, case_data, output) in enumerate(GOLDEN):
            timeout = spec.timeout if strict or index else min(spec.timeout, SERVE_PROBE_S)
            served = spec.model_copy(update={"mode": "serve", "timeout": timeout})
            case = TestCase.model_validate(case_data)
            run = await launch_grader(served, case, output, serving)
            result = run.result
            if index == 0 and not strict and result.status == "error" and _did_not_serve(result):
                note = "does not answer in stream mode (run it with mode: process)"
                return [CheckResult("(all)", result, [], [note], run.judge_calls, "serve")]
            problems, warnings = _problems(result)
            before = per_process.get(name)
            if before is not None and (before.status, before.score) != (
                result.status,
                result.score,
            ):
                problems.append(
                    f"stream mode gives {result.status} {result.score}, "
                    f"one process per case {before.status} {before.score}"
                )
            out.append(CheckResult(name, result, problems, warnings, run.judge_calls, "serve"))
    finally:
        await pools.close()
    if pools.workers_started > 1:
        out[-1].warnings.append(
            f"{pools.workers_started} worker processes for {len(GOLDEN)} payloads "
            "(a served grader should keep running between cases)"
        )
    return out


def _did_not_serve(result: GraderOutcome) -> bool:
    reason = result.reason
    return "timed out" in reason or "before it answered" in reason or NOT_AN_ANSWER in reason


def write_golden_payloads(folder: Path | None = None, wire: Wire = "evalrun") -> Path:
    """The golden stdin payloads as files, for running a grader by hand."""
    folder = folder or Path(tempfile.mkdtemp(prefix="evalrun-golden-"))
    spec = GraderSpec(name="grader-under-check", command=["x"], target={"max_calls": 20})
    for name, case_data, output in GOLDEN:
        payload = payload_for(wire, TestCase.model_validate(case_data), spec, output)
        (folder / f"{name}.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    return folder
