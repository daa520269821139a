"""docs/schemas: evalrun's real payloads and the SDK's real results validate against them."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from grader_sdk import Abstain, GraderResult, run_grader
from tests.sdk_helpers import ROOT, FakeProxy, eval_cases, mock_judge

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = ROOT / "docs" / "schemas"


def validator(name: str) -> Any:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


INPUT = validator("grader-input.schema.json")
OUTPUT = validator("grader-output.schema.json")


@pytest.mark.parametrize("eval_name", ["contextual-precision", "contextual-recall"])
def test_launcher_payloads_match_the_input_schema(eval_name: str) -> None:
    import yaml

    from evalrun.launcher.payload import build_payload
    from evalrun.spec.models import EvalFile

    spec = EvalFile.model_validate(
        yaml.safe_load((ROOT / "evals" / f"{eval_name}.eval.yaml").read_text())
    )
    assert isinstance(spec.tests, list)
    for case in spec.tests:
        payload = json.loads(json.dumps(build_payload(case, spec.graders[0], "answer", attempt=1)))
        errors = [e.message for e in INPUT.iter_errors(payload)]
        assert errors == [], case.id


def test_input_schema_rejects_a_wrong_payload() -> None:
    assert not INPUT.is_valid({"protocol": "evalrun.grader/2"})


def run(fn: Any, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = run_grader(fn, io.StringIO(json.dumps(payload)), out, io.StringIO())
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize(
    "value",
    [
        GraderResult(score=0.5, reason="r").hit("h").miss("m").check("c", False, reason="x"),
        GraderResult(passed=True),
        {"checks": [{"text": "t", "pass": True, "score": 1}]},
        0.25,
        True,
    ],
)
def test_sdk_results_match_the_output_schema(value: Any) -> None:
    code, doc = run(lambda inp: value, {})
    assert code == 0
    assert OUTPUT.is_valid(doc), doc


def test_sdk_abstention_matches_the_output_schema() -> None:
    def grade(inp: Any) -> None:
        raise Abstain("no", {"k": 1})

    code, doc = run(grade, {})
    assert code == 3 and OUTPUT.is_valid(doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"score": 1.5},
        {"reason": "only a reason"},
        {"score": "high"},
        {"abstain": True},
        {"checks": [{"text": "t"}]},
    ],
)
def test_output_schema_rejects_bad_results(doc: dict[str, Any]) -> None:
    assert not OUTPUT.is_valid(doc)


@pytest.mark.parametrize(
    ("module", "eval_name"),
    [
        ("graders.contextual_precision", "contextual-precision"),
        ("graders.contextual_recall", "contextual-recall"),
    ],
)
def test_rag_grader_results_match_the_output_schema(
    module: str, eval_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import import_module

    from tests.sdk_helpers import payload_for

    grade = import_module(module).grade
    with FakeProxy(mock_judge(), max_calls=100) as proxy:
        monkeypatch.setenv("AGENTV_TARGET_PROXY_URL", proxy.url)
        monkeypatch.setenv("AGENTV_TARGET_PROXY_TOKEN", proxy.token)
        for case in eval_cases(eval_name):
            code, doc = run(grade, payload_for(case))
            assert code == 0
            errors = [e.message for e in OUTPUT.iter_errors(doc)]
            assert errors == [], case["id"]
