"""report.md: a summary for people and for GitHub's job summary.

All case text is escaped: control characters are shown as escapes, it is HTML-escaped (GitHub
renders inline HTML), Markdown's active characters are backslash-escaped, so a grader's reason
cannot inject markup, and no line can start a GitHub workflow command (evalrun.safetext).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, TextIO

from evalrun.reporters import fmt
from evalrun.reporters.bundle_view import (
    DETAIL_LIMIT,
    BundleView,
    CaseView,
    case_duration_s,
    case_problems,
)
from evalrun.reporters.onepass import write_all
from evalrun.results.models import CaseResult, GraderOutcome
from evalrun.safetext import escape_controls, no_workflow_commands, printable

_MD_ACTIVE = re.compile(r"([\\`*_\[\]{}#!|~])")
OUTPUT_LIMIT = 4000


def _escaped(value: Any) -> str:
    plain = escape_controls(str(value), keep_newlines=True)
    return _MD_ACTIVE.sub(r"\\\1", html.escape(plain, quote=False))


def text(value: Any) -> str:
    """Inline Markdown text: escaped, one line."""
    return no_workflow_commands(re.sub(r"\s*\n\s*", " ", _escaped(value)).strip())


def cell(value: Any) -> str:
    """A table cell: like :func:`text` but keeps line breaks as ``<br>``."""
    lines = _escaped(value).strip().splitlines()
    return no_workflow_commands("<br>".join(line.strip() for line in lines)) or " "


def pre(value: Any) -> str:
    plain = escape_controls(str(value), keep_newlines=True)
    return f"<pre>{no_workflow_commands(html.escape(plain, quote=False))}</pre>"


def _table(header: list[str], rows: list[list[str]], align: str = "") -> list[str]:
    aligns = [("---:" if a == "r" else "---") for a in align.ljust(len(header), "l")]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def _run_lines(view: BundleView) -> list[str]:
    s = view.meta
    lines = [f"# Eval report: {text(view.title)}", ""]
    if s.description:
        lines += [text(s.description), ""]
    state = "complete" if s.complete else "incomplete"
    if s.interrupted:
        state += " (interrupted)"
    targets = ", ".join(s.matrix) if s.matrix else s.target
    rows = [
        ["Targets" if s.matrix else "Target", cell(targets or "–")],
        *([["Prompts", cell(", ".join(s.prompts))]] if s.prompts else []),
        ["Judge", cell(s.judge or "–")],
        ["Started", cell(s.started_at or "–")],
        ["Duration", fmt.seconds(s.duration_s)],
        ["State", state if s.complete is not None else "–"],
        ["Threshold", cell(s.threshold if s.threshold is not None else "–")],
        ["Exit code", cell(s.exit_code if s.exit_code is not None else "–")],
    ]
    if (s.repeat or 1) > 1:
        rows.append(["Repeats", str(s.repeat)])
    return lines + _table(["Run", ""], rows)


def _summary_lines(view: BundleView) -> list[str]:
    c = view.stats.counts
    row = [
        str(view.stats.case_count),
        str(c.total),
        str(c.passed),
        str(c.failed),
        str(c.error),
        str(c.unscored),
        fmt.interval(fmt.score(view.stats.mean_score), view.stats.mean_score_ci, fmt.score),
        fmt.interval(fmt.percent(view.stats.pass_rate), view.stats.pass_rate_ci, fmt.percent),
    ]
    header = [
        "Cases",
        "Results",
        "Passed",
        "Failed",
        "Error",
        "Unscored",
        "Mean score",
        "Pass rate",
    ]
    note = "Brackets: 95% intervals, Wilson for the pass rate, bootstrap for the mean score."
    return ["## Summary", "", *_table(header, [row], "rrrrrrrr"), note, ""]


def _matrix_lines(view: BundleView) -> list[str]:
    """A matrix run: a summary per column (target, or target × prompt variant), then a row per
    case with each column's status and score, problem rows first (docs/results.md, "A matrix run")."""
    if not view.matrix:
        return []
    columns = [
        [
            cell(c.name),
            str(c.counts.total),
            str(c.counts.passed),
            str(c.counts.failed),
            str(c.counts.error),
            str(c.counts.unscored),
            fmt.interval(fmt.score(c.mean_score), c.mean_score_ci(view.stats.seed), fmt.score),
            fmt.interval(fmt.percent(c.pass_rate), c.pass_rate_ci, fmt.percent),
        ]
        for c in view.stats.columns
    ]
    word = "Column" if view.meta.prompts else "Target"
    header = [word, "Results", "Passed", "Failed", "Error", "Unscored", "Mean score"]
    lines = [f"## {word}s", "", *_table([*header, "Pass rate"], columns, "lrrrrrrr")]
    grid = view.grid()
    repeats = view.repeats is not None
    rows = []
    for row in grid.rows:
        cells = [cell(row.case_id), *([str(row.repeat)] if repeats else [])]
        for column in grid.columns:
            case = row.cells.get(column)
            cells.append(
                "–"
                if case is None
                else f"{fmt.STATUS_ICONS.get(case.status, '')} {case.status} "
                f"{fmt.score(case.score)}"
            )
        rows.append(cells)
    header = ["Case", *(["Repeat"] if repeats else []), *(cell(c) for c in grid.columns)]
    lines += ["## Matrix", "", *_table(header, rows, "l" + "r" * (len(header) - 1))]
    if grid.more:
        lines += [f"… and {grid.more} more rows: every result is in results.jsonl", ""]
    return lines


