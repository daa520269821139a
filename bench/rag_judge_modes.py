"""Judge cost and verdict agreement of the RAG graders' two modes, per-item and batched, on the
same cases (docs/contextual-precision.md, "Judge modes").

    python bench/rag_judge_modes.py [--target local] [--limit N] [--json out.json]
    python bench/rag_judge_modes.py --calibrate [--target local]   # evalrun calibrate --mode ...

The cases are the labelled groups of tests/data/local_judge_calibration.yaml: one precision
case per relevance group (its passages in order, labels per passage) and one recall case per
attribution group (its statements joined as the expected answer). Each eval file carries the
grader twice, once per mode, and runs through ``evalrun`` with the response cache off, so both
modes see the same cases through the real proxy. Prompt size is read from the proxy's record of
every call (judge-calls.jsonl: system prompt + question), as whitespace words and as
characters / 4 (a rough token count: no tokenizer is installed offline). The ``local`` target
answers typed tasks, so its verdicts per item do not depend on the mode; agreement between the
modes there checks the plumbing, not an LLM's behaviour.

``--calibrate`` writes the same cases as two labelled eval files with one grader each (recall's
labels: each statement of a group, attributable when the group names a passage for it) and
runs ``evalrun calibrate --judge TARGET --mode per-item --mode batched`` on each: the
agreement of each mode with the labels, side by side (docs/judges.md).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "local_judge_calibration.yaml"
MODES = ("per-item", "batched")


def _graders(kind: str, max_calls: int) -> list[dict[str, Any]]:
    name = kind.replace("-", "_")
    return [
        {
            "name": f"{name}_{mode.replace('-', '_')}",
            "type": kind,
            "target": {"max_calls": max_calls},
            "config": {"mode": mode},
        }
        for mode in MODES
    ]


def _retrieved(passages: list[str]) -> list[dict[str, Any]]:
    """The passages as one recorded search call (cases carry no grader config)."""
    call = {"tool": "vector_search", "input": {}, "output": {"results": passages}}
    return [{"role": "assistant", "tool_calls": [call]}]


def precision_eval(groups: list[dict[str, Any]]) -> dict[str, Any]:
    tests = []
    for i, group in enumerate(groups, 1):
        flags = [bool(label) for label, _ in group["passages"]]
        tests.append(
            {
                "id": f"relevance-{i:02d}",
                "input": group["query"],
                "output": "(recorded)",
                "expected_output": _retrieved([text for _, text in group["passages"]]),
                "labels": {"relevant": flags},
            }
        )
    graders = _graders("contextual-precision", 20)
    return {"description": "RAG judge modes: precision", "graders": graders, "tests": tests}


def recall_eval(groups: list[dict[str, Any]]) -> dict[str, Any]:
    tests = []
    for i, group in enumerate(groups, 1):
        statements = [text for _, text in group["statements"]]
        tests.append(
            {
                "id": f"attribution-{i:02d}",
                "input": "(recorded)",
                "output": "(recorded)",
                "criteria": " ".join(statements),
                "expected_output": _retrieved(list(group["context"])),
                "labels": {"attributable": {text: n > 0 for n, text in group["statements"]}},
            }
        )
    graders = _graders("contextual-recall", 20)
    return {"description": "RAG judge modes: recall", "graders": graders, "tests": tests}


def run(eval_data: dict[str, Any], target: str, folder: Path) -> Path:
    path = folder / f"{eval_data['graders'][0]['type']}.eval.yaml"
    path.write_text(yaml.safe_dump(eval_data, sort_keys=False, allow_unicode=True))
    out = folder / f"run-{path.stem}"
    done = subprocess.run(
        [sys.executable, "-m", "evalrun", str(path), "--target", target, "--no-cache", "--quiet"]
        + ["--targets", str(ROOT / "evals" / "targets.yaml"), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if not (out / "results.jsonl").is_file():
        raise SystemExit(f"evalrun wrote no results for {path.name}: {done.stderr[-2000:]}")
    return out


def _verdicts(details: dict[str, Any]) -> list[bool]:
    verdicts = details.get("verdicts") or {}
    if "relevant" in verdicts:
        return list(verdicts["relevant"])
    return list((verdicts.get("attributable") or {}).values())


def measure(bundle: Path, labelled: bool) -> dict[str, Any]:
    calls: dict[str, int] = defaultdict(int)
    words: dict[str, int] = defaultdict(int)
    tokens: dict[str, int] = defaultdict(int)
    for line in (bundle / "judge-calls.jsonl").read_text().splitlines():
        call = json.loads(line)
        prompt = f"{call.get('system_prompt') or ''}\n\n{call.get('question') or ''}"
        calls[call["grader"]] += 1
        words[call["grader"]] += len(prompt.split())
        tokens[call["grader"]] += math.ceil(len(prompt) / 4)
    graded: dict[str, dict[str, list[bool]]] = defaultdict(dict)
    status: dict[str, dict[str, str]] = defaultdict(dict)
    for line in (bundle / "results.jsonl").read_text().splitlines():
        case = json.loads(line)
        for grader in case["graders"]:
            status[grader["name"]][case["id"]] = grader["status"]
            if grader.get("score") is not None:
                graded[grader["name"]][case["id"]] = _verdicts(grader.get("details") or {})
    names = sorted(status)
    cases = len(next(iter(status.values())))
    out: dict[str, Any] = {"cases": cases, "modes": {}}
    for name in names:
        out["modes"][name] = {
            "calls_per_case": round(calls[name] / cases, 2),
            "prompt_words_per_case": round(words[name] / cases, 1),
            "prompt_tokens_per_case_chars4": round(tokens[name] / cases, 1),
            "scored": len(graded[name]),
            "unscored_or_error": cases - len(graded[name]),
        }
    first, second = names
    both = [c for c in graded[first] if c in graded[second]]
    pairs = [
        (a, b)
        for c in both
        if len(graded[first][c]) == len(graded[second][c])
        for a, b in zip(graded[first][c], graded[second][c], strict=True)
    ]
    out["same_status_cases"] = sum(status[first][c] == status[second][c] for c in status[first])
    out["items_compared"] = len(pairs)
    out["item_agreement"] = round(sum(a == b for a, b in pairs) / len(pairs), 4) if pairs else None
    if labelled:
        labels = _labels(bundle)
        for name in names:
            hits = [
                (v == lab)
                for c, flags in graded[name].items()
                for v, lab in zip(flags, labels[c], strict=True)
            ]
            agreement = round(sum(hits) / len(hits), 4) if hits else None
            out["modes"][name]["label_agreement_of_scored"] = agreement
    return out


def _labels(bundle: Path) -> dict[str, list[bool]]:
    eval_file = next(bundle.parent.glob("contextual-precision.eval.yaml"))
    data = yaml.safe_load(eval_file.read_text())
    return {t["id"]: t["labels"]["relevant"] for t in data["tests"]}


def calibrate(eval_data: dict[str, Any], target: str, folder: Path) -> str:
    """``evalrun calibrate`` on the cases with one grader (its mode set by ``--mode``)."""
    one = {**eval_data, "graders": [{**eval_data["graders"][0], "config": {}}]}
    one["graders"][0]["name"] = one["graders"][0]["type"].replace("-", "_")
    path = folder / f"labelled-{one['graders'][0]['type']}.eval.yaml"
    path.write_text(yaml.safe_dump(one, sort_keys=False, allow_unicode=True))
    argv = [sys.executable, "-m", "evalrun", "calibrate", str(path), "--judge", target]
    argv += ["--mode", "per-item", "--mode", "batched", "--no-cache", "-o", str(path) + ".cal"]
    argv += ["--targets", str(ROOT / "evals" / "targets.yaml")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"evalrun calibrate failed on {path.name}: {done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default="local", help="the judge target (evals/targets.yaml)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N groups of each")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--calibrate", action="store_true", help="run evalrun calibrate --mode on the cases"
    )
    args = parser.parse_args()
    data = yaml.safe_load(DATA.read_text())
    limit = args.limit or None
    if args.calibrate:
        with tempfile.TemporaryDirectory() as tmp:
            for build, groups in ((precision_eval, "relevance"), (recall_eval, "attribution")):
                print(calibrate(build(data[groups][:limit]), args.target, Path(tmp)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        figures = {
            "target": args.target,
            "precision": measure(
                run(precision_eval(data["relevance"][:limit]), args.target, folder), True
            ),
            "recall": measure(
                run(recall_eval(data["attribution"][:limit]), args.target, folder), False
            ),
        }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
