"""report.html in real headless Chromium, driven over the DevTools protocol.

Chromium speaks CDP over a pipe (``--remote-debugging-pipe``: NUL-separated JSON on fds 3/4),
so no websocket client or other Python dependency is needed. Skipped without chromium.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_helpers import case as case_result
from report_helpers import grader, judge_calls_for, mixed_cases, random_cases, write_bundle

from evalrun.reporters import write_reports
from evalrun.reporters.bundle_view import DETAIL_LIMIT, case_reason
from evalrun.reporters.html import PAGE
from evalrun.results.models import CaseResult
from evalrun.results.scan import PROBLEMS_FIRST

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
]


def problem_rank(case: CaseResult) -> tuple[int, int, int]:
    """The report order, spelled out for the tests: status (problems first), the case's line in
    its eval file, repeat; results without a line after those, in file order."""
    if case.line is None:
        return (PROBLEMS_FIRST[case.status], 1 << 30, 0)
    return (PROBLEMS_FIRST[case.status], case.line, int(case.repeat or 0))


class Browser:
    """A headless Chromium we started, one page attached, events collected."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire_fds() -> None:  # runs in the child: CDP pipe must be fds 3 (in) and 4 (out)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--no-first-run",
                "--no-default-browser-check",
                "--window-size=1280,1600",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=wire_fds,
            pass_fds=(3, 4),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise EOFError("chromium closed the pipe")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, *, page: bool = True) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if page and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + 20
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 20) -> dict[str, Any]:
        for event in self.events:
            if event["method"] == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if "method" in message:
                self.events.append(message)
                if message["method"] == method:
                    return message

    def open(self, url: str, size: tuple[int, int] | None = None) -> None:
        """A new page at ``url``; ``size`` (width, height) emulates that window or phone."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)
        attached = self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, page=False
        )
        self.session = attached["sessionId"]
        self.events.clear()
        for domain in ("Page.enable", "Runtime.enable"):
            self.send(domain)
        if size is not None:
            self.viewport(*size)
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre (not element.click())."""
        box = self.js(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            "el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect();"
            "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
            )

    def type_text(self, selector: str, text: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.send("Input.insertText", {"text": text})

    def viewport(self, width: int, height: int) -> None:
        """Size the page as a window (or, below 600 px, a phone) of ``width`` x ``height``."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def screenshot(self, path: Path, *, whole_page: bool = True) -> Path:
        data = self.send(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": whole_page}
        )
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def problems(self) -> list[str]:
        """Uncaught exceptions, console errors and dialogs (an injected alert would open one)."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(json.dumps(params.get("args", []))[:500])
            elif method == "Page.javascriptDialogOpening":
                found.append(f"dialog: {params.get('message')}")
        return found

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, TimeoutError, RuntimeError):
            self.send("Browser.close", page=False)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self._to_chrome)
        os.close(self._from_chrome)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


VISIBLE_IDS = (
    "Array.from(document.querySelectorAll('#case-table tbody.case'))"
    ".filter(t => !t.hidden).map(t => t.dataset.id)"
)


def _score_order(cases: list[Any], descending: bool) -> list[str]:
    """Ids after sorting by score: cases without one keep the report order, at the end."""
    cases = sorted(cases, key=problem_rank)
    scored = sorted((c for c in cases if c.score is not None), key=lambda c: c.score)
    if descending:
        scored.reverse()
    return [c.id for c in scored] + [c.id for c in cases if c.score is None]


