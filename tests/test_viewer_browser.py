"""``evalrun view`` in real headless Chromium over loopback HTTP: the run list and its filters,
a run page (verdict and first problem case on the first screen, at 1400x1000 and 480 px wide),
three runs compared, a 10,000-case run paged by the server, an eval's history, and hostile ids
and reasons that stay text (docs/viewer.md). Skipped without chromium."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_helpers import NASTY, case, grader, judge_calls_for, mixed_cases
from test_report_html_browser import CHROMIUM, Browser
from viewer_helpers import add_run, served, three_runs

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]

HOSTILE_ID = '<img src=x onerror="window.__pwned=1">'
BIG = 10_000


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Runs 1-3: one eval three times; 4: every status and hostile text; 5: 10,000 cases."""
    root = tmp_path_factory.mktemp("viewer-site")
    index = root / "index.sqlite"
    three_runs(root, index)
    cases = mixed_cases()
    cases.insert(
        0,
        case(
            HOSTILE_ID,
            [grader("precision", 0.1, reason='"><script>window.__pwned=2</script>' + NASTY)],
            output='<iframe src="javascript:window.__pwned=3"></iframe>',
        ),
    )
    cases[0].transcript = {"steps": [{"text": "<svg onload=window.__pwned=4>"}], "answer": "ok"}
    add_run(
        index,
        root / "mixed",
        cases,
        judge_calls=judge_calls_for(cases),
        meta={"started_at": "2026-02-01T00:00:00+00:00"},
    )
    big = [
        case(f"case-{i:05d}", [grader("g", 0.2 if i % 1000 == 7 else 0.9)], total_ms=5)
        for i in range(BIG)
    ]
    add_run(
        index,
        root / "big",
        big,
        meta={"eval": "big", "target": "model-b", "started_at": "2026-02-02T00:00:00+00:00"},
    )
    with served(index) as url:
        yield url


