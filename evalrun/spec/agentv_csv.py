"""AgentV's promptfoo-style CSV tests file, one test per row (docs/eval-files.md, "Tests in
other files"): ``id``, ``input`` (with ``__prefix``/``__suffix``), ``__expected`` columns in
promptfoo's assertion shorthand, ``__description`` (criteria), ``__metric``, ``__threshold``,
``__metadata:KEY`` (``KEY[]`` splits on commas), and every other column a var (``vars.a.b``
nests). The rows become current-format tests, which the current-format mapping then reads.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
from pathlib import Path
from typing import Any

from evalrun.errors import UserError

#: the shorthand's types (``not-`` negates any); ``starts-with`` gets a threshold of 0.75 when
#: it names none, as AgentV gives it; ``latency`` and ``cost`` have no evalrun grader
_TYPES = (
    "contains",
    "contains-any",
    "contains-all",
    "icontains",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "ends-with",
    "regex",
    "is-json",
    "equals",
)
_LISTED = ("contains-any", "contains-all", "icontains-any", "icontains-all")
_SHORTHAND = re.compile(r"^((?:not-)?[a-z][a-z0-9-]*)(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$")


class CsvProblem(UserError, ValueError):
    """A row or column AgentV's CSV reading would refuse, or one evalrun cannot run."""


def csv_cases(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8-sig")
    rows = [r for r in csv.reader(io.StringIO(text, newline="")) if any(cell for cell in r)]
    if not rows:
        return []
    headers = [h.strip() for h in rows[0]]
    return [_case(headers, row, i) for i, row in enumerate(rows[1:])]


def _case(headers: list[str], row: list[str], index: int) -> dict[str, Any]:
    values = {h: (row[i] if i < len(row) else "") for i, h in enumerate(headers) if h}
    case: dict[str, Any] = {}
    vars_: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    asserts: list[dict[str, Any]] = []
    prefix, suffix = values.pop("__prefix", ""), values.pop("__suffix", "")
    metric = values.pop("__metric", "")
    for key, value in values.items():
        if key == "id":
            case["id"] = value
        elif key == "input":
            case["input"] = f"{prefix}{value}{suffix}"
        elif key.startswith("__expected"):
            if value.strip():
                asserts.append(shorthand(value.strip()))
        elif key == "__description":
            if value:
                case["criteria"] = value
        elif key == "__threshold":
            with contextlib.suppress(ValueError):  # a blank or non-number cell sets none
                case["threshold"] = float(value)
        elif key.startswith("__metadata:"):
            _metadata(metadata, key.removeprefix("__metadata:"), value)
        elif key.startswith("__"):
            raise CsvProblem(f"column {key}: evalrun does not read it")
        else:
            _var(vars_, key, value)
    for i, assertion in enumerate(asserts):
        if metric:
            assertion["metric"] = metric if len(asserts) == 1 else f"{metric}-{i + 1}"
    if not str(case.get("id", "")).strip():
        case["id"] = f"row-{index + 1}"
    if asserts:
        case["assert"] = asserts
    if vars_:
        case["vars"] = vars_
    if metadata:
        case["metadata"] = metadata
    return case


def shorthand(expected: str) -> dict[str, Any]:
    """One ``__expected`` cell as an assertion: ``grade:``/``llm-rubric:`` text, ``TYPE:value``,
    ``TYPE(threshold):value``, ``not-TYPE``; anything else is text the output must equal."""
    for head in ("grade:", "llm-rubric:"):
        if expected.startswith(head):
            return {"type": "llm-rubric", "value": expected.removeprefix(head).strip()}
    if expected.startswith(("javascript:", "fn:", "eval:", "python:", "file://")):
        raise CsvProblem(
            f"__expected {expected.split(':', 1)[0]}: code assertions in a CSV cell are not run "
            "by evalrun; use a script grader"
        )
    found = _SHORTHAND.match(expected)
    if found is None:
        return {"type": "equals", "value": expected}
    written, threshold, raw = found.groups()
    negate = written.startswith("not-")
    kind = written.removeprefix("not-")
    if kind not in _TYPES:
        if raw is not None or threshold is not None:
            raise CsvProblem(f"__expected {written}: not one of {', '.join(_TYPES)}")
        return {"type": "equals", "value": expected}
    assertion: dict[str, Any] = {"type": f"not-{kind}" if negate else kind}
    value = raw.strip() if raw is not None else None
    if kind in _LISTED:
        assertion["value"] = [v.strip() for v in value.split(",")] if value else []
    elif value is not None:
        assertion["value"] = value
    if threshold is not None:
        assertion["min_score"] = float(threshold)
    elif kind == "starts-with":
        assertion["min_score"] = 0.75
    return assertion


def _metadata(metadata: dict[str, Any], key: str, value: str) -> None:
    if not value.strip():
        return
    if key.endswith("[]"):
        items = [i.strip().replace("\\,", ",") for i in re.split(r"(?<!\\),", value)]
        metadata[key[:-2]] = [i for i in items if i]
    else:
        metadata[key] = value


def _var(vars_: dict[str, Any], key: str, value: str) -> None:
    path = [p.strip() for p in key.removeprefix("vars.").split(".") if p.strip()]
    if not key.startswith("vars.") or not path:
        vars_[key] = value
        return
    current = vars_
    for part in path[:-1]:
        if not isinstance(current.get(part), dict):
            current[part] = {}
        current = current[part]
    current[path[-1]] = value