def test_report_sorts_filters_and_drills_down(browser: Browser, tmp_path: Path) -> None:
    cases = mixed_cases()
    run = write_bundle(tmp_path / "run", cases, judge_calls=judge_calls_for(cases))
    write_reports(run, ("html",))
    browser.open((run / "report.html").as_uri())

    assert browser.js("document.body.dataset.ready") == "1"
    problems_first = [c.id for c in sorted(cases, key=problem_rank)]
    assert [c.status for c in sorted(cases, key=problem_rank)][:1] == ["error"]
    assert browser.js(VISIBLE_IDS) == problems_first

    browser.click("#case-table th:nth-child(3)")  # Score (no Repeat column without repeats)
    assert browser.js(VISIBLE_IDS) == _score_order(cases, descending=False)
    browser.click("#case-table th:nth-child(3)")
    assert browser.js(VISIBLE_IDS) == _score_order(cases, descending=True)
    assert (
        browser.js(
            "document.querySelector('#case-table th:nth-child(3)').getAttribute('aria-sort')"
        )
        == "descending"
    )

    browser.click("#case-table th:nth-child(1)")  # natural order: beta-2 before beta-10
    ids = browser.js(VISIBLE_IDS)
    assert ids.index("beta-2") < ids.index("beta-10")

    browser.js(
        "(() => { const s = document.getElementById('status-filter'); s.value = 'failed';"
        "s.dispatchEvent(new Event('change')); })()"
    )
    assert sorted(browser.js(VISIBLE_IDS)) == sorted(c.id for c in cases if c.status == "failed")
    browser.click("button.card.error")  # the summary cards filter too
    assert sorted(browser.js(VISIBLE_IDS)) == sorted(c.id for c in cases if c.status == "error")
    browser.click("button.card.error")  # again: back to every status
    assert len(browser.js(VISIBLE_IDS)) == len(cases)

    browser.type_text("#text-filter", "timed OUT")
    assert browser.js(VISIBLE_IDS) == ["epsilon"]
    assert browser.js("document.getElementById('shown-count').textContent") == (
        f"1 of {len(cases)} shown"
    )
    browser.js(
        "(() => { const i = document.getElementById('text-filter'); i.value = '';"
        "i.dispatchEvent(new Event('input')); })()"
    )

    row = "#case-table tbody[data-id='beta-10'] tr.case-row"
    detail = "#case-table tbody[data-id='beta-10'] tr.detail"
    assert browser.js(f"document.querySelector({json.dumps(detail)}).hidden") is True
    browser.click(row)
    assert browser.js(f"document.querySelector({json.dumps(detail)}).hidden") is False
    text = browser.js(f"document.querySelector({json.dumps(detail)}).innerText")
    assert "p3 ranked low" in text  # a miss
    assert '<script>alert("x")</script>' in text  # the hostile reason, shown as text
    assert "Judge calls (2)" in text
    assert (
        browser.js(
            f"document.querySelector({json.dumps(detail)}).querySelectorAll('script').length"
        )
        == 0
    )
    assert browser.js("document.querySelectorAll('script').length") == 2  # only the page's own

    assert browser.js("window.evalrunErrors.length") == 0
    assert browser.js("document.getElementById('js-errors').textContent") == ""
    assert browser.problems() == []
    shot = browser.screenshot(tmp_path / "report.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 5_000


def test_repeat_report_sorts_repeat_table(browser: Browser, tmp_path: Path) -> None:
    ids = [f"case-{i}" for i in range(8)]
    run = write_bundle(tmp_path / "run", random_cases(ids, repeats=3), meta={"repeat": 3})
    write_reports(run, ("html",))
    browser.open((run / "report.html").as_uri())
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.js("document.querySelectorAll('#case-table tbody.case').length") == 24

    stdev_col = "#repeat-table th:nth-child(5)"
    assert browser.js(f"document.querySelector({json.dumps(stdev_col)}).textContent") == "Stdev"
    browser.click(stdev_col)
    values = browser.js(
        "Array.from(document.querySelectorAll('#repeat-table tbody tr'))"
        ".map(r => r.cells[4].dataset.v).filter(v => v !== '').map(Number)"
    )
    assert len(values) >= 2
    assert values == sorted(values)
    assert browser.problems() == []
    browser.screenshot(tmp_path / "repeat-report.png")


#: Screenshots stay here after the run (ignored by git), for people to look at.
ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts" / "report-html"

#: Where each line of an element's text starts, as character offsets (one Range per character).
LINE_STARTS = """(el => {
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const starts = []; let offset = 0; let lastTop = null;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (rect && lastTop !== null && rect.top > lastTop + 2) starts.push(offset + i);
      if (rect) lastTop = rect.top;
    }
    offset += node.length;
  }
  return starts;
})"""


def _big_suite() -> list[Any]:
    """Mixed problems among many passing cases with long hyphenated ids, so the first screen
    has to choose what to show."""
    passing = [
        case_result(
            f"retrieval-ranks-the-relevant-passage-first-{i:03d}",
            [grader("precision", 0.9, reason="relevant passages first")],
        )
        for i in range(40)
    ]
    return passing + mixed_cases()


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    print(f"screenshot: {path}")
    return path


def test_first_screen_shows_the_summary_and_the_first_problem_with_its_reason(
    browser: Browser, tmp_path: Path
) -> None:
    cases = _big_suite()
    run = write_bundle(tmp_path / "run", cases, judge_calls=judge_calls_for(cases))
    write_reports(run, ("html",))
    browser.open((run / "report.html").as_uri(), size=(1400, 1000))
    assert browser.js("[window.innerWidth, window.innerHeight]") == [1400, 1000]
    assert browser.js("document.body.dataset.ready") == "1"

    def rect(selector: str) -> dict[str, float]:
        return browser.js(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return {top: r.top, bottom: r.bottom, height: r.height}; })()"
        )

    first = sorted(cases, key=problem_rank)[0]
    assert first.status == "error"
    assert browser.js("window.scrollY") == 0
    for selector in ("#verdict", "#summary", "#case-table thead", "#case-table tbody.case"):
        box = rect(selector)
        assert box["height"] > 0 and box["bottom"] <= 1000, (selector, box)
    assert browser.js("document.getElementById('verdict').textContent").startswith("Failed:")
    row = "#case-table tbody.case tr.case-row"
    assert browser.js(f"document.querySelector({json.dumps(row)}).closest('tbody').dataset.id") == (
        first.id
    )
    reason = browser.js(f"document.querySelector('{row} td.why').innerText")
    assert reason == case_reason(first) == "precision: error, exit 1: ValueError: boom"
    # What is below the cases: the chart and the run's metadata.
    assert rect("#chart")["top"] > rect("#case-table")["top"]
    assert rect("#run")["top"] > rect("#chart")["top"]
    # A failed case's reason names its grader, in full once expanded.
    failed = next(c for c in sorted(cases, key=problem_rank) if c.status == "failed")
    cell = f"#case-table tbody[data-id={json.dumps(failed.id)}] td.why"
    assert browser.js(f"document.querySelector({json.dumps(cell)}).innerText") == (
        case_reason(failed)
    )
    assert case_reason(failed).startswith(failed.graders[0].name + ": failed")
    assert browser.problems() == []
    shot = browser.screenshot(_artifact("first-screen-1400x1000.png"), whole_page=False)
    assert shot.stat().st_size > 5_000


