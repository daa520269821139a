"""report.html shows a case's transcript step by step, folded, with hostile text kept as text
(docs/reports.md, "Transcripts")."""

from __future__ import annotations

import html
import re
from pathlib import Path

from report_helpers import NASTY, case, grader, write_bundle

from evalrun.reporters import load_bundle, render
from evalrun.transcripts import Step, ToolCall, Transcript, Usage

HOSTILE = '</pre></details><script>steal()</script><img src=x onerror="alert(1)">'


def agent_case() -> object:
    transcript = Transcript(
        "claude-code",
        "Fixed " + HOSTILE,
        [
            Step(
                "assistant",
                "I'll read it. " + NASTY,
                [ToolCall("Read", {"file_path": HOSTILE}, "t1", "def add(a, b): " + HOSTILE)],
                duration_ms=850,
                usage=Usage(1214, 58, 0),
                cost_usd=0.0071,
            ),
            Step(
                "assistant",
                None,
                [ToolCall("Bash", {"command": "pytest"}, "t2", "1 failed", True, 1200)],
            ),
        ],
        usage=Usage(5430, 198, 3930),
        cost_usd=0.04213,
        duration_ms=14210,
    )
    result = case("agent-run", [grader("contains", 1.0)], output=transcript.answer)
    result.transcript = transcript.to_dict()
    return result


def test_transcript_step_by_step_folded_and_escaped(tmp_path: Path) -> None:
    run = write_bundle(tmp_path / "run", [agent_case(), case("plain", [grader("contains", 1.0)])])
    page = render(load_bundle(run), "html")
    assert page.count("<script>") == 2  # the page's own two; nothing from the transcript
    assert "<img src=x" not in page and "steal()</script>" not in page
    found = re.search(r'<details class="transcript">(.*?)</ol></details>', page, re.S)
    assert found, "no transcript block"
    block = found.group(0)
    # folded: the block is a <details> without ``open``
    assert '<details class="transcript" open' not in page
    summary = re.search(r"<summary>(.*?)</summary>", block).group(1)  # type: ignore[union-attr]
    assert summary == (
        "Transcript (claude-code) · 2 steps · 2 tool calls · 5430+198 tokens (3930 cached)"
        " · $0.0421 · 14210 ms"
    )
    assert block.count('<li class="step">') == 2
    assert '<p class="facts">1. assistant · 850 ms · 1214+58 tokens · $0.0071</p>' in block
    assert '<p class="facts">2. assistant</p>' in block
    # tool calls: name, status and time; arguments and result escaped
    assert "<summary>Read</summary>" in block
    assert "<summary>Bash · error · 1200 ms</summary>" in block
    assert html.escape(HOSTILE, quote=True) in block
    assert "<h5>Arguments</h5>" in block and "<h5>Result</h5>" in block
    assert '<pre class="stderr">1 failed</pre>' in block
    assert page.count('<details class="transcript">') == 1  # the plain case shows none


def test_an_unreadable_transcript_is_said_not_hidden(tmp_path: Path) -> None:
    broken = case("broken", [grader("contains", 1.0)])
    broken.transcript = {"steps": "not a list"}
    page = render(load_bundle(write_bundle(tmp_path / "run", [broken])), "html")
    assert "<h4>Transcript</h4><p class=reason>cannot read it: KeyError(&#x27;format&#x27;)" in page
