"""Markdown, JSON, JUnit and static HTML reports, and the GitHub Actions output."""

from __future__ import annotations

import html as std_html
import io
import json
import random
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from report_helpers import (
    NASTY,
    case,
    grader,
    judge_calls_for,
    mixed_cases,
    random_cases,
    write_bundle,
)

from evalrun.reporters import FORMATS, load_bundle, markdown, render, write_reports
from evalrun.reporters import html as html_report
from evalrun.reporters.fmt import pretty_json
from evalrun.reporters.github import (
    annotations,
    escape_data,
    escape_property,
    github_actions_report,
)
from evalrun.safetext import escape_controls, no_workflow_commands

XSD = Path(__file__).parent / "data" / "junit.xsd"
XMLLINT = shutil.which("xmllint")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    cases = mixed_cases()
    return write_bundle(tmp_path / "run", cases, judge_calls=judge_calls_for(cases))


@pytest.fixture
def repeat_run(tmp_path: Path) -> Path:
    ids = ["r1", "r2", "r3"]
    return write_bundle(tmp_path / "rep", random_cases(ids, repeats=3), meta={"repeat": 3})


def test_reports_written_together_read_each_cases_judge_calls_once(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Markdown and HTML reports both list a case's judge calls: one read serves both, and
    the files are the same as when each report is written alone."""
    from evalrun.results import reader

    alone = {}
    for fmt in ("md", "html"):
        write_reports(run, (fmt,))
        alone[fmt] = (run / FORMATS[fmt][1]).read_text()
    reads: list[tuple[int, ...]] = []
    real = reader.judge_calls_at
    monkeypatch.setattr(
        reader,
        "judge_calls_at",
        lambda d, offsets: reads.append(tuple(offsets)) or real(d, offsets),
    )
    write_reports(run, ("md", "html"))
    assert reads and len(reads) == len(set(reads))
    assert {fmt: (run / FORMATS[fmt][1]).read_text() for fmt in alone} == alone


def test_write_reports_writes_the_default_files(run: Path) -> None:
    paths = write_reports(run)
    assert [p.name for p in paths] == ["report.md", "report.html", "junit.xml"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert not list(run.glob("*.tmp"))
    with pytest.raises(ValueError):
        write_reports(run, ("md", "pdf"))


def test_markdown_report(run: Path) -> None:
    md = render(load_bundle(run), "md")
    assert md.startswith("# Eval report: rag-demo")
    # pass rate 2/7 with its Wilson interval [8.2%, 64.1%] (by hand: centre 0.3616, half
    # 0.2794); the mean's bootstrap interval is the seeded one test_report_stats.py checks
    assert "| 7 | 7 | 2 | 2 | 2 | 1 | 0.690 [0.480, 0.900] | 28.6% [8.2%, 64.1%] |" in md
    assert "| precision | 0.588 |" in md
    assert "## Failures and errors (4)" in md
    assert "no Paris" in md and "ValueError: boom" in md and "target timed out" in md
    assert md.count("<details>") == 7 and md.count("</details>") == 7
    # Hostile text never reaches the page as markup.
    assert "<script>" not in md and "<img" not in md
    assert "&lt;script&gt;" in md
    # A pipe in a reason cannot break a table row: the row still has five cells.
    (row,) = [
        line for line in md.splitlines() if line.startswith("| precision | ❌ failed | 0.200")
    ]
    assert "\\|" in row
    assert len(re.split(r"(?<!\\)\|", row)) == 5 + 2


def test_markdown_without_details_for_job_summaries(run: Path) -> None:
    view = load_bundle(run)
    short = markdown.render(view, details=False, max_failures=1)
    assert "<details>" not in short
    assert "and 3 more" in short


def test_markdown_repeat_section(repeat_run: Path) -> None:
    md = render(load_bundle(repeat_run), "md")
    assert "## Repeat statistics (3 repeats)" in md
    assert "pass@1 | pass@2 | pass@3" in md
    assert "[repeat 2]" in md


def test_json_report_has_the_statistics(run: Path, repeat_run: Path) -> None:
    data = json.loads(render(load_bundle(run), "json"))
    assert data["format"] == "evalrun.report/1"
    assert data["counts"]["total"] == 7 and data["run"]["eval"] == "rag-demo"
    assert data["repeat_stats"] is None
    assert {f["id"] for f in data["failures"]} == {"beta-10", "beta-2", "gamma", "delta", "epsilon"}
    assert data["judge_calls"]["count"] == 2 and data["judge_calls"]["cached"] == 1
    assert data["pass_rate_ci"] == pytest.approx([0.0822189, 0.6410655])
    assert data["mean_score_ci"] == pytest.approx([0.48, 0.90])
    rep = json.loads(render(load_bundle(repeat_run), "json"))
    assert set(rep["repeat_stats"]["cases"]) == {"r1", "r2", "r3"}
    assert set(rep["repeat_stats"]["cases"]["r1"]["pass_at_k"]) == {"1", "2", "3"}


def _validate(path: Path) -> None:
    if XMLLINT is None:
        pytest.skip("xmllint (Debian libxml2-utils) is not installed")
    result = subprocess.run(
        [XMLLINT, "--noout", "--schema", str(XSD), str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_junit_is_valid_and_maps_statuses(run: Path) -> None:
    (path,) = write_reports(run, ("junit",))
    _validate(path)
    root = ET.parse(path).getroot()
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "7" and suite.get("failures") == "2"
    assert suite.get("errors") == "2" and suite.get("skipped") == "1"
    assert suite.get("timestamp") == "2025-01-02T03:04:05"
    by_name = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert by_name["beta-2"].find("failure") is not None
    assert "no Paris" in by_name["beta-2"].find("failure").text
    assert by_name["gamma"].find("error") is not None
    assert by_name["epsilon"].find("error").get("message") == "error: target timed out after 30 s"
    assert by_name["delta"].find("skipped") is not None
    assert len(list(by_name["alpha"])) == 1  # only system-out
    assert by_name["beta-10"].find("system-out").text.startswith('<script>alert("x")')
    assert by_name["alpha"].get("time") == "0.300"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (float(props["pass_rate_ci_low"]), float(props["pass_rate_ci_high"])) == pytest.approx(
        (0.0822189, 0.6410655)
    )
    assert props["mean_score_ci_low"] == "0.48" and props["mean_score_ci_high"] == "0.9"


def test_junit_one_testcase_per_repeat(repeat_run: Path) -> None:
    (path,) = write_reports(repeat_run, ("junit",))
    _validate(path)
    names = [tc.get("name") for tc in ET.parse(path).getroot().iter("testcase")]
    assert len(names) == 9 and "r2 [repeat 1]" in names


def test_junit_survives_control_characters(tmp_path: Path) -> None:
    bad = case("ctl\x01id", [grader("g", 0.1, reason="bell\x07 and nul\x00 and esc\x1b[0m")])
    run = write_bundle(tmp_path / "ctl", [bad], summary=False)
    (path,) = write_reports(run, ("junit",))
    _validate(path)
    failure = ET.parse(path).getroot().find(".//failure")
    assert failure is not None and "bell" in failure.text


def test_the_schema_rejects_broken_junit(tmp_path: Path) -> None:
    """The XSD is strict enough to fail: a testcase without classname/time is refused."""
    broken = tmp_path / "broken.xml"
    broken.write_text(
        '<testsuites><testsuite id="0" package="p" name="s" tests="1" failures="0" errors="0" '
        'time="1" timestamp="2025-01-01T00:00:00" hostname="h"><properties/>'
        '<testcase name="x"/><system-out/><system-err/></testsuite></testsuites>'
    )
    if XMLLINT is None:
        pytest.skip("xmllint is not installed")
    result = subprocess.run(
        [XMLLINT, "--noout", "--schema", str(XSD), str(broken)], capture_output=True
    )
    assert result.returncode != 0


def test_html_is_self_contained_and_escaped(run: Path) -> None:
    page = render(load_bundle(run), "html")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<script>") == 2  # the error hook and the page script, nothing injected
    assert "<img src=x" not in page and 'alert("x")</script>' not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # Nothing is fetched: no external scripts, styles, images or fonts.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page and "<link" not in page
    assert page.count('<tbody class="case"') == 7
    assert '<svg id="score-chart"' in page
    assert "Judge calls (2)" in page
    assert page.count('class="bar"') >= 4
    assert '<b>0.690</b><small title="95% interval">[0.480, 0.900]</small>' in page
    assert '<b>28.6%</b><small title="95% interval">[8.2%, 64.1%]</small>' in page


def test_github_escaping_rules() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%") == "a%3A b%2C c%25"


def test_github_actions_output(run: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    assert github_actions_report(run, env={}, stream=out) is False
    assert out.getvalue() == ""

    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    assert github_actions_report(run, env=env, stream=out) is True
    text = summary.read_text()
    assert text.startswith("earlier step\n# Eval report: rag-demo")
    assert "<details>" not in text
    assert "0.690 [0.480, 0.900] | 28.6% [8.2%, 64.1%] |" in text
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and all(line.startswith("::error title=") for line in lines)
    beta = next(line for line in lines if "beta-10" in line)
    assert "\r" not in beta and "%0D%0A" in beta and "100%25 done" in beta
    title = beta.split("::")[1]
    assert "," not in title and ":" not in title.removeprefix("error title=")


def test_github_annotations_are_capped(tmp_path: Path) -> None:
    cases = [case(f"c{i}", [grader("g", 0.0)]) for i in range(7)]
    view = load_bundle(write_bundle(tmp_path / "many", cases))
    lines = annotations(view, limit=5)
    assert len(lines) == 6 and lines[-1].startswith("::notice")


def test_every_format_renders_an_empty_or_summary_only_bundle(tmp_path: Path) -> None:
    run = tmp_path / "empty"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"eval": "nothing", "complete": False}))
    view = load_bundle(run)
    for fmt in FORMATS:
        if fmt == "agentv":  # AgentV's index of no rows is an empty file
            assert render(view, fmt) == ""
        else:
            assert render(view, fmt)
    _validate(write_reports(run, ("junit",))[0])


def test_agentv_layout_keeps_hostile_text_and_stays_in_the_bundle(tmp_path: Path) -> None:
    """Ids that look like paths and text that looks like markup: every JSON file holds them as
    written, and every file lands inside the bundle (docs/results.md)."""
    hostile = ["../../escape", "/abs/path", "a\\b:c*?", NASTY]
    cases = [case(cid, [grader("g", 0.9, reason=NASTY)], output=NASTY) for cid in hostile]
    run = write_bundle(tmp_path / "run", cases)
    (index,) = write_reports(run, ("agentv",))
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    assert [r["test_id"] for r in rows] == hostile
    written = [p.resolve() for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert all(p.is_relative_to((tmp_path / "run").resolve()) for p in written)
    assert not (tmp_path / "escape").exists()
    for row in rows:
        grading = json.loads((run / row["grading_path"]).read_text())
        assert grading["component_results"][0]["reason"] == NASTY
        assert (run / row["answer_path"]).read_bytes() == NASTY.encode()


def test_nasty_constant_is_nasty() -> None:
    assert "<script>" in NASTY and "%" in NASTY and "\r\n" in NASTY and "|" in NASTY


def test_the_documented_workflows_parse() -> None:
    yaml = pytest.importorskip("yaml")
    docs = Path(__file__).resolve().parent.parent / "docs"
    workflow = yaml.safe_load((docs / "evalrun-workflow.yml").read_text())
    steps = workflow["jobs"]["eval"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("actions/setup-python") for u in uses)
    assert any("evalrun evals/" in s.get("run", "") for s in steps)
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "${{ always() }}" and upload["with"]["path"] == "eval-run/"
    page = (docs / "github-actions.md").read_text()
    snippet = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    jobs = yaml.safe_load(snippet)["jobs"]
    assert jobs["merge"]["needs"] == "eval"
    assert any("evalrun merge" in s.get("run", "") for s in jobs["merge"]["steps"])


def _json_like(rng: random.Random, depth: int = 0) -> object:
    """Nested data as graders and judge calls hold it, plus what ``default=str`` covers."""
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice(
            [NASTY, "", "plain", 0, -7, 10**30, 0.1, 1e-300, float("nan"), float("inf"),
             -float("inf"), True, False, None, (1, "two"), Path("/tmp/x")]
        )  # fmt: skip
    if roll < 0.65:
        keys = ["k", "é", "", 1, 2.5, True, None]
        return {
            (rng.choice(keys) if rng.random() < 0.3 else f"k{i}"): _json_like(rng, depth + 1)
            for i in range(rng.randint(0, 4))
        }
    return [_json_like(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def test_pretty_json_is_what_json_dumps_indents() -> None:
    """The reports' fast indented JSON gives the standard library's text, byte for byte."""
    rng = random.Random(7)
    for _ in range(3000):
        value = _json_like(rng)
        assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False, default=str)


def test_html_escaping_takes_no_shortcut_that_changes_the_text() -> None:
    """``e`` skips steps for text that needs none of them; the text comes out as the full
    escape (controls shown, markup escaped, no workflow command) would write it."""
    rng = random.Random(11)
    pieces = ["a", " ", "\n", "::", "##[", "<", ">", "&", '"', "'", "\x1b", "\u2028", "é", ":"]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        full = no_workflow_commands(
            std_html.escape(escape_controls(text, keep_newlines=True), quote=True)
        )
        assert html_report.e(text) == full, repr(text)
