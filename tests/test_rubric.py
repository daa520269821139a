"""evalrun.rubric: loading and search order, clamp/normalise/weight, missing criteria, combine."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest
from build_helpers import run_in_built_copy

from evalrun.rubric import (
    Rubric,
    RubricError,
    combine,
    list_rubrics,
    load_rubric,
    score,
)

TWO = """
name: two
description: Two criteria.
criteria:
  - {name: accuracy, weight: 3, min_value: 0, max_value: 1}
  - {name: style, weight: 1, min_value: 1, max_value: 5}
"""


def two() -> Rubric:
    import yaml

    return Rubric.model_validate(yaml.safe_load(TWO))


def test_bundled_rubrics_load_and_judge_definitions_are_not_rubrics() -> None:
    names = {entry.name: entry for entry in list_rubrics()}
    assert {"default", "agent", "code", "rag"} <= set(names)
    assert not {"quality", "pattern", "prompt_standard"} & set(names)
    for name in ("default", "agent", "code", "rag"):
        rubric = load_rubric(name)
        assert rubric.criteria and names[name].criteria == len(rubric.criteria)
        assert sum(c.weight for c in rubric.criteria) == pytest.approx(1.0)
    with pytest.raises(RubricError, match="not a weighted rubric"):
        load_rubric("quality")


def test_clamp_normalise_and_weight() -> None:
    result = score(two(), {"accuracy": 1.4, "style": 3})
    assert result.criterion_scores == {"accuracy": 1.0, "style": 3.0}
    assert result.normalized == {"accuracy": 1.0, "style": 0.5}
    assert result.weighted_score == pytest.approx((3 * 1.0 + 1 * 0.5) / 4)
    assert result.total_score == pytest.approx(0.75)
    low = score(two(), {"accuracy": -2, "style": 0})
    assert low.weighted_score == 0.0 and low.criterion_scores == {"accuracy": 0.0, "style": 1.0}


def test_missing_criteria_are_listed_and_skipped_or_zeroed() -> None:
    skipped = score(two(), {"style": 5, "unrelated": 1})
    assert skipped.missing_criteria == ["accuracy"]
    assert skipped.weighted_score == 1.0
    zeroed = score(two(), {"style": 5}, missing="zero")
    assert zeroed.missing_criteria == ["accuracy"]
    assert zeroed.weighted_score == pytest.approx(0.25)
    nothing = score(two(), {})
    assert nothing.weighted_score is None and nothing.label == "none"
    assert nothing.missing_criteria == ["accuracy", "style"]


def test_non_numeric_values_count_as_missing_and_names_match_loosely() -> None:
    result = score(two(), {"Accuracy": "0.5", "style": "great"})
    assert result.normalized == {"accuracy": 0.5}
    assert result.invalid == {"style": "great"}
    assert result.missing_criteria == ["style"]


def test_labels_follow_thresholds() -> None:
    rubric = two()
    assert [rubric.label(v) for v in (0.95, 0.9, 0.7, 0.5, 0.49)] == [
        "excellent",
        "excellent",
        "pass",
        "warning",
        "fail",
    ]


def test_combine_weights_grader_scores_and_skips_abstentions() -> None:
    rag = load_rubric("rag")
    scores = {"contextual-precision": 1.0, "contextual_recall": 0.5, "quality": None}
    assert combine(rag, scores) == pytest.approx((0.3 * 1.0 + 0.3 * 0.5) / 0.6)
    assert combine("rag", {"quality": 0.25, "other": 1.0}) == pytest.approx(0.25)
    assert combine(rag, {"other": 1.0}) is None


def test_combine_treats_grader_scores_as_fractions_of_any_range() -> None:
    assert combine(two(), {"accuracy": 0.0, "style": 1.0}) == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("criteria: []", "criteria"),
        ("criteria:\n  - {name: a, weight: 1, min_value: 2, max_value: 2}", "max_value"),
        ("criteria:\n  - {name: a, weight: -1}", "weight"),
        ("criteria:\n  - {name: a, weight: 0}", "must not all be 0"),
        ("criteria:\n  - {name: a, weight: 1}\n  - {name: A, weight: 1}", "duplicate"),
        ("criteria:\n  - {weight: 1}", "name"),
        ("criteria: [", "invalid YAML"),
    ],
)
def test_invalid_rubrics_are_rejected_with_file_and_reason(tmp_path: Path, text, message) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(RubricError, match=message) as info:
        load_rubric(path)
    assert "bad.yaml" in str(info.value)


def test_search_order_flag_then_cwd_then_bundle(tmp_path: Path, monkeypatch) -> None:
    flag, cwd = tmp_path / "flag", tmp_path / "work"
    (cwd / "rubrics").mkdir(parents=True)
    flag.mkdir()
    (cwd / "rubrics" / "default.yaml").write_text(TWO.replace("name: two", "name: cwd-default"))
    (flag / "default.yaml").write_text(TWO.replace("name: two", "name: flag-default"))
    monkeypatch.chdir(cwd)
    assert load_rubric("default").name == "cwd-default"
    assert load_rubric("default", rubrics_dir=flag).name == "flag-default"
    assert load_rubric("agent", rubrics_dir=flag).name == "agent"  # falls through to the bundle
    listed = {e.name: e for e in list_rubrics(flag)}
    assert listed["default"].path == flag / "default.yaml"
    with pytest.raises(RubricError, match="unknown rubric 'nope' \\(available: .*default"):
        load_rubric("nope")
    with pytest.raises(RubricError, match="rubrics folder not found"):
        load_rubric("default", rubrics_dir=tmp_path / "missing")


def test_rubrics_package_ships_its_yaml() -> None:
    from rubrics import rubrics_dir

    files = importlib.resources.files("rubrics")
    for name in ("default", "agent", "code", "rag", "quality", "pattern", "prompt_standard"):
        assert files.joinpath(f"{name}.yaml").is_file()
        assert (rubrics_dir() / f"{name}.yaml").is_file()


def test_eval_file_rubric_weights_the_case_score(tmp_path: Path) -> None:
    from tests.conftest import read_bundle, run_cli

    (tmp_path / "rubrics").mkdir()
    (tmp_path / "rubrics" / "mine.yaml").write_text(
        "criteria:\n  - {name: mentions-paris, weight: 3}\n  - {name: exact, weight: 1}\n"
    )
    eval_file = tmp_path / "w.eval.yaml"
    eval_file.write_text(
        "rubric: mine\n"
        "graders:\n"
        "  - {name: mentions_paris, type: contains, value: Paris}\n"
        "  - {name: exact, type: equals, value: Paris.}\n"
        "tests:\n"
        "  - id: c1\n"
        "    input: Capital of France?\n"
        "    output: It is Paris\n"
    )
    out = tmp_path / "run"
    run = run_cli(str(eval_file), "--out", str(out), "-q", "--no-cache")
    cases, _ = read_bundle(out)
    assert cases[0]["score"] == pytest.approx(0.75), run.stderr  # plain mean would be 0.5


def test_combine_grader_scores_resolves_beside_the_eval_file(tmp_path: Path) -> None:
    from evalrun.rubric import combine_grader_scores

    (tmp_path / "r.yaml").write_text(
        "criteria:\n  - {name: a, weight: 1}\n  - {name: b, weight: 3}\n"
    )
    assert combine_grader_scores("r.yaml", {"a": 1.0, "b": 0.0}, base_dir=tmp_path) == 0.25
    assert combine_grader_scores("default", {"correctness": 0.5}, base_dir=tmp_path) == 0.5
    with pytest.raises(RubricError):
        combine_grader_scores("missing.yaml", {}, base_dir=tmp_path)


@pytest.mark.slow
def test_a_built_copy_outside_the_source_tree_finds_the_bundled_rubrics(tmp_path: Path) -> None:
    """Build the packages as an install would (setuptools build_py with the pyproject's
    package-data), then import them from another folder: the YAML files must have come along."""
    probe = (
        "import rubrics, evalrun.rubric as r; "
        "print(rubrics.__file__); print(sorted(e.name for e in r.list_rubrics())); "
        "print(len(r.load_rubric('agent').criteria))"
    )
    lines = run_in_built_copy(tmp_path, probe)
    assert "'agent'" in lines[1] and "'default'" in lines[1] and lines[2] == "6"
