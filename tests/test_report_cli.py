"""``evalrun report``, ``merge`` and ``compare`` on the command line, and compare's statistics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from report_helpers import case, grader, mixed_cases, random_cases, write_bundle
from typer.testing import CliRunner

from evalrun.commands import report as report_command
from evalrun.reporters import load_bundle
from evalrun.reporters.compare import compare_bundles
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    report_command.register(app)
    return app


def invoke(app: typer.Typer, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _scored(tmp_path: Path, name: str, scores: dict[str, float]) -> Path:
    cases = [case(cid, [grader("g", s), grader("h", 1.0)]) for cid, s in scores.items()]
    return write_bundle(tmp_path / name, cases)


def test_report_renders_each_format(cli: typer.Typer, tmp_path: Path) -> None:
    run = write_bundle(tmp_path / "run", mixed_cases())
    code, out = invoke(cli, "report", run)
    assert code == 0
    assert {p.name for p in run.iterdir()} >= {"report.md", "report.html", "junit.xml"}
    code, out = invoke(cli, "report", run, "--format", "json", "--out", "-")
    assert code == 0 and json.loads(out)["counts"]["total"] == 7
    target = tmp_path / "elsewhere" / "r.md"
    code, _ = invoke(cli, "report", run, "--format", "md", "--out", target)
    assert code == 0 and target.read_text().startswith("# Eval report")


def test_report_usage_errors(cli: typer.Typer, tmp_path: Path) -> None:
    run = write_bundle(tmp_path / "run", mixed_cases())
    assert invoke(cli, "report", run, "--format", "pdf")[0] == 2
    assert (
        invoke(cli, "report", run, "--format", "md", "--format", "html", "--out", tmp_path / "x")[0]
        == 2
    )
    assert invoke(cli, "report", tmp_path / "missing")[0] == 2


def test_report_unstable_bound_is_settable(cli: typer.Typer, tmp_path: Path) -> None:
    run = write_bundle(tmp_path / "rep", random_cases(["a", "b", "c"], repeats=4))
    tight = json.loads(invoke(cli, "report", run, "--format", "json", "-o", "-")[1])
    loose = json.loads(
        invoke(cli, "report", run, "--format", "json", "-o", "-", "--unstable-bound", "1")[1]
    )
    assert tight["repeat_stats"]["unstable_bound"] == 0.15
    assert loose["repeat_stats"]["unstable"] == []
    assert tight["repeat_stats"]["unstable"]


def test_compare_constant_improvement_has_a_point_interval(tmp_path: Path) -> None:
    base = _scored(tmp_path, "base", {f"c{i}": 0.5 for i in range(6)})
    new = _scored(tmp_path, "new", {f"c{i}": 0.75 for i in range(6)})
    result = compare_bundles(load_bundle(base), load_bundle(new), seed=1)
    assert result.overall.ci == (0.125, 0.125)  # case score: mean of g and h (always 1.0)
    assert (result.overall.wins, result.overall.losses, result.overall.ties) == (6, 0, 0)
    (g, h) = result.graders
    assert g.name == "g" and g.ci == (0.25, 0.25)
    assert h.ci == (0.0, 0.0) and h.ties == 6
    assert result.overall.improvement and not result.regression


def test_compare_hand_checked_interval(tmp_path: Path) -> None:
    """Suite deltas [-1, 1, 1, 1] (see test_report_stats): 95% interval [-0.5, 1.0]."""
    base = _scored(tmp_path, "base", {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0})
    new = _scored(tmp_path, "new", {"a": 0.0, "b": 1.0, "c": 1.0, "d": 1.0, "extra": 0.3})
    result = compare_bundles(load_bundle(base), load_bundle(new), seed=9)
    g = next(x for x in result.graders if x.name == "g")
    assert g.deltas == [-1.0, 1.0, 1.0, 1.0]
    assert g.ci == (-0.5, 1.0)
    assert result.only_new == ["extra"] and result.only_base == []
    changed = [(c.id, c.base_status, c.new_status) for c in result.cases]
    assert changed == [
        ("a", "passed", "failed"),
        ("b", "failed", "passed"),
        ("c", "failed", "passed"),
        ("d", "failed", "passed"),
    ]


def test_compare_repeats_are_averaged_per_case(tmp_path: Path) -> None:
    base = write_bundle(
        tmp_path / "base",
        [case("x", [grader("g", s)], repeat=r) for r, s in enumerate([0.2, 0.4])],
    )
    new = write_bundle(tmp_path / "new", [case("x", [grader("g", 0.6)])])
    result = compare_bundles(load_bundle(base), load_bundle(new))
    assert result.overall.deltas == [pytest.approx(0.3)]
    assert result.cases[0].base_status == "failed"


def test_compare_cli_fails_on_a_significant_regression(cli: typer.Typer, tmp_path: Path) -> None:
    scores = {f"c{i}": 0.4 + 0.05 * i for i in range(10)}
    base = _scored(tmp_path, "base", scores)
    worse = _scored(tmp_path, "worse", {k: v - 0.2 for k, v in scores.items()})
    report = tmp_path / "compare.json"
    code, out = invoke(cli, "compare", base, worse, "--fail-on-regression", "--out", report)
    assert code == 1, out
    assert "significantly worse" in out
    data = json.loads(report.read_text())
    assert data["regression"] is True
    assert data["overall"]["ci"][1] < 0
    assert data["overall"]["losses"] == 10
    # Without the flag a regression is reported but does not fail.
    assert invoke(cli, "compare", base, worse)[0] == 0
    # Noise around zero is not significant (threshold 0: no case leaves passed, so only the
    # interval speaks; a case that does is a regression of its own, tested below).
    noisy = write_bundle(
        tmp_path / "noisy",
        [
            case(k, [grader("g", v + (0.1 if i % 2 else -0.1), threshold=0.0), grader("h", 1.0)])
            for i, (k, v) in enumerate(scores.items())
        ],
    )
    code, out = invoke(cli, "compare", base, noisy, "--fail-on-regression", "--seed", "4")
    assert code == 0 and "no significant difference" in out


def test_compare_fails_on_a_case_that_no_longer_passes(cli: typer.Typer, tmp_path: Path) -> None:
    """passed -> error (or failed, unscored) is a regression whatever the interval says: one
    case of twenty cannot move it, and an errored case has no score to pair at all."""
    scores = {f"c{i:02}": 0.8 for i in range(20)}
    base = _scored(tmp_path, "base", scores)
    new_cases = [case(cid, [grader("g", s), grader("h", 1.0)]) for cid, s in scores.items()]
    new_cases[3] = case("c03", [grader("g", None, status="error"), grader("h", 1.0)])
    new_cases[7] = case("c07", [grader("g", 0.2), grader("h", 1.0)])
    new = write_bundle(tmp_path / "new", new_cases)
    report = tmp_path / "compare.json"
    code, out = invoke(cli, "compare", base, new, "--fail-on-regression", "--out", report)
    assert code == 1, out
    assert "c03: passed -> error" in out and "c07: passed -> failed" in out
    assert "2 case(s) no longer pass" in out
    data = json.loads(report.read_text())
    assert data["regression"] is True and data["overall"]["regression"] is False
    assert data["status_regressions"] == ["c03", "c07"]
    assert [c["id"] for c in data["cases"] if c["regression"]] == ["c03", "c07"]
    assert invoke(cli, "compare", base, new)[0] == 0  # reported, not failed, without the flag
    # a case that starts to pass, or keeps failing, is no regression
    code, out = invoke(cli, "compare", new, base, "--fail-on-regression")
    assert code == 0 and "no longer pass" not in out, out


def test_compare_cli_is_deterministic_with_a_seed(cli: typer.Typer, tmp_path: Path) -> None:
    base = write_bundle(tmp_path / "a", random_cases([f"c{i}" for i in range(15)], seed=1))
    new = write_bundle(tmp_path / "b", random_cases([f"c{i}" for i in range(15)], seed=2))
    outs = []
    for _ in range(2):
        code, out = invoke(cli, "compare", base, new, "--seed", "7", "--json")
        assert code == 0
        outs.append(json.loads(out))  # --json: the JSON alone on stdout, no table
    assert outs[0] == outs[1]
    assert invoke(cli, "compare", base, new, "--confidence", "1.5")[0] == 2
    assert invoke(cli, "compare", base, tmp_path / "missing")[0] == 2


@pytest.mark.slow
def test_compare_json_file_is_the_old_spelling_of_out(tmp_path: Path) -> None:
    """`--json FILE` wrote a file before `--json` meant stdout: it still does, with a warning;
    a stray third argument without it is an error."""
    base = write_bundle(tmp_path / "a", random_cases([f"c{i}" for i in range(5)], seed=1))
    new = write_bundle(tmp_path / "b", random_cases([f"c{i}" for i in range(5)], seed=2))
    old = run_cli("compare", str(base), str(new), "--json", str(tmp_path / "old.json"))
    assert old.returncode == 0, old.stderr
    assert "warning: --json FILE is deprecated: write the file with --out FILE" in old.stderr
    assert "verdict:" in old.stdout  # the tables, as before
    now = run_cli("compare", str(base), str(new), "--out", str(tmp_path / "new.json"))
    assert json.loads((tmp_path / "old.json").read_text()) == json.loads(
        (tmp_path / "new.json").read_text()
    )
    stray = run_cli("compare", str(base), str(new), str(tmp_path / "x.json"))
    assert stray.returncode == 2 and "unexpected argument" in stray.stderr
    assert now.returncode == 0


def test_merge_through_the_real_cli(tmp_path: Path) -> None:
    cases = random_cases([f"c{i}" for i in range(6)], seed=4)
    a = write_bundle(tmp_path / "a", cases[:3], meta={"shard": "1/2", "exit_code": 0})
    b = write_bundle(tmp_path / "b", cases[3:], meta={"shard": "2/2", "exit_code": 0})
    out = tmp_path / "merged"
    proc = subprocess.run(
        [sys.executable, "-m", "evalrun", "merge", str(a), str(b), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GITHUB_ACTIONS": "false"},
    )
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode == summary["exit_code"], proc.stderr
    assert "merged 2 bundle(s): 6 results" in proc.stdout
    assert (out / "report.html").is_file() and (out / "junit.xml").is_file()
    again = subprocess.run(
        [sys.executable, "-m", "evalrun", "merge", str(a), str(b), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2 and "--force" in again.stderr


def test_compare_ignores_float_noise(tmp_path: Path) -> None:
    base = write_bundle(tmp_path / "base", [case(f"c{i}", [grader("g", 5 / 6)]) for i in range(4)])
    new = write_bundle(
        tmp_path / "new",
        [case(f"c{i}", [grader("g", 5 / 6 - 1e-13)], repeat=r) for i in range(4) for r in range(3)],
    )
    result = compare_bundles(load_bundle(base), load_bundle(new))
    assert result.overall.ci == (0.0, 0.0)
    assert (result.overall.losses, result.overall.ties) == (0, 4)
    assert not result.regression
