"""Report sections drafted while a run goes on (docs/reports.md, "When reports are written"):
the reports written from drafts are the bytes ``evalrun report`` renders from the bundle, and a
draft that does not fit is never used."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from report_helpers import case, grader, judge_calls_for, mixed_cases

from evalrun.judgecall import JudgeCall
from evalrun.reporters import (
    FORMATS,
    html,
    load_bundle,
    report_drafts,
    write_reports,
    write_view,
)
from evalrun.reporters.bundle_view import DETAIL_LIMIT
from evalrun.reporters.drafts import ReportDrafts
from evalrun.results import reader
from evalrun.results.bundle import BundleWriter
from evalrun.results.models import CaseResult
from evalrun.results.summary import RunMeta, summarize

ALL = list(FORMATS)


def _record(
    folder: Path, cases: list[CaseResult], calls: list[dict], expected: int = 0
) -> ReportDrafts:
    """What a run does: write each case and its judge calls, and hand the lines to drafts."""
    drafts = report_drafts(ALL, expected)
    writer = BundleWriter(folder, mode="new")
    for c in cases:
        line = writer.add_case(c)
        mine = [JudgeCall.from_dict(d) for d in calls if d["case_id"] == c.id]
        drafts.add(line, writer.add_judge_calls(mine))
    # a start time of its own: without one, JUnit's timestamp is the time of rendering
    meta = {"eval": "drafted", "repeat": 1, "started_at": "2026-01-02T03:04:05+00:00"}
    writer.write_summary(summarize(cases, RunMeta.from_dict(meta)))
    writer.close()
    return drafts


def _reports(folder: Path) -> dict[str, bytes]:
    return {fmt: (folder / FORMATS[fmt][1]).read_bytes() for fmt in ALL}


def _rendered_from_the_bundle(folder: Path) -> dict[str, bytes]:
    """The reports ``evalrun report`` writes, in the same folder (the page names it)."""
    write_reports(folder, ALL)
    return _reports(folder)


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each case a report renders from the bundle (not from its draft), and each read of judge
    calls from disk."""
    reads: list[str] = []
    for fmt in ALL:
        writer = importlib.import_module(f"evalrun.reporters.{FORMATS[fmt][0]}").Writer
        real = writer.case
        monkeypatch.setattr(
            writer,
            "case",
            lambda self, c, real=real, fmt=fmt: reads.append(f"{fmt} {c.id}") or real(self, c),
        )
    calls_at, call_lines = reader.judge_calls_at, reader.judge_call_lines
    monkeypatch.setattr(
        reader, "judge_calls_at", lambda *a, **k: reads.append("calls") or calls_at(*a, **k)
    )
    monkeypatch.setattr(
        reader, "judge_call_lines", lambda *a, **k: reads.append("scan") or call_lines(*a, **k)
    )
    return reads


def test_reports_from_drafts_are_the_bytes_rendered_from_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = mixed_cases()  # every status, judge calls, hostile text in ids, reasons, output
    folder = tmp_path / "run"
    drafts = _record(folder, cases, judge_calls_for(cases))
    reads = _count_reads(monkeypatch)
    write_view(load_bundle(folder, calls=drafts.calls), ALL, drafts)
    assert reads == []  # no case rendered again and no judge call read: every draft was used
    monkeypatch.undo()
    drafted = _reports(folder)
    assert drafted == _rendered_from_the_bundle(folder)


