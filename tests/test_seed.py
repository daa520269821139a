"""``--seed``: the mean score's bootstrap seed, recorded in summary.json and read back by every
reader that recomputes the interval (docs/config.md "Randomness", docs/results.md#intervals)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import evalrun
from evalrun.reporters import load_bundle
from evalrun.results import stats
from evalrun.results.summary import RunMeta, compute_stats, summarize
from tests.conftest import run_cli

#: how many of three graders each case passes: scores 0, 1/3, 2/3, 1 (a case set whose
#: interval moves with the seed: the default seed gives a high end of 28/36, seed 7 of 27/36)
PASSED = [0, 1, 2, 3, 3, 0, 1, 3, 2, 1, 0, 3]
SCORES = [k / 3 for k in PASSED]
DEFAULT_CI = [0.3055555555555555, 0.7777777777777777]
SEED_7_CI = [0.3055555555555555, 0.75]
OUTPUTS = {0: "x", 1: "Paris", 2: "Paris France", 3: "Paris France capital"}


def _eval(folder: Path) -> Path:
    lines = [
        "graders:",
        "  - {name: a, type: contains, value: Paris}",
        "  - {name: b, type: contains, value: France}",
        "  - {name: c, type: contains, value: capital}",
        "tests:",
        *(f"  - {{id: c{i}, input: q, output: {OUTPUTS[k]}}}" for i, k in enumerate(PASSED)),
    ]
    path = folder / "s.eval.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_same_seed_same_interval_and_another_seed_another() -> None:
    assert stats.run_mean_ci(SCORES, seed=7) == stats.run_mean_ci(SCORES, seed=7)
    assert list(stats.run_mean_ci(SCORES) or ()) == DEFAULT_CI
    assert list(stats.run_mean_ci(SCORES, seed=7) or ()) == SEED_7_CI


def test_the_seed_reaches_the_statistics_and_summary_json_only_when_not_the_default() -> None:
    from report_helpers import case, grader

    cases = [case(f"c{i}", [grader("g", s)]) for i, s in enumerate(SCORES)]
    assert compute_stats(cases, seed=7).mean_score_ci == tuple(SEED_7_CI)
    default = summarize(cases, RunMeta())
    assert "seed" not in default and default["mean_score_ci"] == DEFAULT_CI
    seeded = summarize(cases, RunMeta(seed=7))
    assert seeded["seed"] == 7 and seeded["mean_score_ci"] == SEED_7_CI
    assert RunMeta.from_dict(seeded).seed == 7
    assert RunMeta.from_dict({"seed": "7"}).seed is None  # a wrong type reads as unknown


def test_python_api_seed_lands_in_the_bundle_and_load_bundle_uses_it(tmp_path: Path) -> None:
    path = _eval(tmp_path)
    plain = evalrun.run(path, out=tmp_path / "plain", no_cache=True, quiet=True)
    seeded = evalrun.run(path, out=tmp_path / "seeded", no_cache=True, quiet=True, seed=7)
    assert plain.bundle is not None and seeded.bundle is not None
    assert "seed" not in _summary(plain.bundle)  # the default bundle is as it always was
    assert _summary(plain.bundle)["mean_score_ci"] == DEFAULT_CI
    assert _summary(seeded.bundle)["seed"] == 7
    assert _summary(seeded.bundle)["mean_score_ci"] == SEED_7_CI
    assert load_bundle(seeded.bundle).stats.mean_score_ci == tuple(SEED_7_CI)
    assert load_bundle(plain.bundle).stats.mean_score_ci == tuple(DEFAULT_CI)
    assert "[0.306, 0.750]" in (seeded.bundle / "report.md").read_text()


def test_run_seed_and_a_report_rendered_later_show_the_same_interval(tmp_path: Path) -> None:
    _eval(tmp_path)
    run = run_cli("s.eval.yaml", "--out", "o", "--no-cache", "--seed", "7", cwd=tmp_path)
    assert run.returncode == 1, run.stderr  # some cases fail on purpose
    assert "mean score 0.528 [0.306, 0.750]" in run.stdout
    summary = _summary(tmp_path / "o")
    assert summary["seed"] == 7 and summary["mean_score_ci"] == SEED_7_CI
    report = run_cli("report", "o", "--format", "json", "--out", "-", cwd=tmp_path)
    assert json.loads(report.stdout)["mean_score_ci"] == SEED_7_CI, report.stderr


@pytest.mark.slow
def test_seed_from_the_environment_and_through_shards_and_merge(tmp_path: Path) -> None:
    _eval(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALRUN_")}
    for shard in ("1/2", "2/2"):
        name = "s" + shard[0]
        done = run_cli(
            "s.eval.yaml", "--out", name, "--no-cache", "--shard", shard, "-q",
            cwd=tmp_path, env={**env, "EVALRUN_SEED": "7"},
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        assert _summary(tmp_path / name)["seed"] == 7
    merged = run_cli("merge", "s1", "s2", "--out", "m", cwd=tmp_path, env=env)
    assert merged.returncode in (0, 1), merged.stderr
    summary = _summary(tmp_path / "m")
    assert summary["seed"] == 7 and summary["mean_score_ci"] == SEED_7_CI