def test_phone_width_has_no_horizontal_overflow_and_ids_break_between_words(
    browser: Browser, tmp_path: Path
) -> None:
    cases = _big_suite()
    run = write_bundle(tmp_path / "run", cases, judge_calls=judge_calls_for(cases))
    write_reports(run, ("html",))
    browser.open((run / "report.html").as_uri(), size=(480, 900))
    assert browser.js("document.body.dataset.ready") == "1"
    assert browser.js("window.innerWidth") == 480

    def overflow() -> dict[str, Any]:
        return browser.js(
            "(() => ({page: document.documentElement.scrollWidth,"
            " body: document.body.scrollWidth,"
            " table: document.getElementById('case-table').getBoundingClientRect().right,"
            " wide: Array.from(document.querySelectorAll('body *'))"
            "   .filter(el => !el.closest('.scroll') && el.getBoundingClientRect().right > 480.5)"
            "   .map(el => el.tagName + '.' + el.className).slice(0, 5)}))()"
        )

    found = overflow()
    assert found["page"] <= 480 and found["body"] <= 480, found
    assert found["table"] <= 480.5, found  # the cases table fits; it does not scroll
    assert found["wide"] == [], found
    # Expanded details (output, reasons, judge calls) wrap too.
    browser.click("#case-table tbody[data-id='beta-10'] tr.case-row")
    found = overflow()
    assert found["page"] <= 480 and found["table"] <= 480.5, found

    long_id = next(c.id for c in cases if c.id.startswith("retrieval-"))
    cell = f"#case-table tbody[data-id={json.dumps(long_id)}] td.id"
    starts = browser.js(f"{LINE_STARTS}(document.querySelector({json.dumps(cell)}))")
    assert starts, "a long id should wrap at 480 px"
    assert all(long_id[i - 1] in "-_./:" for i in starts), (long_id, starts)
    assert browser.problems() == []
    browser.screenshot(_artifact("phone-480.png"))