def _grader_lines(view: BundleView) -> list[str]:
    if not view.graders:
        return []
    rows = [
        [
            cell(g.name),
            fmt.score(g.mean),
            fmt.score(g.median),
            str(len(g.scores)),
            str(g.passed),
            str(g.failed),
            str(g.error),
            str(g.unscored),
        ]
        for g in view.graders.values()
    ]
    header = ["Grader", "Mean", "Median", "Scored", "Passed", "Failed", "Error", "Unscored"]
    return ["## Graders", "", *_table(header, rows, "lrrrrrrr")]


def _repeat_lines(view: BundleView) -> list[str]:
    rep = view.repeats
    if rep is None:
        return []
    ks = range(1, len(rep.pass_at_k) + 1)
    lines = [f"## Repeat statistics ({rep.repeats} repeats)", ""]
    header = ["", "Mean stdev", *(f"pass@{k}" for k in ks), "Unstable cases"]
    rows = [
        [
            "**suite**",
            fmt.score(rep.mean_stdev),
            *map(fmt.score, rep.pass_at_k),
            str(len(rep.unstable)),
        ]
    ]
    for name, g in rep.graders.items():
        padded = [fmt.score(v) for v in g.pass_at_k] + ["–"] * (len(ks) - len(g.pass_at_k))
        rows.append([cell(name), fmt.score(g.mean_stdev), *padded[: len(ks)], str(len(g.unstable))])
    lines += _table(header, rows, "l" + "r" * (len(ks) + 2))
    unstable = [rep.cases[cid] for cid in rep.unstable]
    if unstable:
        lines += [f"Unstable cases (score stdev > {rep.bound:g}):", ""]
        rows = [
            [
                cell(c.case_id),
                str(c.overall.n),
                fmt.score(c.overall.mean),
                fmt.score(c.overall.median),
                fmt.score(c.overall.stdev),
                fmt.score(c.overall.pass_at_k[0] if c.overall.pass_at_k else None),
            ]
            for c in unstable
        ]
        lines += _table(["Case", "Runs", "Mean", "Median", "Stdev", "pass@1"], rows, "lrrrrr")
    return lines


def _failure_lines(view: BundleView, limit: int | None) -> Iterator[list[str]]:
    total = view.failure_count
    if not total:
        return
    yield [f"## Failures and errors ({total})", ""]
    for case in islice(view.failures, limit):
        yield [
            f"- {fmt.STATUS_ICONS[case.status]} **{text(view.label(case))}**: {case.status}, "
            f"score {fmt.score(case.score)}",
            *(f"  - {text(problem)}" for problem in case_problems(case)),
        ]
    shown = total if limit is None else min(limit, total)
    if shown < total:
        yield [f"- … and {total - shown} more (see report.html)"]
    yield [""]


def _grader_detail(grader: GraderOutcome) -> list[str]:
    lines = [f"- ✔ {text(h)}" for h in grader.hits]
    lines += [f"- ✘ {text(m)}" for m in grader.misses]
    if lines:
        lines.append("")
    if grader.checks:
        evidence = any(ch.get("evidence") for ch in grader.checks)
        rows = [
            [
                cell(ch.get("text", "")),
                "✅" if ch.get("pass") else "❌",
                fmt.score(ch.get("score") if isinstance(ch.get("score"), (int, float)) else None),
                cell(ch.get("reason", "") or " "),
                *([cell(ch.get("evidence", "") or " ")] if evidence else []),
            ]
            for ch in grader.checks
        ]
        headers = ["Check", "Pass", "Score", "Reason", *(["Evidence"] if evidence else [])]
        lines += _table(headers, rows, "llrl" + ("l" if evidence else ""))
    if grader.stderr_tail:
        lines += [pre(grader.stderr_tail), ""]
    if not lines:
        return []
    return [f"**{text(grader.name)}**", "", *lines]


