"""Calibrated verdicts for the ``local`` judge's typed tasks.

Raw e5 cosines crowd into a narrow band (about 0.7-0.95 for any two English sentences), so no
fixed cosine threshold separates "relevant" from "on the same topic". Each verdict is a small
logistic model over a few features: the cosine, its position within the batch (the other
passages of the retrieval list), and lexical evidence (which numbers and names of the claim the
passage holds, or contradicts). The weights come from bench/calibrate_local.py, fitted on
tests/data/local_judge_calibration.yaml, and live in calibration.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np

from evalrun.targets.local import calibration as cal
from evalrun.targets.local.cues import Cues, clauses, compare, facts
from evalrun.targets.local.model import Mode
from evalrun.targets.local.text import (
    coverage,
    lexical,
    predicate_of,
    resolve_pronouns,
    sentences,
    subject_of,
)

RELEVANCE_FEATURES = ("cosine", "gap_to_best", "about_top_subject", "query_words")
#: Columns of RELEVANCE_FEATURES each model reads: within a list, and for a lone passage.
BATCH_COLUMNS = (0, 1, 2)
SINGLE_COLUMNS = (0, 3)
ATTRIBUTION_FEATURES = ("cosine", "predicate_cosine", "numbers", "conflict", "words")
#: The ranking model reads the first four; "words" only explains the verdict. The decision model
#: reads cosine, predicate_cosine, then cues of the unit's aligned clause in place of "numbers"
#: ("numbers_found": the claim has figures and all are there), conflict, and the cues
#: "other_name" and "cross_lingual" (DECISION_FEATURES).
ATTRIBUTION_COLUMNS = (0, 1, 2, 3)
DECISION_FEATURES = (
    "cosine", "predicate_cosine", "numbers_found", "conflict", "other_name", "cross_lingual",
)  # fmt: skip


class Encoder(Protocol):
    def encode(self, texts: list[str], mode: Mode = "passage") -> np.ndarray: ...


@dataclass(frozen=True)
class Logistic:
    """p = sigmoid(w . x + b) on raw feature values."""

    weights: tuple[float, ...]
    bias: float

    def logit(self, features: Sequence[float]) -> float:
        return float(np.dot(self.weights, features)) + self.bias

    def probability(self, features: Sequence[float]) -> float:
        z = self.logit(features)
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))


@dataclass(frozen=True)
class Verdict:
    ok: bool
    probability: float
    features: tuple[float, ...]
    node: int | None = None
    evidence: str = ""
    list_size: int = 1
    cue: str | None = None
    """The contradiction cue that decided a "no" (docs/local-judge.md), if one did."""
    abstained: bool = False
    """The probability fell in the calibrated uncertain band, or ``unsure_name``: cannot tell."""
    unsure_name: bool = False
    """A "yes" that rests on a passage naming another entity than the statement does."""

    @property
    def confidence(self) -> float:
        return round(self.probability if self.ok else 1.0 - self.probability, 3)


RELEVANCE_BATCH = Logistic(*cal.RELEVANCE_BATCH)
RELEVANCE_SINGLE = Logistic(*cal.RELEVANCE_SINGLE)
ATTRIBUTION_RANK = Logistic(*cal.ATTRIBUTION_RANK)
ATTRIBUTION = Logistic(*cal.ATTRIBUTION)


def relevance_features(encoder: Encoder, query: str, passages: list[str]) -> np.ndarray:
    """One row per passage: RELEVANCE_FEATURES, relative to the whole list.

    ``about_top_subject`` marks a passage that names the subject of the list's best match when
    the query does not: "Paris is often referred to as the City of Light" after "Paris is the
    capital of France" is about the answer, even though it does not state it.
    """
    q = encoder.encode([query], "query")[0]
    cosines = encoder.encode(passages, "passage") @ q
    claim = lexical(query)
    best = int(np.argmax(cosines))
    opening = sentences(passages[best])
    answer = lexical(" ".join(subject_of(opening[0] if opening else passages[best]))).stems
    answer -= claim.stems
    rows = []
    for i, (cosine, passage) in enumerate(zip(cosines.tolist(), passages, strict=True)):
        words = lexical(passage)
        about = float(i != best and bool(answer & words.stems))
        rows.append([cosine, cosine - cosines[best], about, coverage(claim, words)[0]])
    return np.array(rows, dtype=np.float64)


def judge_relevance(
    encoder: Encoder, query: str, passage: str, siblings: list[str] | None = None
) -> Verdict:
    """Is ``passage`` relevant to ``query``? Decided within its list when siblings are given."""
    batch = [s for s in (siblings or []) if isinstance(s, str) and s.strip()]
    if passage not in batch:
        batch.append(passage)
    row = relevance_features(encoder, query, batch)[batch.index(passage)]
    model, columns = (
        (RELEVANCE_BATCH, BATCH_COLUMNS) if len(batch) >= 2 else (RELEVANCE_SINGLE, SINGLE_COLUMNS)
    )
    features = tuple(float(row[i]) for i in columns)
    p = model.probability(features)
    band = cal.RELEVANCE_BAND
    return Verdict(
        ok=p >= 0.5,
        probability=p,
        features=tuple(float(x) for x in row),
        list_size=len(batch),
        abstained=band[0] < p < band[1],
    )


@dataclass(frozen=True)
class Units:
    """Attribution candidates: each clause, and the sentences and passages made of several.

    ``members[i]`` lists the clause units unit ``i`` is made of (a clause: itself). Contradiction
    cues are read on clauses, where meaning lives; support may come from any unit.
    """

    texts: list[str]
    nodes: list[int]
    members: list[list[int]]
    sentences: list[str]
    """The sentence each unit belongs to (a passage unit: the passage)."""

    @property
    def clauses(self) -> list[int]:
        return [i for i, m in enumerate(self.members) if m == [i]]


def attribution_units(context: list[str]) -> Units:
    """Cached by context: the RAG graders send one context with every statement."""
    return _units(tuple(context))


@lru_cache(maxsize=1024)
def _units(context: tuple[str, ...]) -> Units:
    """Units have their leading pronouns resolved, so "It was completed in 1889." reads as
    "The Eiffel Tower was completed in 1889." after a passage about the tower."""
    texts: list[str] = []
    nodes: list[int] = []
    members: list[list[int]] = []
    within: list[str] = []

    def add(text: str, node: int, parts: list[int] | None, sentence: str = "") -> int:
        texts.append(text)
        nodes.append(node)
        within.append(sentence or text)
        members.append(parts if parts is not None else [len(texts) - 1])
        return len(texts) - 1

    for node, parts in enumerate(resolve_pronouns(context), start=1):
        sentences_of = parts or [context[node - 1]]
        passage_clauses: list[int] = []
        for sentence in sentences_of:
            pieces = clauses(sentence)
            if len(pieces) > 1:
                own = [add(piece, node, None, sentence) for piece in pieces]
                if len(sentences_of) == 1:
                    add(" ".join(sentences_of), node, own)
                else:
                    add(sentence, node, own)
            else:
                own = [add(sentence, node, None)]
            passage_clauses += own
        if len(sentences_of) > 1:
            add(" ".join(sentences_of), node, passage_clauses)
    return Units(texts, nodes, members, within)


def attribution_features(encoder: Encoder, statement: str, units: list[str]) -> np.ndarray:
    """One row per unit: ATTRIBUTION_FEATURES."""
    vectors = encoder.encode(units, "passage")
    whole = vectors @ encoder.encode([statement], "passage")[0]
    predicate = vectors @ encoder.encode([predicate_of(statement)], "query")[0]
    claim = lexical(statement)
    rows = []
    for cos, pred, unit in zip(whole.tolist(), predicate.tolist(), units, strict=True):
        words, numbers, conflict = coverage(claim, lexical(unit))
        rows.append([cos, pred, numbers, conflict, words])
    return np.array(rows, dtype=np.float64)


@dataclass(frozen=True)
class Alignment:
    """A statement against its context: features per unit, cues per unit (of its aligned clause)."""

    units: Units
    rows: np.ndarray
    cues: list[Cues]
    rank: list[float]

    def best(self, clean: bool = False) -> int | None:
        pool = [i for i, c in enumerate(self.cues) if not clean or c.reason is None]
        return max(pool, key=lambda i: self.rank[i]) if pool else None

    def decision_row(self, unit: int) -> list[float]:
        row = self.rows[unit]
        cue = self.cues[unit]
        cosine, predicate, _, conflict = (float(row[i]) for i in ATTRIBUTION_COLUMNS)
        return [cosine, predicate, float(cue.numbers_found), conflict, float(cue.other_name),
                float(cue.cross_lingual)]  # fmt: skip


def align(
    encoder: Encoder, statement: str, context: list[str], rank: Logistic | None = None
) -> Alignment:
    rank = rank or ATTRIBUTION_RANK
    units = attribution_units(context)
    rows = attribution_features(encoder, statement, units.texts)
    claim, everything = facts(statement), facts(" ".join(context))
    clause_cues = {
        i: compare(claim, facts(units.texts[i]), facts(units.sentences[i]), everything)
        for i in units.clauses
    }
    fit = rows[:, 0] + rows[:, 1]
    cues = [clause_cues[max(m, key=lambda i: fit[i])] for m in units.members]
    logits = [rank.logit(row[list(ATTRIBUTION_COLUMNS)]) for row in rows]
    return Alignment(units, rows, cues, logits)


def judge_attribution(encoder: Encoder, statement: str, context: list[str]) -> Verdict:
    """Can ``statement`` be attributed to a passage of ``context``? Which one (1-based)?

    The best-aligned unit decides when its clause contradicts the statement (not supported,
    whatever the similarity), unless a unit without any cue supports it confidently; otherwise
    the calibrated model reads the best unit without cues, and abstains in the uncertain band.
    """
    alignment = align(encoder, statement, context)
    if not alignment.units.texts:
        return Verdict(ok=False, probability=0.0, features=())
    return attribution_verdict(alignment, ATTRIBUTION, cal.ATTRIBUTION_KEEP, cal.ATTRIBUTION_BAND)


def attribution_verdict(
    alignment: Alignment, model: Logistic, keep: float, band: tuple[float, float]
) -> Verdict:
    best, clean = alignment.best(), alignment.best(clean=True)
    if best is None:  # no unit to read (judge_attribution answers this before aligning)
        return Verdict(ok=False, probability=0.0, features=())
    p = model.probability(alignment.decision_row(clean)) if clean is not None else 0.0
    cue = alignment.cues[best].reason
    if cue is not None and p < keep:
        return Verdict(
            ok=False,
            probability=1.0 - cal.CONTRADICTION_CONFIDENCE,
            features=tuple(float(x) for x in alignment.rows[best]),
            node=alignment.units.nodes[best],
            evidence=alignment.units.texts[best],
            cue=cue,
        )
    unit = clean if clean is not None else best
    # Another name where the statement has one, and the context never uses the statement's:
    # an alias ("Chomolungma" for Everest) or another entity ("Tokyo" for Kyoto) read alike to
    # the embedding and to the words, so a "yes" there is a guess.
    unsure_name = p >= 0.5 and alignment.cues[unit].other_name
    return Verdict(
        ok=p >= 0.5,
        probability=p,
        features=tuple(float(x) for x in alignment.rows[unit]),
        node=alignment.units.nodes[unit],
        evidence=alignment.units.texts[unit],
        abstained=band[0] < p < band[1] or unsure_name,
        unsure_name=unsure_name,
    )


def similarity(encoder: Encoder, output: str, expected: str) -> tuple[float, int, float, float]:
    """(similarity 0..1, choice 1..5, cosine, word overlap) of an output and the expected one."""
    vectors = encoder.encode([output, expected], "query")
    cosine = float(vectors[0] @ vectors[1])
    overlap = word_overlap(output, expected)
    score = similarity_score(cosine, overlap, cal.SIMILARITY)
    return score, similarity_choice(score), cosine, overlap


def word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' content stems."""
    left, right = lexical(a).stems, lexical(b).stems
    union = left | right
    return len(left & right) / len(union) if union else 1.0


def similarity_score(cosine: float, overlap: float, coefficients: Sequence[float]) -> float:
    slope_cos, slope_words, intercept = coefficients
    return min(1.0, max(0.0, slope_cos * cosine + slope_words * overlap + intercept))


def similarity_choice(score: float) -> int:
    """The 1..5 choice whose usual score (0, .25, .5, .75, 1) is nearest to ``score``."""
    return 1 + int(math.floor(score * 4 + 0.5))
