"""Weighted rubrics: load a rubric, score precomputed metrics, combine grader scores.

A rubric is a list of criteria (name, weight, [min_value, max_value]). A metric is clamped to its
criterion's range and normalised to 0..1; the weighted score is the weight-averaged normalised
value. Criteria with no metric are listed as missing and, by default, left out of the average
rather than counted as 0 (an absent measurement is not a bad one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalrun.errors import UserError
from evalrun.yamlsource import (
    SourceError,
    load_yaml_with_lines,
    validate_keeping_text,
    validation_error_message,
)

MissingPolicy = Literal["skip", "zero"]
Label = Literal["excellent", "pass", "warning", "fail", "none"]


class RubricError(UserError):
    """A rubric that cannot be found or is invalid; the CLI exits 2 on it."""


class Criterion(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    weight: float = Field(ge=0)
    description: str = ""
    min_value: float = 0.0
    max_value: float = 1.0

    @model_validator(mode="after")
    def _range(self) -> Criterion:
        if not self.max_value > self.min_value:
            raise ValueError(
                f"max_value ({self.max_value}) must be greater than min_value ({self.min_value})"
            )
        return self

    def normalise(self, value: float) -> float:
        clamped = min(max(value, self.min_value), self.max_value)
        return (clamped - self.min_value) / (self.max_value - self.min_value)


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    pass_: float = Field(0.7, alias="pass", ge=0, le=1)
    excellent: float = Field(0.9, ge=0, le=1)
    warning: float = Field(0.5, ge=0, le=1)


class Rubric(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = ""
    version: str | None = None
    description: str = ""
    criteria: list[Criterion] = Field(min_length=1)
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @model_validator(mode="after")
    def _check(self) -> Rubric:
        seen: set[str] = set()
        for criterion in self.criteria:
            key = name_key(criterion.name)
            if key in seen:
                raise ValueError(f"duplicate criterion '{criterion.name}'")
            seen.add(key)
        if sum(c.weight for c in self.criteria) <= 0:
            raise ValueError("the criteria weights must not all be 0")
        return self

    def label(self, score: float | None) -> Label:
        if score is None:
            return "none"
        if score >= self.thresholds.excellent:
            return "excellent"
        if score >= self.thresholds.pass_:
            return "pass"
        if score >= self.thresholds.warning:
            return "warning"
        return "fail"


@dataclass
class RubricScore:
    weighted_score: float | None
    total_score: float | None
    criterion_scores: dict[str, float] = field(default_factory=dict)
    normalized: dict[str, float] = field(default_factory=dict)
    missing_criteria: list[str] = field(default_factory=list)
    invalid: dict[str, Any] = field(default_factory=dict)
    label: Label = "none"

    def to_dict(self) -> dict[str, Any]:
        return {
            "weighted_score": self.weighted_score,
            "total_score": self.total_score,
            "label": self.label,
            "criterion_scores": self.criterion_scores,
            "normalized": self.normalized,
            "missing_criteria": self.missing_criteria,
            "invalid": self.invalid,
        }


def name_key(name: str) -> str:
    """Criterion/metric names match case-insensitively with ``-``, ``_`` and spaces alike."""
    return re.sub(r"[\s_\-]+", "_", name.strip().lower())


def _lookup(metrics: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    if name in metrics:
        return True, metrics[name]
    wanted = name_key(name)
    for key, value in metrics.items():
        if isinstance(key, str) and name_key(key) == wanted:
            return True, value
    return False, None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def score(
    rubric: Rubric, metrics: Mapping[str, Any], *, missing: MissingPolicy = "skip"
) -> RubricScore:
    """Clamp, normalise and weight-average ``metrics`` by ``rubric``.

    ``missing="skip"`` leaves absent (or non-numeric) criteria out of both means;
    ``missing="zero"`` counts them as the bottom of their range.
    """
    result = RubricScore(weighted_score=None, total_score=None)
    weighted_sum = weight_total = plain_sum = 0.0
    counted = 0
    for criterion in rubric.criteria:
        found, raw = _lookup(metrics, criterion.name)
        value = _number(raw) if found else None
        if found and value is None:
            result.invalid[criterion.name] = raw
        if value is None:
            result.missing_criteria.append(criterion.name)
            if missing == "skip":
                continue
            value = criterion.min_value
        else:
            clamped = min(max(value, criterion.min_value), criterion.max_value)
            result.criterion_scores[criterion.name] = clamped
            result.normalized[criterion.name] = criterion.normalise(value)
        normalised = criterion.normalise(value)
        weighted_sum += criterion.weight * normalised
        weight_total += criterion.weight
        plain_sum += normalised
        counted += 1
    if counted:
        result.total_score = plain_sum / counted
        result.weighted_score = weighted_sum / weight_total if weight_total > 0 else None
    result.label = rubric.label(result.weighted_score)
    return result


def combine(
    rubric: Rubric | str | Path,
    grader_scores: Mapping[str, float | None],
    *,
    rubrics_dir: Path | None = None,
) -> float | None:
    """A case score from its graders' scores, weighted by the rubric's criteria.

    Criteria match grader names. Grader scores are already 0..1 (the grader protocol), so only the
    weights apply, not the criteria ranges. Graders that abstained (None) or that the rubric does
    not name are left out; None when no criterion has a score.
    """
    if not isinstance(rubric, Rubric):
        rubric = load_rubric(rubric, rubrics_dir=rubrics_dir)
    weighted_sum = weight_total = 0.0
    for criterion in rubric.criteria:
        found, raw = _lookup(grader_scores, criterion.name)
        value = _number(raw) if found else None
        if value is None:
            continue
        weighted_sum += criterion.weight * min(max(value, 0.0), 1.0)
        weight_total += criterion.weight
    if weight_total <= 0:
        return None
    return weighted_sum / weight_total


def search_dirs(rubrics_dir: Path | None = None, cwd: Path | None = None) -> list[Path]:
    """``--rubrics DIR``, then ``./rubrics``, then the copy installed with the package."""
    from rubrics import rubrics_dir as bundled_dir

    dirs: list[Path] = []
    if rubrics_dir is not None:
        dirs.append(rubrics_dir)
    dirs.append((cwd or Path.cwd()) / "rubrics")
    dirs.append(bundled_dir())
    unique: list[Path] = []
    for folder in dirs:
        if folder.resolve() not in [u.resolve() for u in unique]:
            unique.append(folder)
    return unique


def _looks_like_path(name: str) -> bool:
    return name.endswith((".yaml", ".yml", ".json")) or "/" in name or "\\" in name


def find_rubric(name: str | Path, rubrics_dir: Path | None = None) -> Path:
    if isinstance(name, Path) or _looks_like_path(str(name)):
        path = Path(name)
        if not path.is_file():
            raise RubricError(f"rubric file not found: {path}")
        return path
    if rubrics_dir is not None and not rubrics_dir.is_dir():
        raise RubricError(f"rubrics folder not found: {rubrics_dir}")
    for folder in search_dirs(rubrics_dir):
        for suffix in (".yaml", ".yml"):
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    known = ", ".join(r.name for r in list_rubrics(rubrics_dir)) or "none"
    raise RubricError(f"unknown rubric '{name}' (available: {known})")


def load_rubric_file(path: Path) -> Rubric:
    try:
        parsed = load_yaml_with_lines(path)
    except SourceError as exc:
        raise RubricError(str(exc)) from None
    data = parsed.data
    if not isinstance(data, dict) or "criteria" not in data:
        raise RubricError(f"{path}: not a weighted rubric (expected a mapping with 'criteria:')")
    data.setdefault("name", path.stem)
    try:
        return validate_keeping_text(Rubric, data, parsed, path)[0]
    except Exception as exc:  # pydantic.ValidationError
        raise RubricError(validation_error_message(path, exc, parsed.lines)) from None


def load_rubric(name: str | Path, *, rubrics_dir: Path | None = None) -> Rubric:
    """A rubric by file path or by name (searched as :func:`search_dirs` says)."""
    return load_rubric_file(find_rubric(name, rubrics_dir))


@dataclass
class RubricEntry:
    name: str
    path: Path
    criteria: int
    description: str


def list_rubrics(rubrics_dir: Path | None = None) -> list[RubricEntry]:
    """Weighted rubrics on the search path; an earlier folder shadows a later one's name.

    Judge definitions (files without ``criteria``) and invalid files are skipped.
    """
    entries: dict[str, RubricEntry] = {}
    for folder in search_dirs(rubrics_dir):
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            if path.stem in entries:
                continue
            try:
                rubric = load_rubric_file(path)
            except RubricError:
                continue
            entries[path.stem] = RubricEntry(
                path.stem, path, len(rubric.criteria), rubric.description.strip()
            )
    return sorted(entries.values(), key=lambda e: e.name)


@lru_cache(maxsize=32)
def rubric_for_eval(name: str, base_dir: Path | None = None) -> Rubric:
    """The rubric an eval file names (``rubric: NAME``): a path relative to the eval file's
    folder, or a name searched in ``<that folder>/rubrics``, ``./rubrics``, then the bundle."""
    if base_dir is not None and _looks_like_path(name):
        candidate = Path(name) if Path(name).is_absolute() else base_dir / name
        return load_rubric_file(find_rubric(candidate))
    local = base_dir / "rubrics" if base_dir is not None else None
    return load_rubric(name, rubrics_dir=local if local is not None and local.is_dir() else None)


def combine_grader_scores(
    rubric: str, scores: Mapping[str, float | None], *, base_dir: Path | None = None
) -> float | None:
    """:func:`combine` for the runner: the case score when an eval file sets ``rubric:``."""
    return combine(rubric_for_eval(rubric, base_dir), scores)