def _case_details(view: CaseView, case: CaseResult) -> list[str]:
    summary = (
        f"{fmt.STATUS_ICONS.get(case.status, '')} <b>{html.escape(printable(view.label(case)))}</b>: "
        f"{case.status}, score {fmt.score(case.score)}"
    )
    lines = ["<details>", f"<summary>{summary}</summary>", ""]
    if case.error:
        lines += [f"**Error:** {text(case.error)}", ""]
    if case.graders:
        rows = [
            [
                cell(g.name),
                f"{fmt.STATUS_ICONS.get(g.status, '')} {g.status}",
                fmt.score(g.score),
                f"{g.threshold:g}",
                cell(g.reason or " "),
            ]
            for g in case.graders
        ]
        lines += _table(["Grader", "Status", "Score", "Threshold", "Reason"], rows, "llrrl")
    for grader in case.graders:
        lines += _grader_detail(grader)
    if case.output is not None:
        lines += ["<b>Output</b>", "", pre(fmt.clip(str(case.output), OUTPUT_LIMIT)), ""]
    duration = case_duration_s(case)
    calls = view.calls_for(case)
    meta = [f"time {fmt.seconds(duration)}"] if duration is not None else []
    if calls:
        meta.append(f"{len(calls)} judge call(s)")
    if meta:
        lines += [", ".join(meta), ""]
    return lines + ["</details>", ""]


def draft(view: CaseView, case: CaseResult) -> tuple[str]:
    """A case's section, as one piece (the report joins its lines anyway)."""
    return ("\n".join(_case_details(view, case)),)


class _Joined:
    """Writes lines as ``"\n".join(lines).rstrip() + "\n"`` would, without holding them all."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = False
        self.pending = ""

    def add(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.pending += ("\n" if self.started else "") + line
            self.started = True
            kept = self.pending.rstrip()
            self.out.write(kept)
            self.pending = self.pending[len(kept) :]

    def close(self) -> None:
        self.out.write("\n")


class Writer:
    """The whole report; ``details=False`` leaves out the per-case sections (job summaries).
    A large run (``view.compact``) details only the cases that did not pass."""

    def __init__(
        self,
        view: BundleView,
        out: TextIO,
        *,
        details: bool = True,
        max_failures: int | None = None,
    ) -> None:
        self.view, self.doc = view, _Joined(out)
        self.details = details and bool(view.stats.counts.total)
        self.max_failures = max_failures
        self.reads_passed = self.details and not view.compact
        self.started = False

    def head(self) -> None:
        sections = (_run_lines, _summary_lines, _matrix_lines, _grader_lines, _repeat_lines)
        for section in sections:
            self.doc.add(section(self.view))
        for lines in _failure_lines(self.view, self.max_failures):
            self.doc.add(lines)
        if self.details:
            self.doc.add(["## Cases", ""])

    def case(self, case: CaseResult) -> None:
        if self.details:
            self.place(draft(self.view, case))

    def place(self, pieces: tuple[str, ...]) -> None:
        if self.details:
            self.doc.add(pieces)

    def tail(self) -> None:
        passed = self.view.stats.counts.passed
        if self.details and not self.reads_passed and passed:
            self.doc.add(
                [
                    f"{passed} passed case(s) are not detailed here (a run of more than "
                    f"{DETAIL_LIMIT} results): see report.html or results.jsonl.",
                    "",
                ]
            )
        self.doc.close()


def write(
    view: BundleView, out: TextIO, *, details: bool = True, max_failures: int | None = None
) -> None:
    """The whole report in one go (see :class:`Writer`)."""
    writer = Writer(view, out, details=details, max_failures=max_failures)
    if writer.details:
        write_all(view, [writer])
    else:  # no per-case sections: nothing to read case by case
        writer.head()
        writer.tail()


def render(view: BundleView, *, details: bool = True, max_failures: int | None = None) -> str:
    buffer = io.StringIO()
    write(view, buffer, details=details, max_failures=max_failures)
    return buffer.getvalue()