def wait_ready(browser: Browser, path: str, timeout: float = 60) -> None:
    """Until the page at ``path`` (its pathname and query) has drawn itself."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            where = browser.js("location.pathname + location.search")
            if where == path and browser.js("document.body.dataset.ready") == "1":
                return
        except RuntimeError:  # the page is navigating: its context went away
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{path} did not draw itself")


def visit(browser: Browser, base: str, path: str, size: tuple[int, int] = (1400, 1000)) -> None:
    browser.open(base.rstrip("/") + path, size)
    wait_ready(browser, path)


def rect(browser: Browser, selector: str) -> dict[str, float]:
    found = browser.js(
        f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
        " if (!e) return null; const r = e.getBoundingClientRect();"
        " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })()"
    )
    assert found is not None, selector
    return dict(found)


def texts(browser: Browser, selector: str) -> list[Any]:
    return list(
        browser.js(
            f"Array.from(document.querySelectorAll({json.dumps(selector)}), e => e.textContent)"
        )
    )


def test_run_list_filters_and_links(browser: Browser, site: str) -> None:
    visit(browser, site, "/")
    assert texts(browser, "#run-table a.run-link") == ["#5", "#4", "#3", "#2", "#1"]
    browser.js(
        "(() => { const s = document.getElementById('filter-eval'); s.value = 'capitals';"
        " s.dispatchEvent(new Event('change')); })()"
    )
    wait_ready(browser, "/?eval=capitals")
    assert texts(browser, "#run-table a.run-link") == ["#3", "#2", "#1"]
    browser.click("#run-table a.run-link")
    wait_ready(browser, "/run/3")
    assert browser.js("document.querySelector('#verdict .word').textContent") == "failed"
    assert browser.problems() == []


def test_run_page_shows_verdict_and_first_problem_on_the_first_screen(
    browser: Browser, site: str, tmp_path: Path
) -> None:
    for width, height in ((1400, 1000), (480, 900)):
        visit(browser, site, "/run/4", (width, height))
        browser.screenshot(tmp_path / f"run-{width}.png", whole_page=False)
        inner = browser.js("[window.innerWidth, window.innerHeight]")
        assert inner == [width, height]
        verdict = rect(browser, "#verdict")
        first = rect(browser, "#case-list details.case:first-child > summary")
        assert verdict["top"] >= 0 and verdict["bottom"] <= height, (width, verdict)
        assert verdict["bottom"] <= first["top"] and first["bottom"] <= height, (width, first)
        assert verdict["right"] <= width and first["right"] <= width + 0.5
        # the first case is a problem, open, with its graders and reasons
        assert browser.js("document.querySelector('#case-list details.case').dataset.status") in (
            "error",
            "failed",
        )
        assert browser.js("document.querySelector('#case-list details.case').open") is True
    assert texts(browser, "#verdict .word") == ["failed"]


def test_hostile_ids_and_reasons_stay_text(browser: Browser, site: str) -> None:
    visit(browser, site, "/run/4")
    assert browser.js("document.querySelectorAll('details.case').length") == 8
    browser.js("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert HOSTILE_ID in texts(browser, "details.case .id")
    body = browser.js("document.body.textContent")
    assert '"><script>window.__pwned=2</script>' in body and NASTY.split("\r")[0] in body
    assert "[object" not in body
    replies = texts(browser, "pre.response")
    assert len(replies) == 2 and "</pre><script>bad()</script>" in replies[0]  # as written
    assert browser.js("typeof window.__pwned") == "undefined"
    assert browser.js("document.querySelectorAll('img, iframe, b, #case-list svg').length") == 0
    assert "<svg onload=window.__pwned=4>" in texts(browser, "pre.transcript")[0]
    assert browser.js("document.scripts.length") == 1  # the shipped one only
    assert browser.problems() == []


def test_three_runs_compare_regressions_first(browser: Browser, site: str) -> None:
    visit(browser, site, "/?eval=capitals")
    for n in (1, 2, 3):
        browser.click(f"#run-table tr[data-id='{n}'] input.pick")
    browser.click("#compare-selected")
    wait_ready(browser, "/compare?run=1&run=2&run=3")
    flags = browser.js(
        "Array.from(document.querySelectorAll('#compare-rows tbody tr'), r => r.dataset.regressed)"
    )
    assert flags == ["1"] * 3 + ["0"] * 7
    assert texts(browser, "#compare-rows tbody tr td.id")[:3] == ["c3", "c4", "c7"]
    assert len(texts(browser, "#pairings tbody tr")) == 2
    assert texts(browser, "#pairings tbody tr td:nth-child(5)") == ["0.2500", "1.0000"]
    assert browser.problems() == []


def test_a_10000_case_run_is_paged_by_the_server(browser: Browser, site: str) -> None:
    visit(browser, site, "/run/5")
    assert browser.js("document.querySelectorAll('#case-list details.case').length") == 50
    assert texts(browser, "#cases .pager .shown") == [f"1–50 of {BIG}"]
    first = texts(browser, "#case-list details.case .id")
    assert first[:10] == [f"case-{i:05d}" for i in range(7, BIG, 1000)]
    browser.click("#cases .pager button.next")
    wait_ready(browser, "/run/5?start=50")
    assert texts(browser, "#cases .pager .shown") == [f"51–100 of {BIG}"]
    passed = [f"case-{i:05d}" for i in range(BIG) if i % 1000 != 7]
    assert texts(browser, "#case-list details.case .id") == passed[40:90]
    # the page holds one page of cases, not the run
    assert browser.js("document.getElementsByTagName('*').length") < 5000
    browser.click("#problems-only")
    wait_ready(browser, "/run/5?problems=1")
    assert texts(browser, "#cases .pager .shown") == ["1–10 of 10"]
    assert texts(browser, "#case-list details.case .id") == first[:10]
    assert browser.problems() == []


def test_history_draws_mean_and_pass_rate_per_target(browser: Browser, site: str) -> None:
    visit(browser, site, "/history?eval=capitals")
    assert browser.js("document.querySelectorAll('section.series').length") == 1
    points = browser.js(
        "document.querySelector('svg.chart polyline.rate').getAttribute('points').split(' ')"
    )
    assert len(points) == 3
    ys = [float(p.split(",")[1]) for p in points]
    assert ys[0] < ys[2] < ys[1]  # pass rate 1.0, 0.7, 0.9: higher is further up
    assert texts(browser, "table.points tbody td:first-child") == ["#1", "#2", "#3"]
    assert browser.problems() == []
