"""AgentV's field-accuracy grader (docs/eval-files.md, "field-accuracy"): each match rule, both
aggregations, its options refused at load, and a run that scores it from the test's
expected_output."""

from __future__ import annotations

import json
import textwrap
from datetime import date
from pathlib import Path

import pytest

from evalrun.launcher.deterministic import run_deterministic
from evalrun.launcher.field_accuracy import parse_date
from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.spec.models import GraderSpec, Message
from tests.conftest import read_bundle, run_cli

EXPECTED = [
    Message(
        role="assistant",
        content={
            "invoice": "INV-1",
            "date": "15-JAN-2025",
            "total": 100,
            "supplier": {"name": "Acme"},
            "items": [{"price": 5}, {"price": 7}],
        },
    )
]


def grade(fields: list[dict], output: object, aggregation: str | None = None, **spec: object):
    config: dict[str, object] = {"fields": fields}
    if aggregation:
        config["aggregation"] = aggregation
    grader = GraderSpec(type="field-accuracy", config=config, **spec)  # type: ignore[arg-type]
    text = output if isinstance(output, str) else json.dumps(output)
    return run_deterministic(grader, text, None, EXPECTED)


def test_exact_fields_are_weighted_and_missing_required_ones_count_zero() -> None:
    fields = [
        {"path": "invoice", "match": "exact", "weight": 2},
        {"path": "supplier.name", "match": "exact"},
        {"path": "items[1].price", "match": "exact"},
    ]
    right = grade(
        fields, {"invoice": "INV-1", "supplier": {"name": "Acme"}, "items": [{}, {"price": 7.0}]}
    )
    assert (right.score, right.status) == (1.0, "passed")
    missing = grade(fields, {"supplier": {"name": "Acme"}, "items": [{}, {"price": 7}]})
    assert missing.score == pytest.approx(2 / 4)
    assert "invoice (required, missing)" in missing.misses
    wrong_type = grade([{"path": "total", "match": "exact"}], {"total": "100"})
    assert wrong_type.score == 0.0 and "total (type mismatch)" in wrong_type.misses


def test_an_optional_missing_field_does_not_count_and_no_expected_value_passes() -> None:
    fields = [
        {"path": "invoice", "match": "exact"},
        {"path": "supplier.name", "match": "exact", "required": False},
        {"path": "not_expected", "match": "exact"},
    ]
    result = grade(fields, {"invoice": "INV-1"})
    assert result.score == 1.0
    assert "supplier.name: optional field missing" in result.hits


def test_numeric_tolerance_absolute_and_relative() -> None:
    absolute = [{"path": "total", "match": "numeric_tolerance", "tolerance": 1}]
    assert grade(absolute, {"total": 100.5}).score == 1.0
    assert grade(absolute, {"total": "101.5 USD"}).score == 0.0
    relative = [{"path": "total", "match": "numeric_tolerance", "tolerance": 0.1, "relative": True}]
    assert grade(relative, {"total": 109}).score == 1.0
    assert grade(relative, {"total": 111}).score == 0.0
    assert grade(absolute, {"total": "n/a"}).misses == ["total (non-numeric value)"]


@pytest.mark.parametrize(
    ("text", "formats", "day"),
    [
        ("2025-01-15", [], date(2025, 1, 15)),
        ("2025-01-15T10:00:00Z", [], date(2025, 1, 15)),
        ("15-Jan-2025", [], date(2025, 1, 15)),
        ("01/02/2025", ["MM/DD/YYYY"], date(2025, 1, 2)),
        ("01/02/2025", ["DD/MM/YYYY"], date(2025, 2, 1)),
        ("15/01/2025", [], date(2025, 1, 15)),
        ("01/15/2025", [], date(2025, 1, 15)),
        ("15.01.2025", [], None),
    ],
)
def test_dates_parse_as_agentv_reads_them(text: str, formats: list[str], day: date | None) -> None:
    assert parse_date(text, formats) == day


def test_date_fields_compare_the_calendar_day() -> None:
    fields = [{"path": "date", "match": "date", "formats": ["DD-MMM-YYYY", "YYYY-MM-DD"]}]
    assert grade(fields, {"date": "2025-01-15"}).score == 1.0
    assert grade(fields, {"date": "2025-01-16"}).misses == [
        "date (date mismatch: got 2025-01-16, expected 2025-01-15)"
    ]


