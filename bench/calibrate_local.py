"""Fit and check the local judge's decision models on the hand-labelled calibration set.

    python bench/calibrate_local.py            # fit on the training groups, print accuracy
    python bench/calibrate_local.py --write    # ... and write evalrun/targets/local_calibration.py
    python bench/calibrate_local.py --json out.json

Groups (one query with its passages, one context with its statements) are split, never pairs,
so a held-out query is unseen as a whole: every third group is held out. The shipped weights are
the ones fitted on the training groups only, so the held-out figures are honest.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalrun.targets import local_judge as judge  # noqa: E402
from evalrun.targets.local_model import get_embedder  # noqa: E402

DATA = ROOT / "tests" / "data" / "local_judge_calibration.yaml"
OUTPUT = ROOT / "evalrun" / "targets" / "local_calibration.py"
HOLD_OUT_EVERY = 3


@dataclass
class Split:
    x: list[list[float]] = field(default_factory=list)
    y: list[int] = field(default_factory=list)


def held_out(index: int) -> bool:
    return index % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 0.05) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton steps on standardised features."""
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - mean) / std, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(z @ w)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = z.T @ (z * (p * (1 - p))[:, None]) + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    weights = w[:-1] / std
    bias = w[-1] - float(np.dot(weights, mean))
    return weights, bias


