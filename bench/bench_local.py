"""Time and memory of the local judge: loading the model, then judging 100 pairs.

    python bench/bench_local.py [--json out.json] [--baseline REF]

Runs in a fresh process so the figures include the model load. Peak memory is reported twice:
tracemalloc sees Python and numpy allocations only; ru_maxrss (the process's resident peak)
also sees the C engine and its 4-bit weights.

``--baseline`` (default: BASELINE, the judge before its contradiction cues) also times that
commit's judge on the same tasks, in a fresh process from ``git archive``, and prints the
per-item ratio new/old of the cold sequential runs (docs/local-judge.md, "Speed and memory").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml
from bench_e2e import unpack_commit

ROOT = Path(__file__).resolve().parent.parent
#: ``--code-root`` runs another checkout's judge (the baseline) with this script's tasks.
CODE_ROOT = Path(sys.argv[sys.argv.index("--code-root") + 1]) if "--code-root" in sys.argv else ROOT
sys.path.insert(0, str(CODE_ROOT))
BASELINE = "2a6d360"

DATA = ROOT / "tests" / "data" / "local_judge_calibration.yaml"
PAIRS = 100


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def relevance_tasks(data: dict[str, Any]) -> list[dict[str, Any]]:
    tasks = []
    for group in data["relevance"]:
        nodes = [p for _, p in group["passages"]]
        for node in nodes:
            tasks.append(
                {"kind": "relevance", "query": group["query"], "passage": node, "siblings": nodes}
            )
    return tasks[:PAIRS]


def attribution_tasks(data: dict[str, Any]) -> list[dict[str, Any]]:
    tasks = [
        {"kind": "attribution", "statement": statement, "context": group["context"]}
        for group in data["attribution"]
        for _, statement in group["statements"]
    ]
    return tasks[:PAIRS]


async def judge_all(target: Any, tasks: list[dict[str, Any]], concurrent: bool) -> float:
    from evalrun.targets.base import CompletionRequest

    requests = [CompletionRequest.from_prompt("judge", task=t) for t in tasks]
    started = time.perf_counter()
    if concurrent:
        await asyncio.gather(*(target.complete(r) for r in requests))
    else:
        for request in requests:
            await target.complete(request)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--baseline", default=BASELINE, help="git ref to compare with ('' = none)")
    parser.add_argument("--code-root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    rss_start = rss_mib()
    tracemalloc.start()

    from evalrun.targets.config import TargetConfig

    try:
        from evalrun.targets.local.model import get_embedder
        from evalrun.targets.local.target import LocalTarget
    except ModuleNotFoundError as exc:  # the baseline commit: before targets/local/ was a package
        if exc.name != "evalrun.targets.local.model":
            raise
        from evalrun.targets.local_model import get_embedder  # type: ignore[no-redef]

        from evalrun.targets.local import LocalTarget  # type: ignore[attr-defined,no-redef]

    started = time.perf_counter()
    embedder = get_embedder()
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    embedder.encode(["The weights are paged in on the first encoding."], "passage")
    first_s = time.perf_counter() - started
    _, load_peak = tracemalloc.get_traced_memory()
    rss_loaded = rss_mib()

    target = LocalTarget(TargetConfig(name="local", kind="local"))
    figures: dict[str, Any] = {}
    for name, tasks in (
        ("relevance", relevance_tasks(data)),
        ("attribution", attribution_tasks(data)),
    ):
        encoded_before = embedder.encoded
        cold = asyncio.run(judge_all(target, tasks, concurrent=False))
        encoded = embedder.encoded - encoded_before
        warm = asyncio.run(judge_all(target, tasks, concurrent=True))
        figures[name] = {
            "pairs": len(tasks),
            "texts_encoded": encoded,
            "cold_s": round(cold, 2),
            "cold_ms_per_pair": round(cold * 1000 / len(tasks), 1),
            "warm_cached_concurrent_s": round(warm, 3),
        }
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    report = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "model_load_s": round(load_s, 3),
        "first_encoding_s": round(first_s, 3),
        "tracemalloc_peak_mib": {
            "after_load_and_first_encoding": round(load_peak / 2**20, 1),
            "after_judging": round(peak / 2**20, 1),
        },
        "ru_maxrss_mib": {
            "before_load": round(rss_start, 1),
            "after_load_and_first_encoding": round(rss_loaded, 1),
            "after_judging": round(rss_mib(), 1),
        },
        "judging": figures,
    }
    if args.baseline and not args.code_root:
        report["baseline"] = compare_with(args.baseline, figures)
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")


def compare_with(ref: str, figures: dict[str, Any]) -> dict[str, Any]:
    """Time ``ref``'s judge on the same tasks in a fresh process; new/old per-item ratios."""
    with tempfile.TemporaryDirectory() as tmp:
        unpack_commit(ref, Path(tmp), "evalrun")
        env = {**os.environ, "PYTHONPATH": tmp}
        proc = subprocess.run(
            [sys.executable, __file__, "--baseline", "", "--code-root", tmp],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    old = json.loads(proc.stdout)["judging"]
    return {
        "ref": ref,
        **{
            f"{name}_cold_ms_per_pair": old[name]["cold_ms_per_pair"]
            for name in ("relevance", "attribution")
        },
        **{
            f"{name}_ratio_new_over_old": round(
                figures[name]["cold_ms_per_pair"] / old[name]["cold_ms_per_pair"], 2
            )
            for name in ("relevance", "attribution")
        },
    }


if __name__ == "__main__":
    main()
