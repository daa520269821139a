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
from report_helpers import judge_calls_for, mixed_cases, random_cases, write_bundle

from evalrun.reporters import write_reports

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


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

    def open(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"}, page=False)
        attached = self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, page=False
        )
        self.session = attached["sessionId"]
        self.events.clear()
        for domain in ("Page.enable", "Runtime.enable"):
            self.send(domain)
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

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
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
    in_file_order = sorted(c.id for c in cases)
    assert browser.js(VISIBLE_IDS) == in_file_order

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
