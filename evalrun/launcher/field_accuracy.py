"""AgentV's ``field-accuracy`` grader: fields of the output's JSON compared with the test's
expected answer, each by its ``match`` rule, then combined (docs/eval-files.md,
"field-accuracy"). Pure functions: the check in ``deterministic.py`` calls :func:`score_fields`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}
_MISSING = object()


@dataclass(frozen=True)
class FieldResult:
    path: str
    score: float
    weight: float
    hit: bool
    message: str


def score_fields(
    config: dict[str, Any], output: str, expected: Any
) -> tuple[float, str, list[dict[str, Any]]]:
    """The score, a one-line reason and the per-field assertions. ``expected`` is the expected
    answer's last assistant content (a mapping, or JSON text)."""
    fields = config["fields"]  # their form was checked at load (evalrun/spec/agentv_options.py)
    try:
        candidate = parse_json_text(output)
    except ValueError:
        return 0.0, "the output is not JSON", [{"text": "output is not JSON", "pass": False}]
    wanted = _expected_mapping(expected)
    if wanted is None:
        reason = "the test's expected_output holds no JSON object"
        return 0.0, reason, [{"text": reason, "pass": False}]
    results = [_field(field, candidate, wanted) for field in fields]
    checks = [{"text": r.message, "pass": r.hit} for r in results]
    if config.get("aggregation", "weighted_average") == "all_or_nothing":
        score = 1.0 if all(r.hit for r in results) else 0.0
    else:
        total = sum(r.weight for r in results)
        score = sum(r.score * r.weight for r in results) / total if total else 0.0
    hits = sum(r.hit for r in results)
    return min(max(score, 0.0), 1.0), f"{hits} of {len(results)} fields match", checks


def parse_json_text(text: str) -> Any:
    """JSON from a model's answer: code fences dropped, else the first ``{...}`` in it."""
    cleaned = re.sub(r"```(?:json)?\n?", "", text).strip()
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        start, end = cleaned.find("{"), cleaned.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(cleaned[start : end + 1])
            except json.JSONDecodeError:
                pass
    raise ValueError("not JSON")


def _expected_mapping(expected: Any) -> dict[str, Any] | None:
    if isinstance(expected, dict):
        return expected
    if isinstance(expected, str):
        try:
            value = parse_json_text(expected)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


def resolve(value: Any, path: str) -> Any:
    """``a.b[0].c`` in ``value``, or ``_MISSING``."""
    current = value
    for part in (p for p in re.split(r"[.\[\]]", path) if p):
        if isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        elif isinstance(current, dict) and part in current:
            current = current[part]
        else:
            return _MISSING
    return current


def _field(field: dict[str, Any], candidate: Any, expected: dict[str, Any]) -> FieldResult:
    path = field["path"]
    weight = float(field.get("weight", 1.0))
    got, want = resolve(candidate, path), resolve(expected, path)
    if want is _MISSING:
        return FieldResult(path, 1.0, weight, True, f"{path}: no expected value")
    if got is _MISSING:
        if field.get("required", True):
            return FieldResult(path, 0.0, weight, False, f"{path} (required, missing)")
        return FieldResult(path, 1.0, 0.0, True, f"{path}: optional field missing")
    match = field.get("match", "exact")
    if match == "numeric_tolerance":
        return _numeric(field, path, got, want, weight)
    if match == "date":
        return _date(field, path, got, want, weight)
    if _same(got, want):
        return FieldResult(path, 1.0, weight, True, path)
    if type(got) is not type(want) and not _both_numbers(got, want):
        return FieldResult(path, 0.0, weight, False, f"{path} (type mismatch)")
    return FieldResult(path, 0.0, weight, False, f"{path} (value mismatch)")


def _both_numbers(a: Any, b: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))


def _same(a: Any, b: Any) -> bool:
    """Deep equality as JSON means it: 1 equals 1.0, true is no number."""
    if _both_numbers(a, b):
        return bool(a == b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        found = re.match(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", value)
        return float(found.group(0)) if found else None
    return None


def _numeric(field: dict[str, Any], path: str, got: Any, want: Any, weight: float) -> FieldResult:
    a, b = _number(got), _number(want)
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return FieldResult(path, 0.0, weight, False, f"{path} (non-numeric value)")
    tolerance = float(field.get("tolerance", 0))
    diff = abs(a - b)
    measured = diff / abs(b) if field.get("relative") and b != 0 else diff
    if measured <= tolerance:
        return FieldResult(path, 1.0, weight, True, f"{path} (within tolerance: diff={diff:.2f})")
    return FieldResult(
        path,
        0.0,
        weight,
        False,
        f"{path} (outside tolerance: diff={diff:.2f}, tolerance={field.get('tolerance', 0)})",
    )


def _date(field: dict[str, Any], path: str, got: Any, want: Any, weight: float) -> FieldResult:
    formats = field.get("formats") or []
    a, b = parse_date(str(got), formats), parse_date(str(want), formats)
    if a is None:
        return FieldResult(path, 0.0, weight, False, f"{path} (unparseable candidate date)")
    if b is None:
        return FieldResult(path, 0.0, weight, False, f"{path} (unparseable expected date)")
    if a == b:
        return FieldResult(path, 1.0, weight, True, path)
    return FieldResult(path, 0.0, weight, False, f"{path} (date mismatch: got {a}, expected {b})")


def parse_date(text: str, formats: list[Any]) -> date | None:
    """A calendar day from ISO (``2025-01-15``, with a time or not), ``15-JAN-2025``, or
    ``01/15/2025`` / ``15/01/2025``: day or month first as ``formats`` name it (``MM/DD``,
    ``DD/MM``), else a number above 12 is the day, else month first."""
    text = text.strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date()
    except ValueError:
        pass
    named = re.fullmatch(r"(\d{1,2})-([A-Za-z]{3,9})-(\d{4})", text)
    if named and named.group(2).lower() in _MONTHS:
        return _day(int(named.group(3)), _MONTHS[named.group(2).lower()], int(named.group(1)))
    numeric = re.fullmatch(r"(\d{1,2})[/-](\d{1,2})[/-](\d{4})", text)
    if numeric is None:
        return None
    first, second, year = (int(g) for g in numeric.groups())
    written = [str(f) for f in formats]
    us = any("MM/DD" in f or "MM-DD" in f for f in written)
    eu = any("DD/MM" in f or "DD-MM" in f for f in written)
    if us != eu:  # the formats say which comes first
        return _day(year, first, second) if us else _day(year, second, first)
    if first > 12 >= second:  # else the numbers say, or month first
        return _day(year, second, first)
    return _day(year, first, second)


def _day(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None
