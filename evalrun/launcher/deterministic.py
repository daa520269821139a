"""Graders that need no process and no judge (the ``check`` kinds of ``evalrun/spec/kinds.py``).
They produce the same ``GraderResult`` a script grader would."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from evalrun.results.models import GraderResult
from evalrun.spec.models import GraderSpec


def run_deterministic(spec: GraderSpec, output: str | None) -> GraderResult:
    result = GraderResult(
        name=spec.name or spec.type, status="error", weight=spec.weight, threshold=spec.threshold
    )
    if spec.kind.runs == "unsupported":
        result.reason = spec.kind.why  # an error, never a silent score (docs/eval-files.md)
        return result
    if output is None:
        result.status, result.reason = "unscored", "there is no output to check"
        return result
    try:
        ok, reason = _check(spec, output)
    except ValueError as exc:
        result.reason = str(exc)
        return result
    if spec.negate:
        ok, reason = not ok, f"not ({reason})"
    result.passed = ok
    result.score = 1.0 if ok else 0.0
    result.status = "passed" if ok else "failed"
    result.reason = reason
    (result.hits if ok else result.misses).append(reason)
    return result


def _values(spec: GraderSpec) -> list[str]:
    return [str(v) for v in spec.value] if isinstance(spec.value, list) else [str(spec.value)]


Check = Callable[[GraderSpec, str], tuple[bool, str]]

#: type -> its check: the ``check`` kinds of ``evalrun/spec/kinds.py`` (a test keeps them equal).
CHECKS: dict[str, Check] = {}


def deterministic_check(*types: str) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        CHECKS.update(dict.fromkeys(types, check))
        return check

    return register


def _check(spec: GraderSpec, output: str) -> tuple[bool, str]:
    check = CHECKS.get(spec.type)
    if check is None:
        raise ValueError(f"'{spec.type}' is not a deterministic grader")
    return check(spec, output)


@deterministic_check("contains", "icontains")
def _contains(spec: GraderSpec, output: str) -> tuple[bool, str]:
    fold = (lambda s: s.casefold()) if spec.type == "icontains" else (lambda s: s)
    missing = [v for v in _values(spec) if fold(v) not in fold(output)]
    if missing:
        return False, "output lacks " + ", ".join(repr(v) for v in missing)
    return True, "output contains " + ", ".join(repr(v) for v in _values(spec))


@deterministic_check("contains-all", "icontains-all", "contains-any", "icontains-any")
def _contains_some(spec: GraderSpec, output: str) -> tuple[bool, str]:
    """AgentV's list checks: ``-all`` needs every value, ``-any`` one; ``i`` ignores case."""
    fold = (lambda s: s.casefold()) if spec.type.startswith("i") else (lambda s: s)
    values = _values(spec)
    found = [v for v in values if fold(v) in fold(output)]
    if spec.type.endswith("-all"):
        missing = [v for v in values if v not in found]
        if missing:
            return False, "output lacks " + ", ".join(repr(v) for v in missing)
        return True, "output contains " + ", ".join(repr(v) for v in values)
    if found:
        return True, "output contains " + ", ".join(repr(v) for v in found)
    return False, "output contains none of " + ", ".join(repr(v) for v in values)


@deterministic_check("starts-with", "ends-with")
def _starts_or_ends(spec: GraderSpec, output: str) -> tuple[bool, str]:
    """The output starts or ends with one of the values (both without surrounding whitespace)."""
    text = output.strip()
    test = text.startswith if spec.type == "starts-with" else text.endswith
    where = "starts" if spec.type == "starts-with" else "ends"
    hit = next((v for v in _values(spec) if test(v.strip())), None)
    if hit is not None:
        return True, f"output {where} with {hit!r}"
    values = ", ".join(repr(v) for v in _values(spec))
    return False, f"output does not {where[:-1]} with {values}"


@deterministic_check("regex")
def _regex(spec: GraderSpec, output: str) -> tuple[bool, str]:
    try:
        found = re.search(str(spec.value), output)
    except re.error as exc:
        raise ValueError(f"invalid regex {spec.value!r}: {exc}") from None
    return bool(found), f"regex {spec.value!r} {'matches' if found else 'does not match'}"


@deterministic_check("equals")
def _equals(spec: GraderSpec, output: str) -> tuple[bool, str]:
    same = output.strip() == str(spec.value).strip()
    return same, "output equals the value" if same else "output differs from the value"


@deterministic_check("is-json")
def _is_json(spec: GraderSpec, output: str) -> tuple[bool, str]:
    try:
        json.loads(output)
    except json.JSONDecodeError as exc:
        return False, f"output is not JSON: {exc.msg} at line {exc.lineno}"
    return True, "output is valid JSON"


@deterministic_check("json-schema")
def _json_schema(spec: GraderSpec, output: str) -> tuple[bool, str]:
    try:
        document = json.loads(output)
    except json.JSONDecodeError as exc:
        return False, f"output is not JSON: {exc.msg}"
    problems = validate_schema(document, spec.schema_ or {})
    if problems:
        return False, "; ".join(problems[:5])
    return True, "output matches the schema"


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def validate_schema(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """A compact JSON Schema check: type, enum, const, required, properties,
    additionalProperties, items, min/max (length, items, value) and pattern."""
    problems: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        ok = any(
            isinstance(value, _TYPES.get(n, object))
            and not (n in ("integer", "number") and isinstance(value, bool))
            for n in names
        )
        if not ok:
            return [f"{path}: expected {' or '.join(names)}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: must equal {schema['const']!r}")
    if isinstance(value, dict):
        problems += [f"{path}: missing '{k}'" for k in schema.get("required", []) if k not in value]
        props = schema.get("properties", {})
        for key, sub in props.items():
            if key in value:
                problems += validate_schema(value[key], sub, f"{path}.{key}")
        if schema.get("additionalProperties") is False:
            problems += [f"{path}: unexpected '{k}'" for k in value if k not in props]
    if isinstance(value, list):
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problems += validate_schema(item, schema["items"], f"{path}[{i}]")
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{path}: more than {schema['maxItems']} items")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            problems.append(f"{path}: does not match {schema['pattern']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: above {schema['maximum']}")
    return problems