def accuracy(pairs: list[tuple[bool, bool]]) -> dict[str, float | int]:
    n = len(pairs)
    right = sum(a == b for a, b in pairs)
    tp = sum(a and b for a, b in pairs)
    predicted = sum(a for a, _ in pairs)
    actual = sum(b for _, b in pairs)
    return {
        "n": n,
        "accuracy": round(right / n, 3) if n else 0.0,
        "precision": round(tp / predicted, 3) if predicted else 0.0,
        "recall": round(tp / actual, 3) if actual else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fitted weights module")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()

    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    encoder = get_embedder()

    # --- features -------------------------------------------------------------------------
    rel_rows: list[tuple[int, list[float], int]] = []  # (group, features, label)
    for g, group in enumerate(data["relevance"]):
        passages = [p for _, p in group["passages"]]
        rows = judge.relevance_features(encoder, group["query"], passages)
        for (label, _), row in zip(group["passages"], rows, strict=True):
            rel_rows.append((g, row.tolist(), int(label)))

    att_units: list[
        tuple[int, int, list[list[float]], list[int]]
    ] = []  # (group, gold, rows, nodes)
    for g, group in enumerate(data["attribution"]):
        units, nodes = judge.attribution_units(group["context"])
        for gold, statement in group["statements"]:
            rows = judge.attribution_features(encoder, statement, units)
            rows = rows[:, list(judge.ATTRIBUTION_COLUMNS)]
            att_units.append((g, int(gold), rows.tolist(), nodes))

    sim_rows = []
    for i, (grade, output, expected) in enumerate(data["similarity"]):
        vectors = encoder.encode([output, expected], "query")
        overlap = judge.word_overlap(output, expected)
        sim_rows.append((i, float(vectors[0] @ vectors[1]), overlap, int(grade)))

    # --- fit on training groups -----------------------------------------------------------
    train = [r for r in rel_rows if not held_out(r[0])]
    xb = np.array([r[1] for r in train])
    yb = np.array([r[2] for r in train])
    batch_w, batch_b = fit_logistic(xb[:, list(judge.BATCH_COLUMNS)], yb)
    single_w, single_b = fit_logistic(xb[:, list(judge.SINGLE_COLUMNS)], yb)

    ax, ay = [], []
    for g, gold, rows, nodes in att_units:
        if held_out(g):
            continue
        for row, node in zip(rows, nodes, strict=True):
            ax.append(row)
            ay.append(int(gold == node))
    rank_w, rank_b = fit_logistic(np.array(ax), np.array(ay))
    rank = judge.Logistic(tuple(rank_w), rank_b)
    dx, dy = [], []
    for g, gold, rows, _ in att_units:
        if not held_out(g):
            dx.append(_decision_row(rank, rows))
            dy.append(int(gold > 0))
    att_w, att_b = fit_logistic(np.array(dx), np.array(dy))

    st = [r for r in sim_rows if not held_out(r[0])]
    design = np.array([[c, o, 1.0] for _, c, o, _ in st])
    target = np.array([(grade - 1) / 4 for *_, grade in st])
    sim_coef = np.linalg.lstsq(design, target, rcond=None)[0]

    batch = judge.Logistic(tuple(batch_w), batch_b)
    single = judge.Logistic(tuple(single_w), single_b)
    attribution = judge.Logistic(tuple(att_w), att_b)

    # --- evaluate -------------------------------------------------------------------------
    report: dict[str, dict[str, object]] = {}
    for part, keep in (("train", False), ("held_out", True), ("all", None)):
        rel = [r for r in rel_rows if keep is None or held_out(r[0]) == keep]
        batch_pairs = [
            (batch.probability(_cols(f, judge.BATCH_COLUMNS)) >= 0.5, bool(y)) for _, f, y in rel
        ]
        single_pairs = [
            (single.probability(_cols(f, judge.SINGLE_COLUMNS)) >= 0.5, bool(y)) for _, f, y in rel
        ]
        att = [r for r in att_units if keep is None or held_out(r[0]) == keep]
        att_pairs, node_hits, positives = [], 0, 0
        for _, gold, rows, nodes in att:
            best = int(np.argmax([rank.probability(row) for row in rows]))
            p = attribution.probability(_decision_row(rank, rows))
            att_pairs.append((p >= 0.5, gold > 0))
            if gold > 0:
                positives += 1
                node_hits += int(nodes[best] == gold)
        sim = [r for r in sim_rows if keep is None or held_out(r[0]) == keep]
        predicted = [judge.similarity_score(c, o, sim_coef) for _, c, o, _ in sim]
        choices = [judge.similarity_choice(p) for p in predicted]
        grades = [g for *_, g in sim]
        report[part] = {
            "relevance_with_siblings": accuracy(batch_pairs),
            "relevance_without_siblings": accuracy(single_pairs),
            "attribution": {
                **accuracy(att_pairs),
                "node_accuracy": round(node_hits / positives, 3) if positives else 0.0,
            },
            "similarity": {
                "n": len(sim),
                "mean_abs_error": round(
                    float(
                        np.mean(
                            [abs(p - (g - 1) / 4) for p, g in zip(predicted, grades, strict=True)]
                        )
                    ),
                    3,
                ),
                "choice_exact": round(
                    float(np.mean([c == g for c, g in zip(choices, grades, strict=True)])), 3
                ),
                "choice_within_1": round(
                    float(np.mean([abs(c - g) <= 1 for c, g in zip(choices, grades, strict=True)])),
                    3,
                ),
                "spearman": round(_spearman(predicted, grades), 3),
            },
        }

    counts = {
        "relevance_pairs": len(rel_rows),
        "attribution_statements": len(att_units),
        "similarity_pairs": len(sim_rows),
        "held_out_relevance_pairs": sum(held_out(r[0]) for r in rel_rows),
        "held_out_attribution_statements": sum(held_out(r[0]) for r in att_units),
    }
    weights = {
        "RELEVANCE_BATCH": _params(batch_w, batch_b),
        "RELEVANCE_SINGLE": _params(single_w, single_b),
        "ATTRIBUTION_RANK": _params(rank_w, rank_b),
        "ATTRIBUTION": _params(att_w, att_b),
        "SIMILARITY": tuple(round(float(c), 4) for c in sim_coef),
    }
    print(json.dumps({"counts": counts, "weights": weights, "figures": report}, indent=2))
    if args.json:
        args.json.write_text(
            json.dumps({"counts": counts, "figures": report}, indent=2), encoding="utf-8"
        )
    if args.write:
        lines = [
            '"""Fitted weights for the local judge. Generated by bench/calibrate_local.py --write;'
            ' do not edit."""',
            "",
            *(f"{name} = {value!r}" for name, value in weights.items()),
            "",
        ]
        OUTPUT.write_text("\n".join(lines), encoding="utf-8")
        print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)


def _cols(row: list[float], columns: tuple[int, ...]) -> list[float]:
    return [row[i] for i in columns]


def _decision_row(rank: judge.Logistic, rows: list[list[float]]) -> list[float]:
    best = int(np.argmax([rank.probability(row) for row in rows]))
    return rows[best]


def _params(weights: np.ndarray, bias: float) -> tuple[tuple[float, ...], float]:
    return tuple(round(float(w), 4) for w in weights), round(float(bias), 4)


def _spearman(a: list[float], b: list[int]) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = _average_ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def _average_ranks(values: list[int]) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for value in set(values):
        idx = [i for i, v in enumerate(values) if v == value]
        ranks[idx] = ranks[idx].mean()
    return ranks


if __name__ == "__main__":
    main()
