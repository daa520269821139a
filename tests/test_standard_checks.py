"""The deterministic checks follow their standards: ``json-schema`` is JSON Schema as the
``jsonschema`` package reads it, and every schema and regex is checked by ``validate``
(docs/eval-files.md, "Deterministic checks")."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from evalrun.launcher.deterministic import run_deterministic
from evalrun.spec.models import GraderSpec
from tests.conftest import run_cli


def check(schema: dict[str, Any], output: Any) -> tuple[str, str]:
    spec = GraderSpec.model_validate({"type": "json-schema", "schema": schema})
    result = run_deterministic(spec, json.dumps(output))
    return result.status, result.reason or ""


ITEM = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}

#: (schema, output a hand-written subset let through, the error the reason must name)
BROKEN = {
    "anyOf": (
        {"properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
        {"v": "x"},
        "$.v: 'x' is not valid under any of the given schemas",
    ),
    "oneOf": (
        {"properties": {"v": {"oneOf": [{"type": "number"}, {"type": "integer"}]}}},
        {"v": 3},
        "$.v: 3 is valid under each of",
    ),
    "allOf": (
        {"allOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {"a": 1},
        "$: 'b' is a required property",
    ),
    "$ref": (
        {"$defs": {"item": ITEM}, "properties": {"items": {"items": {"$ref": "#/$defs/item"}}}},
        {"items": [{"id": 1}, {"id": 2}, {"id": "x"}]},
        "$.items[2].id: 'x' is not of type 'integer'",
    ),
    "uniqueItems": (
        {"type": "array", "uniqueItems": True},
        [1, 2, 1],
        "$: [1, 2, 1] has non-unique elements",
    ),
    "exclusiveMinimum": (
        {"properties": {"n": {"exclusiveMinimum": 0}}},
        {"n": 0},
        "$.n: 0 is less than or equal to the minimum of 0",
    ),
}


@pytest.mark.parametrize("keyword", list(BROKEN))
def test_json_schema_refuses_output_that_breaks_a_standard_keyword(keyword: str) -> None:
    schema, output, error = BROKEN[keyword]
    status, reason = check(schema, output)
    assert status == "failed"
    assert error in reason


def test_json_schema_names_every_error_by_its_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": ITEM},
            "total": {"type": "number", "minimum": 0},
        },
        "additionalProperties": False,
    }
    output = {"items": [{"id": 1}, {"id": "x"}, {}], "total": -1, "extra": True}
    status, reason = check(schema, output)
    assert status == "failed"
    assert reason.split("; ") == [
        "$.items[1].id: 'x' is not of type 'integer'",
        "$.items[2]: 'id' is a required property",
        "$.total: -1 is less than the minimum of 0",
        "$: Additional properties are not allowed ('extra' was unexpected)",
    ]


def test_json_schema_honours_the_schemas_draft() -> None:
    """Draft 4 spells an exclusive bound as a boolean beside ``minimum``; 2020-12 refuses that."""
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 3}
    assert check({**draft4, "exclusiveMinimum": True}, 3) == (
        "failed",
        "$: 3 is less than or equal to the minimum of 3",
    )
    assert check({**draft4, "exclusiveMinimum": True}, 4) == ("passed", "output matches the schema")
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        GraderSpec.model_validate(
            {"type": "json-schema", "schema": {"minimum": 3, "exclusiveMinimum": True}}
        )


def test_json_schema_passes_output_that_meets_the_schema() -> None:
    schema, _, _ = BROKEN["$ref"]
    assert check(schema, {"items": [{"id": 1}]}) == ("passed", "output matches the schema")


def test_validate_refuses_an_invalid_regex_and_an_unusable_schema(tmp_path: Path) -> None:
    path = tmp_path / "bad.eval.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            target: mock
            graders:
              - type: regex
                value: "total: ([0-9]+"
              - type: json-schema
                schema: {type: objekt}
            tests:
              - id: a
                input: hi
                graders:
                  - type: json-schema
                    schema:
                      properties: {x: {$ref: "#/$defs/missing"}}
                  - type: json-schema
                    schema: {$schema: "https://json-schema.org/draft/2030-01/schema"}
            """
        )
    )
    result = run_cli("validate", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{path}:4: graders[0].value: " in result.stderr
    assert "invalid regex 'total: ([0-9]+': missing ), unterminated subpattern at position 7" in (
        result.stderr
    )
    assert f"{path}:6: graders[1].schema: " in result.stderr
    assert "not a valid JSON Schema (draft2020-12): $.type: 'objekt' is not valid" in result.stderr
    assert f"{path}:12: tests[0].graders[0].schema: " in result.stderr
    assert "$ref '#/$defs/missing' points to nothing in the schema" in result.stderr
    assert f"{path}:15: tests[0].graders[1].schema: " in result.stderr
    assert "unknown $schema 'https://json-schema.org/draft/2030-01/schema'" in result.stderr
    assert "Traceback" not in result.stderr