def test_all_or_nothing_and_the_threshold() -> None:
    fields = [{"path": "invoice", "match": "exact"}, {"path": "total", "match": "exact"}]
    half = {"invoice": "INV-1", "total": 1}
    assert grade(fields, half).score == 0.5
    assert grade(fields, half, "all_or_nothing").score == 0.0
    assert grade(fields, half, threshold=0.5).status == "passed"
    assert grade(fields, half, threshold=0.8).status == "failed"
    assert grade(fields, half, negate=True).score == 0.5


def test_output_that_is_not_json_or_no_expected_object_fails() -> None:
    fields = [{"path": "invoice", "match": "exact"}]
    assert grade(fields, "no json here").misses == ["output is not JSON"]
    fenced = grade(fields, '```json\n{"invoice": "INV-1"}\n```')
    assert fenced.score == 1.0
    spec = GraderSpec(type="field-accuracy", config={"fields": fields})
    bare = run_deterministic(spec, '{"invoice": "INV-1"}', None, [])
    assert bare.score == 0.0 and "expected_output holds no JSON object" in bare.reason


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("{}", "field-accuracy needs 'fields'"),
        ("{fields: [{match: exact}]}", "fields[0] needs 'path'"),
        ("{fields: [{path: a, match: fuzzy}]}", "fields[0].match must be one of"),
        ("{fields: [{path: a}], aggregation: mean}", "aggregation must be one of"),
    ],
)
def test_bad_options_are_refused_at_the_graders_line(
    tmp_path: Path, options: str, message: str
) -> None:
    path = tmp_path / "f.eval.yaml"
    path.write_text(
        "tests:\n  - id: a\n    input: q\n    graders:\n"
        f"      - type: field-accuracy\n        config: {options}\n"
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert f"{path}:5: tests[0].graders[0]: {message}" in str(caught.value)


def test_agentvs_spelling_loads_onto_the_check(tmp_path: Path) -> None:
    """Options on the grader go to its config, vars.expected_output is what it compares with,
    and it passes at AgentV's 0.8 unless the file says otherwise."""
    path = tmp_path / "extract.eval.yaml"
    path.write_text(
        "providers: [mock]\nprompts: ['{{ input }}']\ntests:\n  - id: a\n    assert:\n"
        "      - {type: field-accuracy, aggregation: all_or_nothing, fields: [{path: n}]}\n"
        "    vars: {input: q, expected_output: [{role: assistant, content: {n: 1}}]}\n"
    )
    case = load_eval(path).tests[0]
    grader = case.graders[0]
    assert grader.config == {"aggregation": "all_or_nothing", "fields": [{"path": "n"}]}
    assert grader.threshold == 0.8
    assert run_deterministic(grader, '{"n": 1}', None, case.expected_messages).score == 1.0
    assert run_deterministic(grader, '{"n": 2}', None, case.expected_messages).score == 0.0


@pytest.mark.slow  # a real run: 2-4 s
def test_a_run_scores_field_accuracy_from_the_expected_output(tmp_path: Path) -> None:
    """AgentV's spelling end to end: options on the grader, expected_output in vars, AgentV's
    0.8 pass mark."""
    path = tmp_path / "extract.eval.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            providers: [mock]
            prompts: ["{{ input }}"]
            assert:
              - metric: fields
                type: field-accuracy
                fields:
                  - {path: invoice, match: exact, weight: 3}
                  - {path: total, match: numeric_tolerance, tolerance: 1}
            tests:
              - id: close
                output: '{"invoice": "INV-1", "total": 100.4}'
                vars:
                  input: Extract.
                  expected_output: [{role: assistant, content: {invoice: INV-1, total: 100}}]
              - id: wrong-total
                output: '{"invoice": "INV-1", "total": 250}'
                vars:
                  input: Extract.
                  expected_output: [{role: assistant, content: {invoice: INV-1, total: 100}}]
            """
        )
    )
    out = tmp_path / "out"
    result = run_cli(str(path), "--out", str(out), "-q")
    rows = {row["id"]: row for row in read_bundle(out)[0]}
    assert result.returncode == 1, result.stderr
    close, wrong = rows["close"]["graders"][0], rows["wrong-total"]["graders"][0]
    assert (close["name"], close["score"], close["status"]) == ("fields", 1.0, "passed")
    assert (wrong["score"], wrong["status"], wrong["threshold"]) == (0.75, "failed", 0.8)