def test_a_case_whose_judge_calls_differ_is_rendered_from_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = mixed_cases()
    folder = tmp_path / "run"
    drafts = _record(folder, cases, judge_calls_for(cases))
    # a call the drafts never saw (written behind the run's back): the view has three for
    # beta-10, its draft two, so that case alone is read and rendered again
    extra = {**judge_calls_for(cases)[0], "question": "a third call"}
    with open(folder / "judge-calls.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(extra) + "\n")
    reads = _count_reads(monkeypatch)
    write_view(load_bundle(folder), ALL, drafts)
    assert sorted(r for r in reads if r not in ("scan", "calls")) == [
        f"{fmt} beta-10" for fmt in sorted(ALL)
    ]
    monkeypatch.undo()
    drafted = _reports(folder)
    assert b"a third call" in drafted["html"]
    assert drafted == _rendered_from_the_bundle(folder)


@pytest.mark.slow
@pytest.mark.parametrize("expected", [0, DETAIL_LIMIT + 1])
def test_a_large_run_keeps_no_drafts_and_its_reports_are_still_whole(
    tmp_path: Path, expected: int
) -> None:
    """More than DETAIL_LIMIT results (known from the start or not): the reports are compact,
    drafts of full sections would not fit, so none are kept (nor the memory they take)."""
    cases = [case(f"c{i}", [grader("g", 0.9 if i % 7 else 0.1)]) for i in range(DETAIL_LIMIT + 1)]
    folder = tmp_path / "run"
    drafts = _record(folder, cases, [], expected)
    assert drafts.get(load_bundle(folder), 0, ["evalrun.reporters.html"]) is None
    view = load_bundle(folder, calls=drafts.calls)
    assert view.compact and not drafts.fit(view)
    write_view(view, ALL, drafts)
    drafted = _reports(folder)
    assert drafted == _rendered_from_the_bundle(folder)


def test_a_draft_that_fails_costs_nothing_but_the_shortcut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = mixed_cases()

    def broken(view: object, case: CaseResult) -> tuple[str]:
        raise RuntimeError("a bug in a reporter")

    monkeypatch.setattr(html, "draft", broken)
    folder = tmp_path / "run"
    drafts = _record(folder, cases, judge_calls_for(cases))  # add() did not raise
    assert drafts.broken
    monkeypatch.undo()
    write_view(load_bundle(folder), ALL, drafts)
    drafted = _reports(folder)
    assert drafted == _rendered_from_the_bundle(folder)


def test_a_run_drafts_every_case_and_writes_the_reports_evalrun_report_writes(
    tmp_path: Path,
) -> None:
    from evalrun.runner.options import RunOptions
    from evalrun.runner.plan import plan_run
    from evalrun.runner.runner import EvalRun
    from evalrun.session import _write_reports
    from evalrun.spec.loader import load_eval

    out = tmp_path / "run"
    options = RunOptions(out=out, target="mock", workers=2, quiet=True, sandbox="none")
    drafts = report_drafts(options.report_formats)
    run = EvalRun(plan_run(load_eval(ROOT / "evals" / "contextual-precision.eval.yaml"), options))
    outcome = asyncio.run(run.run(on_record=drafts.add))
    assert not drafts.broken
    view = load_bundle(out, scan=outcome.scan, calls=drafts.calls)
    modules = [f"evalrun.reporters.{FORMATS[f][0]}" for f in options.report_formats]
    offsets = list(view.index.offsets())
    assert len(offsets) == 3 and all(drafts.get(view, o, modules) for o in offsets)
    assert view.calls.count == 3  # one batched call per case, as a scan of the file finds
    assert _write_reports(out, options.report_formats, outcome.scan, drafts, print)
    written = {f: (out / FORMATS[f][1]).read_bytes() for f in options.report_formats}
    for name in written:
        (out / FORMATS[name][1]).unlink()
    assert run_cli("report", str(out)).returncode == 0
    assert {f: (out / FORMATS[f][1]).read_bytes() for f in written} == written


def test_the_run_command_drafts_a_fresh_run_of_one_repeat_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalrun.runner.options import RunOptions
    from evalrun.session import _report_drafts

    writer = BundleWriter(tmp_path / "run", mode="new")
    drafts = _report_drafts(RunOptions(out=tmp_path / "run"), writer, 7)
    assert drafts is not None
    drafts.add(writer.add_case(mixed_cases()[0]), [])
    assert drafts.get(load_bundle(tmp_path / "run"), 0, ["evalrun.reporters.html"])
    assert _report_drafts(RunOptions(out=tmp_path, repeat=3), writer, 7) is None
    assert _report_drafts(RunOptions(out=tmp_path, report_formats=()), writer, 7) is None
    writer.close()
    resumed = BundleWriter(tmp_path / "run", mode="resume")
    assert _report_drafts(RunOptions(out=tmp_path / "run"), resumed, 7) is None
    resumed.close()
    # reporters that cannot be imported: no drafts, and nothing raised into the run
    monkeypatch.setitem(sys.modules, "evalrun.reporters", None)
    fresh = BundleWriter(tmp_path / "other", mode="new")
    assert _report_drafts(RunOptions(out=tmp_path / "other"), fresh, 7) is None
    fresh.close()