def test_a_large_run_pages_passed_cases_in_from_compact_data(
    browser: Browser, tmp_path: Path
) -> None:
    hostile = '</script><script>alert("x")</script>-<b>id</b>'
    passing = [
        case_result(f"passed-case-{i:05d}", [grader("contains", 1.0, reason="has it")])
        for i in range(DETAIL_LIMIT + 200)
    ]
    passing[3] = case_result(hostile, [grader("contains", 1.0)])
    cases = [*passing, *mixed_cases()]
    run = write_bundle(tmp_path / "run", cases)
    write_reports(run, ("html",))
    page = (run / "report.html").read_text()
    assert page.count("<script") == 3  # the page's two and the data block; nothing from data
    assert "passed-case-00010" in page and "has it" not in page  # compact: no details

    browser.open((run / "report.html").as_uri(), size=(1400, 1000))
    assert browser.js("document.body.dataset.ready") == "1"
    problems = [c for c in cases if c.status != "passed"]
    passed_total = len(cases) - len(problems)
    count = "document.querySelectorAll('#case-table tbody.case').length"
    assert browser.js(count) == len(problems) + PAGE
    first = browser.js("document.querySelector('#case-table tbody.case').dataset.status")
    assert first == "error"
    shown = browser.js("document.getElementById('shown-count').textContent")
    assert shown == f"{len(problems) + PAGE} of {len(cases)} shown"
    assert browser.js("document.getElementById('more-count').textContent").startswith(
        f"{passed_total - PAGE} passed case(s) not loaded yet"
    )
    ids = browser.js(VISIBLE_IDS)
    assert hostile in ids  # shown as text
    assert browser.js(
        "document.querySelector('tbody[data-id=\"passed-case-00010\"] td.id').textContent"
    ) == ("passed-case-00010")
    browser.click("#show-more")
    assert browser.js(count) == len(problems) + 2 * PAGE
    browser.click("#show-all")
    assert browser.js(count) == len(cases)
    assert browser.js("document.getElementById('more-cases').hidden") is True
    browser.type_text("#text-filter", "passed-case-01150")
    assert browser.js(VISIBLE_IDS) == ["passed-case-01150"]
    assert browser.js("document.querySelectorAll('script').length") == 3
    assert browser.js("window.evalrunErrors.length") == 0
    assert browser.problems() == []
    browser.screenshot(_artifact("large-run-1400x1000.png"), whole_page=False)


def test_a_transcript_opens_step_by_step_and_runs_nothing(browser: Browser, tmp_path: Path) -> None:
    """docs/reports.md, "Transcripts": folded until clicked, then every step and tool call;
    a tool result holding markup is shown as text and executes nothing."""
    from evalrun.transcripts import Step, ToolCall, Transcript, Usage

    hostile = '</pre><img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    transcript = Transcript(
        "claude-code",
        "Fixed.",
        [
            Step(
                "assistant",
                "Reading.",
                [ToolCall("Read", {"file_path": "a.py"}, "t1", hostile)],
                duration_ms=850,
                usage=Usage(1214, 58),
            ),  # fmt: skip
            Step("assistant", "Fixed."),
        ],
    )
    result = case_result("agent", [grader("contains", 1.0)], output="Fixed.")
    result.transcript = transcript.to_dict()
    run = write_bundle(tmp_path / "run", [result])
    write_reports(run, ("html",))
    browser.open((run / "report.html").as_uri())
    browser.click("#case-table tbody[data-id='agent'] tr.case-row")
    block = "document.querySelector('details.transcript')"
    assert browser.js(f"{block}.open") is False  # folded by default
    assert browser.js(f"{block}.querySelector('ol.steps').checkVisibility()") is False
    browser.click("details.transcript > summary")
    assert browser.js(f"{block}.open") is True
    assert browser.js(f"{block}.querySelector('ol.steps').checkVisibility()") is True
    assert browser.js(f"{block}.querySelectorAll('li.step').length") == 2
    browser.click("details.tool-call > summary")
    text = browser.js(f"{block}.innerText")
    assert "1. assistant · 850 ms · 1214+58 tokens" in text
    assert hostile in text  # shown as text
    assert browser.js(f"{block}.querySelectorAll('img, script').length") == 0
    assert browser.js("typeof window.pwned") == "undefined"
    assert browser.js("window.evalrunErrors.length") == 0
    assert browser.problems() == []
