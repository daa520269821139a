"""Fit and check the local judge's decision models on the hand-labelled sets.

    python bench/calibrate_local.py            # fit on the training groups, print the figures
    python bench/calibrate_local.py --write    # ... and write evalrun/targets/local/calibration.py
    python bench/calibrate_local.py --json out.json --cache /tmp/e5.pkl

Two sets: tests/data/local_judge_calibration.yaml (plain cases; every third group held out) and
tests/data/local_judge_categories.yaml (hard cases by category; within each category every
second group held out). Groups (a query with its passages, a context with its statements) are
split, never pairs. The shipped weights are fitted on the training groups only; the uncertain
band is chosen on out-of-fold predictions within the training groups, so the held-out figures
are honest. ``--cache`` keeps the embeddings between runs (they do not change between fits).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evalrun.targets.local import judge  # noqa: E402
from evalrun.targets.local.model import get_embedder  # noqa: E402

CALIBRATION = ROOT / "tests" / "data" / "local_judge_calibration.yaml"
CATEGORIES = ROOT / "tests" / "data" / "local_judge_categories.yaml"
OUTPUT = ROOT / "evalrun" / "targets" / "local" / "calibration.py"
FOLDS = 5
#: The band is the narrowest that keeps out-of-fold coverage at least this high.
MIN_COVERAGE = 0.92


class CachingEncoder:
    """The shared embedder behind a pickle file of (mode, text) -> vector."""

    def __init__(self, path: Path | None) -> None:
        self._inner = get_embedder()
        self._path = path
        self._store: dict[tuple[str, str], np.ndarray] = {}
        if path and path.exists():
            self._store = pickle.loads(path.read_bytes())

    def encode(self, texts: list[str], mode: str = "passage") -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if (mode, t) not in self._store))
        if missing:
            for text, vector in zip(missing, self._inner.encode(missing, mode), strict=True):  # type: ignore[arg-type]
                self._store[(mode, text)] = vector
        return np.stack([self._store[(mode, t)] for t in texts])

    def save(self) -> None:
        if self._path:
            self._path.write_bytes(pickle.dumps(self._store))


@dataclass(eq=False)
class RelevancePair:
    group: str
    category: str
    held_out: bool
    features: list[float]
    label: bool


@dataclass(eq=False)
class Statement:
    group: str
    category: str
    held_out: bool
    gold: int
    alignment: judge.Alignment


def load(encoder: Any) -> tuple[list[RelevancePair], list[Statement], list[tuple], dict]:
    plain = yaml.safe_load(CALIBRATION.read_text(encoding="utf-8"))
    hard = yaml.safe_load(CATEGORIES.read_text(encoding="utf-8"))
    relevance: list[RelevancePair] = []
    statements: list[Statement] = []

    def groups(kind: str) -> list[tuple[str, str, bool, dict]]:
        out = [(f"c{i}", "calibration", i % 3 == 2, g) for i, g in enumerate(plain[kind])]
        seen: dict[str, int] = defaultdict(int)
        for i, g in enumerate(hard[kind]):
            index = seen[g["category"]]
            seen[g["category"]] += 1
            out.append((f"h{i}", g["category"], index % 2 == 1, g))
        return out

    for name, category, held, group in groups("relevance"):
        passages = [p for _, p in group["passages"]]
        rows = judge.relevance_features(encoder, group["query"], passages)
        for (label, _), row in zip(group["passages"], rows, strict=True):
            relevance.append(RelevancePair(name, category, held, row.tolist(), bool(label)))
    for name, category, held, group in groups("attribution"):
        for gold, statement in group["statements"]:
            alignment = judge.align(encoder, statement, group["context"])
            statements.append(Statement(name, category, held, int(gold), alignment))
    similarity = []
    for i, (grade, output, expected) in enumerate(plain["similarity"]):
        vectors = encoder.encode([output, expected], "query")
        overlap = judge.word_overlap(output, expected)
        similarity.append((i, float(vectors[0] @ vectors[1]), overlap, int(grade)))
    counts = {
        "relevance_pairs": len(relevance),
        "attribution_statements": len(statements),
        "similarity_pairs": len(similarity),
        "held_out_relevance_pairs": sum(r.held_out for r in relevance),
        "held_out_attribution_statements": sum(s.held_out for s in statements),
    }
    return relevance, statements, similarity, counts


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 0.05) -> judge.Logistic:
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
    return judge.Logistic(tuple(round(float(v), 4) for v in weights), round(float(bias), 4))


# --- attribution ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AttributionModel:
    rank: judge.Logistic
    decide: judge.Logistic
    keep: float
    band: tuple[float, float] = (0.5, 0.5)

    def verdict(self, statement: Statement) -> judge.Verdict:
        alignment = rerank(statement.alignment, self.rank)
        return judge.attribution_verdict(alignment, self.decide, self.keep, self.band)


def rerank(alignment: judge.Alignment, rank: judge.Logistic) -> judge.Alignment:
    columns = list(judge.ATTRIBUTION_COLUMNS)
    return replace(alignment, rank=[rank.logit(row[columns]) for row in alignment.rows])


def fit_attribution(train: list[Statement]) -> AttributionModel:
    ux, uy = [], []
    for s in train:
        for row, node in zip(s.alignment.rows, s.alignment.units.nodes, strict=True):
            ux.append(row[list(judge.ATTRIBUTION_COLUMNS)])
            uy.append(int(s.gold == node))
    rank = fit_logistic(np.array(ux), np.array(uy))
    dx, dy = [], []
    for s in train:
        alignment = rerank(s.alignment, rank)
        best, clean = alignment.best(), alignment.best(clean=True)
        if clean is not None and best == clean:  # the statements the cues leave to the model
            dx.append(alignment.decision_row(clean))
            dy.append(int(s.gold > 0))
    decide = fit_logistic(np.array(dx), np.array(dy))
    best_keep, best_right = 1.01, -1
    for keep in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.01):
        model = AttributionModel(rank, decide, keep)
        right = sum(model.verdict(s).ok == (s.gold > 0) for s in train)
        if right > best_right:
            best_keep, best_right = keep, right
    return AttributionModel(rank, decide, best_keep)


# --- relevance -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RelevanceModel:
    batch: judge.Logistic
    single: judge.Logistic
    band: tuple[float, float] = (0.5, 0.5)

    def probability(self, pair: RelevancePair) -> float:
        return self.batch.probability([pair.features[i] for i in judge.BATCH_COLUMNS])


def fit_relevance(train: list[RelevancePair]) -> RelevanceModel:
    x = np.array([r.features for r in train])
    y = np.array([int(r.label) for r in train])
    return RelevanceModel(
        fit_logistic(x[:, list(judge.BATCH_COLUMNS)], y),
        fit_logistic(x[:, list(judge.SINGLE_COLUMNS)], y),
    )


# --- the uncertain band, from out-of-fold predictions ----------------------------------------


def choose_band(scored: list[tuple[float, bool, bool]]) -> tuple[float, float]:
    """(low, high): the band with the best answered accuracy at MIN_COVERAGE or more.

    ``scored`` holds (probability, right at 0.5, may abstain) per training item.
    """
    best, best_key = (0.5, 0.5), (-1.0, 0.0)
    lows = [round(float(x), 2) for x in np.arange(0.05, 0.501, 0.05)]
    highs = [round(float(x), 2) for x in np.arange(0.5, 0.951, 0.05)]
    for low in lows:
        for high in highs:
            answered = [right for p, right, may in scored if not (may and low < p < high)]
            coverage = len(answered) / len(scored)
            if coverage < MIN_COVERAGE:
                continue
            key = (sum(answered) / len(answered), -(high - low))
            if key > best_key:
                best, best_key = (low, high), key
    return best


def folds(items: list[Any]) -> list[list[Any]]:
    names = sorted({i.group for i in items})
    return [[i for i in items if names.index(i.group) % FOLDS == k] for k in range(FOLDS)]


def out_of_fold_attribution(train: list[Statement]) -> list[tuple[float, bool, bool]]:
    scored = []
    for fold in folds(train):
        model = fit_attribution([s for s in train if s not in fold])
        for s in fold:
            v = model.verdict(s)
            if not v.unsure_name:
                scored.append((v.probability, v.ok == (s.gold > 0), v.cue is None))
    return scored


def out_of_fold_relevance(train: list[RelevancePair]) -> list[tuple[float, bool, bool]]:
    scored = []
    for fold in folds(train):
        model = fit_relevance([r for r in train if r not in fold])
        for r in fold:
            p = model.probability(r)
            scored.append((p, (p >= 0.5) == r.label, True))
    return scored


# --- figures ---------------------------------------------------------------------------------


def table(results: list[tuple[str, str, bool, bool]]) -> dict[str, dict[str, float | int]]:
    """Per category and kind: items, coverage, accuracy on answered. (category, kind, right,
    abstained) per item."""
    buckets: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for category, kind, right, abstained in results:
        keys = [category, f"{kind} (all)", "all"]
        if category != "calibration":
            keys += ["hard set (all)", f"hard set, {kind}"]
        for key in keys:
            buckets[key].append((right, abstained))
    out = {}
    for key, items in sorted(buckets.items()):
        answered = [right for right, abstained in items if not abstained]
        out[key] = {
            "n": len(items),
            "coverage": round(len(answered) / len(items), 3),
            "accuracy_answered": round(sum(answered) / len(answered), 3) if answered else 0.0,
        }
    return out


def similarity_fit(rows: list[tuple]) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    train = [r for r in rows if r[0] % 3 != 2]
    design = np.array([[c, o, 1.0] for _, c, o, _ in train])
    target = np.array([(grade - 1) / 4 for *_, grade in train])
    coef = np.linalg.lstsq(design, target, rcond=None)[0]
    figures = {}
    for part, keep in (("train", False), ("held_out", True), ("all", None)):
        sim = [r for r in rows if keep is None or (r[0] % 3 == 2) == keep]
        predicted = [judge.similarity_score(c, o, coef) for _, c, o, _ in sim]
        choices = [judge.similarity_choice(p) for p in predicted]
        grades = [g for *_, g in sim]
        figures[part] = {
            "n": len(sim),
            "choice_within_1": round(
                float(np.mean([abs(c - g) <= 1 for c, g in zip(choices, grades, strict=True)])), 3
            ),
            "spearman": round(_spearman(predicted, grades), 3),
        }
    return coef, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the fitted weights module")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--cache", type=Path, help="keep embeddings in this pickle file")
    parser.add_argument("--errors", action="store_true", help="list held-out mistakes")
    args = parser.parse_args()

    encoder = CachingEncoder(args.cache)
    relevance, statements, similarity, counts = load(encoder)
    encoder.save()

    rel_train = [r for r in relevance if not r.held_out]
    att_train = [s for s in statements if not s.held_out]
    rel_model = replace(
        fit_relevance(rel_train), band=choose_band(out_of_fold_relevance(rel_train))
    )
    att_model = replace(
        fit_attribution(att_train), band=choose_band(out_of_fold_attribution(att_train))
    )
    sim_coef, sim_figures = similarity_fit(similarity)

    report: dict[str, Any] = {}
    errors = []
    for part, keep in (("train", False), ("held_out", True)):
        results = []
        for r in relevance:
            if r.held_out == keep:
                p = rel_model.probability(r)
                abstained = rel_model.band[0] < p < rel_model.band[1]
                right = (p >= 0.5) == r.label
                results.append((r.category, "relevance", right, abstained))
                if keep and not right and not abstained:
                    errors.append((r.category, r.label, p, r.group, r.features))
        for s in statements:
            if s.held_out == keep:
                v = att_model.verdict(s)
                right = v.ok == (s.gold > 0)
                results.append((s.category, "attribution", right, v.abstained))
                if keep and not right and not v.abstained:
                    errors.append((s.category, s.gold, v.probability, v.cue, v.evidence))
        report[part] = table(results)
    node_hits = [
        att_model.verdict(s).node == s.gold for s in statements if s.held_out and s.gold > 0
    ]
    report["held_out_node_accuracy"] = round(sum(node_hits) / len(node_hits), 3)
    report["similarity"] = sim_figures

    weights = {
        "RELEVANCE_BATCH": _params(rel_model.batch),
        "RELEVANCE_SINGLE": _params(rel_model.single),
        "RELEVANCE_BAND": rel_model.band,
        "ATTRIBUTION_RANK": _params(att_model.rank),
        "ATTRIBUTION": _params(att_model.decide),
        "ATTRIBUTION_KEEP": att_model.keep,
        "ATTRIBUTION_BAND": att_model.band,
        "CONTRADICTION_CONFIDENCE": _contradiction_precision(att_model, att_train),
        "SIMILARITY": tuple(round(float(c), 4) for c in sim_coef),
    }
    print(json.dumps({"counts": counts, "weights": weights, "figures": report}, indent=2))
    if args.errors:
        for error in errors:
            print("held-out error:", error, file=sys.stderr)
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


def _contradiction_precision(model: AttributionModel, train: list[Statement]) -> float:
    """How often a contradiction verdict was right on the training groups (its confidence)."""
    decided = [s.gold == 0 for s in train if model.verdict(s).cue is not None]
    return round(sum(decided) / len(decided), 3) if decided else 0.5


def _params(model: judge.Logistic) -> tuple[tuple[float, ...], float]:
    return model.weights, model.bias


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
