"""report.html: one self-contained page (inline CSS, JS and SVG; nothing fetched).

Everything is rendered here with ``html.escape``; the script only sorts, filters and opens
rows, and never turns data into markup. It records its own errors into ``#js-errors``.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable, Iterable
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, TextIO

from evalrun.judgecall import JudgeCall
from evalrun.reporters import fmt
from evalrun.reporters.bundle_view import (
    DETAIL_LIMIT,
    BundleView,
    CaseView,
    case_duration_s,
    case_problems,
    case_reason,
)
from evalrun.results.matrix import cell_label
from evalrun.results.models import STATUSES, CaseResult, GraderOutcome
from evalrun.results.scan import PROBLEMS_FIRST
from evalrun.results.summary import SCORE_BINS, Series
from evalrun.safetext import CONTROL_CHARS, escape_controls, no_workflow_commands
from evalrun.transcripts import Step, ToolCall, Transcript, Usage

_BREAK_AFTER = re.compile(r"([-_./:])(?=[^-_./:])")

TEXT_LIMIT = 20_000
#: Compact rows the page adds per "show more".
PAGE = 500
SEARCH_LIMIT = 4_000
BINS = SCORE_BINS
COLORS = {"passed": "#2e9d5b", "failed": "#d2453f", "error": "#e39a23", "unscored": "#8a8f98"}


#: What :func:`e` may change: control characters, markup, and the ``::`` and ``##[`` of a
#: workflow command. Text with none of them (most of it) is returned as it is, text with
#: markup only (JSON, for one) gets ``html.escape`` only.
_UNSAFE = re.compile(f"[{CONTROL_CHARS}&<>\"']|::|##\\[")
_NOT_MARKUP = re.compile(f"[{CONTROL_CHARS}]|::|##\\[")


def e(value: Any) -> str:
    """Escaped text; control characters shown as escapes, no line a workflow command (the page
    may be printed with ``evalrun report --format html -o -``)."""
    text = "" if value is None else str(value)
    if not _UNSAFE.search(text):
        return text
    if not _NOT_MARKUP.search(text):
        return html.escape(text, quote=True)
    plain = escape_controls(text, keep_newlines=True)
    return no_workflow_commands(html.escape(plain, quote=True))


def _num(value: float | None) -> str:
    """A sort key for a ``data-v`` attribute; empty sorts last."""
    return "" if value is None else repr(float(value))


def _badge(status: str) -> str:
    return f'<span class="badge {e(status)}">{e(status)}</span>'


def _pre(value: Any, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<pre{attr}>{e(fmt.clip(str(value), TEXT_LIMIT))}</pre>"


def _table(header: Iterable[str], rows: Iterable[str], *, cls: str = "", attrs: str = "") -> str:
    """A table in a box that scrolls sideways on a narrow screen (the page itself never)."""
    head = "".join(header)
    return (
        f'<div class="scroll"><table class="{cls}"{attrs}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _th(label: str, kind: str | None = None, cls: str = "") -> str:
    """A header cell; ``kind`` ("num" or "text") makes the column sortable."""
    attrs = (f' data-type="{kind}"' if kind else "") + (f' class="{cls}"' if cls else "")
    return f"<th{attrs}>{e(label)}</th>"


def _td_num(value: float | None, text: str | None = None, cls: str = "") -> str:
    shown = fmt.score(value) if text is None else text
    return f'<td class="num{" " + cls if cls else ""}" data-v="{_num(value)}">{e(shown)}</td>'


# --- page sections -------------------------------------------------------------------------


def _verdict(view: BundleView) -> tuple[str, str]:
    """(css class, sentence) answering "did it pass?" from the exit code, else the counts."""
    counts = view.stats.counts
    code = view.meta.exit_code
    problems = [f"{counts.of(s)} {s}" for s in ("error", "failed", "unscored") if counts.of(s)]
    of = f"{counts.total} result(s)"
    if view.meta.interrupted:
        return "error", f"Interrupted: {', '.join(problems) or 'no problems'} of {of}"
    if code == 0 or (code is None and not problems):
        return "passed", f"Passed: {counts.passed} of {of} passed"
    if not problems:
        return "failed", f"Failed: the suite's mean score is below the threshold ({of})"
    return ("error" if counts.error else "failed"), f"Failed: {', '.join(problems)} of {of}"


def _header(view: BundleView) -> str:
    s = view.meta
    desc = f'<p class="desc">{e(s.description)}</p>' if s.description else ""
    kind, sentence = _verdict(view)
    code = s.exit_code
    exit_text = "" if code is None else f" · exit {e(code)}"
    return (
        f"<header><h1>{e(view.title)}</h1>{desc}"
        f'<p id="verdict" class="verdict {kind}">{e(sentence)}{exit_text}</p></header>'
    )


def _run_section(view: BundleView) -> str:
    s = view.meta
    state = "complete" if s.complete else "incomplete"
    if s.interrupted:
        state += " (interrupted)"
    items = [
        ("Targets", ", ".join(s.matrix)) if s.matrix else ("Target", s.target),
        ("Prompts", ", ".join(s.prompts) if s.prompts else None),
        ("Judge", s.judge),
        ("Started", s.started_at),
        ("Finished", s.finished_at),
        ("Duration", fmt.seconds(s.duration_s)),
        ("Run", state if s.complete is not None else None),
        ("Threshold", s.threshold),
        ("Exit code", s.exit_code),
        ("Repeats", s.repeat if (s.repeat or 1) > 1 else None),
        ("Bundle", view.run_dir.resolve().name),
    ]
    meta = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in items if v is not None)
    return f'<section id="run"><h2>Run</h2><dl class="meta">{meta}</dl></section>'


def _matrix_section(view: BundleView) -> str:
    """A matrix run (docs/results.md, "A matrix run"): a card of counts, mean and pass rate
    per column (target, or target × prompt variant), then a row per case with each column's
    status and score, problem rows first."""
    if not view.matrix:
        return ""
    seed = view.stats.seed
    word = "column" if view.meta.prompts else "target"
    header = [
        _th(word.capitalize(), "text"),
        _th("Results", "num"),
        *(_th(status, "num") for status in STATUSES),
        _th("Mean score", "num"),
        _th("Pass rate", "num"),
    ]
    rows = [
        f"<tr><td>{_breakable(c.name)}</td>{_td_num(c.counts.total, str(c.counts.total))}"
        + "".join(_td_num(c.counts.of(s), str(c.counts.of(s))) for s in STATUSES)
        + _td_num(
            c.mean_score, fmt.interval(fmt.score(c.mean_score), c.mean_score_ci(seed), fmt.score)
        )
        + _td_num(c.pass_rate, fmt.interval(fmt.percent(c.pass_rate), c.pass_rate_ci, fmt.percent))
        + "</tr>"
        for c in view.stats.columns
    ]
    columns = _table(header, rows, cls="sortable", attrs=' id="column-table"')
    grid = view.grid()
    repeats = view.repeats is not None
    head = [
        _th("Case", "text"),
        *([_th("Repeat", "num")] if repeats else []),
        *(_th(column, "num") for column in grid.columns),
    ]
    body = []
    for row in grid.rows:
        cells = [f'<td class="id">{_breakable(row.case_id)}</td>']
        if repeats:
            cells.append(_td_num(row.repeat, str(row.repeat)))
        for column in grid.columns:
            case = row.cells.get(column)
            if case is None:
                cells.append('<td data-v="">–</td>')
                continue
            cells.append(
                f'<td class="num cell" data-v="{PROBLEMS_FIRST.get(case.status, 0)}">'
                f"{_badge(case.status)} {e(fmt.score(case.score))}</td>"
            )
        body.append(f'<tr data-status="{e(_worst(row.cells.values()))}">{"".join(cells)}</tr>')
    matrix = _table(head, body, cls="sortable matrix", attrs=' id="matrix-table"')
    more = (
        f'<p class="note">… and {grid.more} more rows: every result is in results.jsonl.</p>'
        if grid.more
        else ""
    )
    return (
        f'<section id="matrix"><h2>Matrix: {len(grid.rows) + grid.more} cases × '
        f"{len(grid.columns)} {word}s</h2>{matrix}{more}<h3>Per {word}</h3>{columns}</section>"
    )


def _worst(cases: Iterable[CaseResult]) -> str:
    return min((c.status for c in cases), key=lambda s: PROBLEMS_FIRST.get(s, 0), default="")


def _breakable(text: str) -> str:
    """Escaped text that may wrap after ``-_./:`` but never inside a word (ids, names)."""
    return _BREAK_AFTER.sub(r"\1<wbr>", e(text))


def _cards(view: BundleView) -> str:
    counts = view.stats.counts
    cards = [f'<div class="card"><b>{counts.total}</b><span>results</span></div>']
    for status in STATUSES:
        cards.append(
            f'<button type="button" class="card {status}" data-filter-status="{status}">'
            f"<b>{counts.of(status)}</b><span>{status}</span></button>"
        )
    run = view.stats
    cards.append(_value_card(fmt.score(run.mean_score), run.mean_score_ci, fmt.score, "mean score"))
    cards.append(
        _value_card(fmt.percent(run.pass_rate), run.pass_rate_ci, fmt.percent, "pass rate")
    )
    calls = view.judge_stats["count"]
    cards.append(f'<div class="card"><b>{calls}</b><span>judge calls</span></div>')
    return f'<section id="summary" class="cards">{"".join(cards)}</section>'


def _value_card(
    value: str, ci: tuple[float, float] | None, show: Callable[[float], str], label: str
) -> str:
    """A card with the value's 95% interval under it (docs/results.md#intervals)."""
    small = "" if ci is None else f'<small title="95% interval">{fmt.bounds(ci, show)}</small>'
    return f'<div class="card"><b>{value}</b>{small}<span>{label}</span></div>'


def count_ticks(peak: int, most: int = 5) -> list[int]:
    """Evenly spaced whole-number ticks from 0 to at least ``peak``: steps of 1, 2 or 5 times a
    power of ten, at most ``most`` + 1 ticks (0, 1, 2, 3 for 3; 0, 20, 40, 60 for 53)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if -(-peak // (step * factor)) <= most:
                step *= factor
                top = -(-peak // step) * step
                return list(range(0, top + 1, step))
        step *= 10


def _histogram(view: BundleView) -> str:
    """Stacked bars of case scores in tenths, coloured by status, with the mean marked."""
    bins = view.stats.score_bins
    unscored = view.stats.counts.total - sum(sum(b.values()) for b in bins)
    width, height, left, right, top, bottom = 640, 240, 40, 12, 16, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    ticks = count_ticks(max([sum(b.values()) for b in bins] + [1]))
    peak = ticks[-1]
    bar_w = plot_w / BINS
    parts = [
        f'<svg id="score-chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Score distribution" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>',
    ]
    for tick in ticks:
        y = top + plot_h - plot_h * tick / peak
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{tick}</text>'
        )
    for i, counts in enumerate(bins):
        x = left + i * bar_w + 2
        y = top + plot_h
        low, high = i / BINS, (i + 1) / BINS
        for status in ("passed", "failed", "error", "unscored"):
            n = counts[status]
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w - 4:.1f}" height="{h:.1f}" '
                f'fill="{COLORS[status]}" class="bar" data-bin="{i}" data-status="{status}">'
                f"<title>{low:.1f}–{high:.1f}: {n} {status}</title></rect>"
            )
    for i in range(BINS + 1):
        x = left + i * bar_w
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" class="tick">'
            f"{i / BINS:.1f}</text>"
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 2}" text-anchor="middle" '
        'class="tick">case score</text>'
    )
    mean = view.stats.mean_score
    if mean is not None:
        x = left + plot_w * mean
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + plot_h}" class="mean"/>'
            + (  # the label on the side with room for it
                f'<text x="{x - 4:.1f}" y="{top + 6}" text-anchor="end" class="tick">'
                if mean > 0.75
                else f'<text x="{x + 4:.1f}" y="{top + 6}" class="tick">'
            )
            + f"mean {mean:.3f}</text>"
        )
    parts.append("</svg>")
    legend = "".join(f'<span><i style="background:{COLORS[s]}"></i>{s}</span>' for s in STATUSES)
    note = f"<p>{unscored} result(s) without a score.</p>" if unscored else ""
    return (
        f'<section id="chart"><h2>Score distribution</h2>{"".join(parts)}'
        f'<div class="legend">{legend}</div>{note}</section>'
    )


def _grader_section(view: BundleView) -> str:
    if not view.graders:
        return ""
    header = [
        _th("Grader", "text"),
        _th("Mean", "num"),
        _th("Median", "num"),
        _th("Stdev", "num"),
        _th("Scored", "num"),
        _th("Passed", "num"),
        _th("Failed", "num"),
        _th("Error", "num"),
        _th("Unscored", "num"),
    ]
    rows = [
        f"<tr><td>{e(g.name)}</td>{_td_num(g.mean)}{_td_num(g.median)}{_td_num(g.stdev)}"
        + "".join(
            _td_num(n, str(n)) for n in (len(g.scores), g.passed, g.failed, g.error, g.unscored)
        )
        + "</tr>"
        for g in view.graders.values()
    ]
    table = _table(header, rows, cls="sortable", attrs=' id="grader-table"')
    return f'<section id="graders"><h2>Graders</h2>{table}</section>'


def _series_cells(series: Series, ks: int) -> str:
    passes = series.pass_at_k + [None] * (ks - len(series.pass_at_k))
    return (
        _td_num(series.n, str(series.n))
        + _td_num(series.mean)
        + _td_num(series.median)
        + _td_num(series.stdev)
        + "".join(_td_num(p) for p in passes[:ks])
    )


def _repeat_section(view: BundleView) -> str:
    rep = view.repeats
    if rep is None:
        return ""
    ks = len(rep.pass_at_k)
    k_heads = [_th(f"pass@{k}", "num") for k in range(1, ks + 1)]
    suite_rows = [
        f"<tr><td><b>suite</b></td>{_td_num(rep.mean_stdev)}"
        + "".join(_td_num(p) for p in rep.pass_at_k)
        + _td_num(len(rep.unstable), str(len(rep.unstable)))
        + "</tr>"
    ]
    for name, g in rep.graders.items():
        padded = g.pass_at_k + [None] * (ks - len(g.pass_at_k))
        suite_rows.append(
            f"<tr><td>{e(name)}</td>{_td_num(g.mean_stdev)}"
            + "".join(_td_num(p) for p in padded[:ks])
            + _td_num(len(g.unstable), str(len(g.unstable)))
            + "</tr>"
        )
    suite = _table(
        [_th(""), _th("Mean stdev", "num"), *k_heads, _th("Unstable", "num")],
        suite_rows,
        cls="sortable",
    )
    case_rows = [
        f'<tr class="{"unstable" if c.unstable else ""}"><td>{e(c.case_id)}</td>'
        + _series_cells(c.overall, ks)
        + f"<td>{'unstable' if c.unstable else ''}</td></tr>"
        for c in rep.cases.values()
    ]
    cases = _table(
        [
            _th("Case", "text"),
            _th("Runs", "num"),
            _th("Mean", "num"),
            _th("Median", "num"),
            _th("Stdev", "num"),
            *k_heads,
            _th("Flag", "text"),
        ],
        case_rows,
        cls="sortable",
        attrs=' id="repeat-table"',
    )
    return (
        f'<section id="repeats"><h2>Repeat statistics ({rep.repeats} repeats)</h2>{suite}'
        f"<h3>Per case</h3><p>A case is <em>unstable</em> when the standard deviation of its "
        f"scores exceeds {rep.bound:g}.</p>{cases}</section>"
    )


# --- case drill-down -----------------------------------------------------------------------


def _list(title: str, items: list[str], cls: str) -> str:
    if not items:
        return ""
    lis = "".join(f"<li>{e(item)}</li>" for item in items)
    return f'<div class="{cls}"><h5>{e(title)}</h5><ul>{lis}</ul></div>'


def _checks(grader: GraderOutcome) -> str:
    if not grader.checks:
        return ""
    evidence = any(check.get("evidence") for check in grader.checks)
    rows = []
    for check in grader.checks:
        ok = bool(check.get("pass"))
        score = check.get("score")
        extra = f"<td>{e(check.get('evidence', ''))}</td>" if evidence else ""
        rows.append(
            f'<tr class="{"pass" if ok else "fail"}"><td>{e(check.get("text", ""))}</td>'
            f"<td>{'pass' if ok else 'fail'}</td>"
            f"<td class=num>{e(fmt.score(score if isinstance(score, (int, float)) else None))}"
            f"</td><td>{e(check.get('reason', ''))}</td>{extra}</tr>"
        )
    headers = [_th("Check"), _th("Result"), _th("Score"), _th("Reason")]
    if evidence:
        headers.append(_th("Evidence"))
    return "<h5>Checks</h5>" + _table(headers, rows, cls="checks")


def _grader_card(grader: GraderOutcome) -> str:
    facts = [
        f"score {fmt.score(grader.score)}",
        f"threshold {grader.threshold:g}",
        f"weight {grader.weight:g}",
        f"{grader.duration_ms / 1000:.2f} s",
    ]
    if grader.exit_code is not None:
        facts.append(f"exit {grader.exit_code}")
    if grader.proxy is not None:
        p = grader.proxy
        facts.append(
            f"judge {p.calls}/{p.max_calls} calls, {p.input_tokens}+{p.output_tokens} tokens"
        )
    body = [
        f'<div class="grader {e(grader.status)}"><h4>{e(grader.name)} {_badge(grader.status)}</h4>',
        f'<p class="facts">{e(" · ".join(facts))}</p>',
    ]
    if grader.reason:
        body.append(f'<p class="reason">{e(grader.reason)}</p>')
    body.append(_list("Hits", grader.hits, "hits"))
    body.append(_list("Misses", grader.misses, "misses"))
    body.append(_checks(grader))
    if grader.details is not None:
        details = fmt.pretty_json(grader.details)
        body.append(f"<details><summary>Details</summary>{_pre(details)}</details>")
    if grader.stderr_tail:
        body.append(f"<h5>stderr</h5>{_pre(grader.stderr_tail, 'stderr')}")
    body.append("</div>")
    return "".join(body)


def _judge_call(call: JudgeCall) -> str:
    head = [
        f"{call.grader or '?'} → {call.target or '?'}",
        call.status,
        "" if call.latency_ms is None else f"{call.latency_ms:.1f} ms",
        f"{call.input_tokens}+{call.output_tokens} tokens",
        "cached" if call.cached else "",
        "replayed" if call.replayed else "",
        call.error_code or "",
    ]
    parts = [f"<summary>{e(' · '.join(h for h in head if h))}</summary>"]
    for text, label in (
        (call.system_prompt, "System prompt"),
        (call.question, "Question"),
        (call.response, "Response"),
    ):
        if text:
            parts.append(f"<h5>{label}</h5>{_pre(text)}")
    if call.task:
        task = fmt.pretty_json(call.task)
        parts.append(f"<h5>Typed task</h5>{_pre(task)}")
    return f'<details class="call">{"".join(parts)}</details>'


def _usage(usage: Usage | None) -> str:
    if usage is None:
        return ""
    cached = f" ({usage.cached_tokens} cached)" if usage.cached_tokens else ""
    return f"{usage.input_tokens}+{usage.output_tokens} tokens{cached}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:g} ms"


def _tool_call(call: ToolCall) -> str:
    head = [call.name, "error" if call.is_error else "", _ms(call.duration_ms)]
    if call.result is None:
        head.append("no result")
    parts = [f"<summary>{e(' · '.join(h for h in head if h))}</summary>"]
    parts.append(f"<h5>Arguments</h5>{_pre(fmt.pretty_json(call.arguments))}")
    if call.result is not None:
        result = call.result if isinstance(call.result, str) else fmt.pretty_json(call.result)
        parts.append(f"<h5>Result</h5>{_pre(result, 'stderr' if call.is_error else '')}")
    return f'<details class="call tool-call">{"".join(parts)}</details>'


def _step(number: int, step: Step) -> str:
    facts = [f"{number}. {step.role}", _ms(step.duration_ms), _usage(step.usage)]
    if step.cost_usd is not None:
        facts.append(f"${step.cost_usd:.4f}")
    body = [f'<p class="facts">{e(" · ".join(f for f in facts if f))}</p>']
    if step.text is not None:
        body.append(_pre(step.text))
    body += [_tool_call(call) for call in step.tool_calls]
    return f'<li class="step">{"".join(body)}</li>'


def _transcript(data: dict[str, Any]) -> str:
    """What the agent did, step by step, folded until opened (docs/reports.md, "Transcripts");
    every text goes through ``e``, so a hostile tool result stays text."""
    try:
        transcript = Transcript.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        return f"<h4>Transcript</h4><p class=reason>{e(f'cannot read it: {exc!r}')}</p>"
    calls = len(transcript.tool_calls)
    head = [
        f"Transcript ({transcript.format})",
        f"{len(transcript.steps)} steps",
        f"{calls} tool call{'' if calls == 1 else 's'}",
        _usage(transcript.usage),
        "" if transcript.cost_usd is None else f"${transcript.cost_usd:.4f}",
        _ms(transcript.duration_ms),
    ]
    steps = "".join(_step(i, step) for i, step in enumerate(transcript.steps, 1))
    return (
        f'<details class="transcript"><summary>{e(" · ".join(h for h in head if h))}</summary>'
        f'<ol class="steps">{steps}</ol></details>'
    )


def _case_repeat(view: CaseView, case: CaseResult) -> str:
    rep = view.repeats
    entry = rep.cases.get(case.id) if rep else None
    if rep is None or entry is None:
        return ""
    ks = len(entry.overall.pass_at_k)
    header = [_th(""), _th("Runs"), _th("Mean"), _th("Median"), _th("Stdev")]
    header += [_th(f"pass@{k}") for k in range(1, ks + 1)]
    rows = [f"<tr><td><b>case</b></td>{_series_cells(entry.overall, ks)}</tr>"]
    rows += [
        f"<tr><td>{e(name)}</td>{_series_cells(s, ks)}</tr>" for name, s in entry.graders.items()
    ]
    flag = " (unstable)" if entry.unstable else ""
    return f"<h4>Across repeats{flag}</h4>" + _table(header, rows, cls="repeat")


def _case_detail(view: CaseView, case: CaseResult) -> str:
    parts = []
    if case.error:
        parts.append(f'<div class="error-box"><h4>Error</h4>{_pre(case.error)}</div>')
    parts += [_grader_card(g) for g in case.graders]
    parts.append(_case_repeat(view, case))
    if case.output is not None:
        parts.append(f"<h4>Output</h4>{_pre(case.output, 'output')}")
    if case.transcript is not None:
        parts.append(_transcript(case.transcript))
    timings = case.timings.to_dict()
    if timings or case.target:
        facts = [f"target {case.target}"] if case.target else []
        facts += [f"{k} {v}" for k, v in timings.items()]
        parts.append(f'<p class="facts">{e(" · ".join(facts))}</p>')
    calls = view.calls_for(case)
    if calls:
        parts.append(f"<h4>Judge calls ({len(calls)})</h4>" + "".join(map(_judge_call, calls)))
    return "".join(parts)


def _search_text(case: CaseResult) -> str:
    pieces = [str(case.id), case.status, *case_problems(case)]
    for g in case.graders:
        pieces += [g.name, g.reason or "", *g.hits, *g.misses]
        pieces += [str(check.get("text", "")) for check in g.checks]
    if case.output is not None:
        pieces.append(str(case.output)[:SEARCH_LIMIT])
    return " ".join(pieces).lower()


def draft(view: CaseView, case: CaseResult) -> tuple[str]:
    """A case as a ``<tbody>``: its row, and its details in a hidden row below; all but the
    start of the tag, which holds the case's place in the page (only the writer knows it)."""
    repeats = view.repeats is not None
    columns = 7 if repeats else 6
    chips = "".join(
        f'<span class="chip {e(g.status)}" title="{e(g.reason or g.status)}">'
        f"{_breakable(g.name)} {e(fmt.score(g.score, 2))}</span>"
        for g in case.graders
    )
    duration = case_duration_s(case)
    row = (
        f'<tr class="case-row" tabindex="0" aria-expanded="false">'
        f'<td class="id">{_breakable(cell_label(case, 2 if view.matrix else 1))}</td>'
        f"{_td_num(case.repeat, str(case.repeat)) if repeats else ''}"
        f'<td data-v="{PROBLEMS_FIRST.get(case.status, 0)}">{_badge(case.status)}</td>'
        f"{_td_num(case.score)}"
        f'<td class="why">{e(case_reason(case))}</td>'
        f'<td class="graders">{chips}</td>'
        f"{_td_num(duration, '–' if duration is None else f'{duration:.2f}', 'time')}</tr>"
    )
    detail = (
        f'<tr class="detail" hidden><td colspan="{columns}">{_case_detail(view, case)}</td></tr>'
    )
    return (
        f'" data-id="{e(case.id)}" data-repeat="{case.repeat}" data-status="{e(case.status)}" '
        f'data-search="{e(_search_text(case))}">{row}{detail}</tbody>',
    )


def _json_text(value: object) -> str:
    """A JSON string that is safe inside a ``<script>`` data block: only "<" could end it
    early; ">" and "&" are escaped too, for good measure."""
    text = encode_basestring(str(value))
    if "<" in text or ">" in text or "&" in text:
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return text


#: Grader names and statuses repeat on every row: encoded once each.
_json_name = functools.lru_cache(maxsize=4096)(_json_text)


def _json_number(value: float | None) -> str:
    if value is None:
        return "null"
    number = float(value)
    return repr(number) if number - number == 0.0 else "null"  # NaN and infinities: null


def _compact_row(case: CaseResult, label: str) -> str:
    """A passed case of a large run as compact JSON data: [id, repeat, score, seconds, line,
    [[grader, status, score], ...]]; the page's script makes a row of it (as text). Written
    by hand: ``json.dumps`` per row would cost more than the rest of the row."""
    duration = case_duration_s(case)
    graders = ",".join(
        f"[{_json_name(g.name)},{_json_name(g.status)},{_json_number(g.score)}]"
        for g in case.graders
    )
    line = "null" if case.line is None else str(int(case.line))
    seconds = "null" if duration is None else _json_number(round(duration, 3))
    return (
        f"[{_json_text(label)},{int(case.repeat)},{_json_number(case.score)},{seconds},"
        f"{line},[{graders}]]"
    )


def _case_section_head(view: BundleView) -> str:
    options = '<option value="">all statuses</option>' + "".join(
        f'<option value="{s}">{s} ({view.stats.counts.of(s)})</option>' for s in STATUSES
    )
    header = "".join(
        [
            _th("Case", "text", "id"),
            _th("Repeat", "num", "rep") if view.repeats else "",
            _th("Status", "num", "status"),
            _th("Score", "num", "score"),
            _th("Reason", "text", "why"),
            _th("Graders", cls="graders"),
            _th("Time (s)", "num", "time"),
        ]
    )
    return (
        '<section id="cases"><h2>Cases</h2><div class="controls">'
        f'<label>Status <select id="status-filter">{options}</select></label>'
        '<label>Filter <input id="text-filter" type="search" '
        'placeholder="id, reason, output…" autocomplete="off"></label>'
        '<button type="button" id="expand-all">expand all</button>'
        '<button type="button" id="collapse-all">collapse all</button>'
        '<span id="shown-count" aria-live="polite"></span></div>'
        '<div class="scroll"><table id="case-table" class="sortable grouped">'
        f"<thead><tr>{header}</tr></thead>"
    )


#: Closes the cases table; the compact rows (if any) follow it in a JSON data block.
_TABLE_END = "</table></div>"


def _case_section_tail(view: BundleView) -> str:
    more = ""
    if view.compact:
        more = (
            '<p id="more-cases" hidden><span id="more-count"></span> '
            f'<button type="button" id="show-more" data-page="{PAGE}">show {PAGE} more</button> '
            '<button type="button" id="show-all">show all</button></p>'
            f'<p class="note">Passed cases of a run of more than {DETAIL_LIMIT} results are shown '
            "without details; every result is in results.jsonl.</p>"
        )
    return more + '<p id="no-match" hidden>No case matches the filter.</p></section>'


class Writer:
    """The page, written one case at a time: the summary, then the cases table (problems
    first), then the chart, the grader tables and the run's metadata.

    In a large run (``view.compact``) passed cases are not rows of the page as written but
    compact data in a JSON block after the table, which the script turns into rows a page at
    a time, so the file stays small and the browser fast (docs/reports.md).
    """

    reads_passed = True

    def __init__(self, view: BundleView, out: TextIO) -> None:
        self.view, self.out = view, out
        self.index = 0
        self.in_data = False

    def head(self) -> None:
        view = self.view
        self.out.write(
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>evalrun: {e(view.title)}</title>"
            f"<script>{_ERROR_HOOK}</script><style>{_CSS}</style></head>"
            '<body data-ready="0">'
            + _header(view)
            + _cards(view)
            + _matrix_section(view)
            + _case_section_head(view)
        )

    def case(self, case: CaseResult) -> None:
        if self.view.compact and case.status == "passed":
            if not self.in_data:
                self.in_data = True
                self.out.write(_TABLE_END + '<script type="application/json" id="compact-cases">[')
            else:
                self.out.write(",\n")
            self.out.write(_compact_row(case, cell_label(case, 2 if self.view.matrix else 1)))
            self.index += 1
        else:
            self.place(draft(self.view, case))

    def place(self, pieces: tuple[str]) -> None:
        """A case's :func:`draft`, at the next place in the table."""
        self.out.write(f'<tbody class="case" id="case-{self.index}{pieces[0]}')
        self.index += 1

    def tail(self) -> None:
        view = self.view
        self.out.write(
            ("]</script>" if self.in_data else _TABLE_END)
            + _case_section_tail(view)
            + _histogram(view)
            + _grader_section(view)
            + _repeat_section(view)
            + _run_section(view)
            + '<pre id="js-errors" hidden></pre>'
            + f"<script>{_SCRIPT}</script></body></html>\n"
        )


_ERROR_HOOK = """
window.evalrunErrors = [];
window.evalrunRecord = function (msg) {
  window.evalrunErrors.push(String(msg));
  var el = document.getElementById("js-errors");
  if (el) { el.hidden = false; el.textContent = window.evalrunErrors.join("\\n"); }
};
window.addEventListener("error", function (ev) { window.evalrunRecord(ev.message || "error"); });
window.addEventListener("unhandledrejection", function (ev) {
  window.evalrunRecord("unhandled rejection: " + ev.reason);
});
"""

_SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("case-table");
  var statusSel = document.getElementById("status-filter");
  var textIn = document.getElementById("text-filter");
  var shown = document.getElementById("shown-count");
  var noMatch = document.getElementById("no-match");

  function cellValue(item, index, type) {
    var row = item.tagName === "TBODY" ? item.rows[0] : item;
    var cell = row.cells[index];
    if (!cell) return null;
    var raw = cell.hasAttribute("data-v") ? cell.getAttribute("data-v") : cell.textContent.trim();
    if (type === "num") {
      var n = parseFloat(raw);
      return isNaN(n) ? null : n;
    }
    return raw === "" ? null : raw.toLowerCase();
  }

  function compare(a, b) {
    if (typeof a === "number") return a - b;
    return a.localeCompare(b, undefined, {numeric: true});
  }

  function sortBy(th, keep) {
    var tbl = th.closest("table");
    var index = Array.prototype.indexOf.call(th.parentNode.cells, th);
    var type = th.getAttribute("data-type");
    var now = th.getAttribute("aria-sort");
    var dir = keep ? now : (now === "ascending" ? "descending" : "ascending");
    tbl.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var grouped = tbl.classList.contains("grouped");
    var parent = grouped ? tbl : tbl.tBodies[0];
    var items = Array.prototype.slice.call(grouped ? tbl.tBodies : tbl.tBodies[0].rows);
    var sign = dir === "ascending" ? 1 : -1;
    var keyed = items.map(function (item, i) {
      return {item: item, i: i, v: cellValue(item, index, type)};
    });
    keyed.sort(function (a, b) {
      if (a.v === null || b.v === null) {
        if (a.v === b.v) return a.i - b.i;
        return a.v === null ? 1 : -1;
      }
      return sign * compare(a.v, b.v) || a.i - b.i;
    });
    keyed.forEach(function (k) { parent.appendChild(k.item); });
  }

  function applyFilter() {
    var status = statusSel.value;
    var terms = textIn.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var count = 0;
    Array.prototype.forEach.call(table.tBodies, function (tb) {
      var hay = tb.getAttribute("data-search");
      var ok = (!status || tb.getAttribute("data-status") === status) &&
        terms.every(function (t) { return hay.indexOf(t) !== -1; });
      if (tb.hidden === ok) tb.hidden = !ok;
      if (ok) count += 1;
    });
    var notLoaded = pending.length - loaded;
    shown.textContent = count + " of " + (table.tBodies.length + notLoaded) + " shown";
    noMatch.hidden = count !== 0;
    if (moreBox) {
      moreBox.hidden = notLoaded === 0;
      moreCount.textContent = notLoaded + " passed case(s) not loaded yet (filters and sorting " +
        "apply to the loaded ones)";
    }
  }

  // Passed cases of a large run come as compact data; rows are made from it as text.
  var dataBlock = document.getElementById("compact-cases");
  var pending = dataBlock ? JSON.parse(dataBlock.textContent) : [];
  var loaded = 0;
  var moreBox = document.getElementById("more-cases");
  var moreCount = document.getElementById("more-count");
  var hasRepeat = table.querySelector("thead th.rep") !== null;

  function td(row, cls, text, value) {
    var cell = document.createElement("td");
    if (cls) cell.className = cls;
    if (value !== undefined) cell.setAttribute("data-v", value);
    cell.textContent = text;
    row.appendChild(cell);
    return cell;
  }

  function number(value, digits) { return value === null ? "\u2013" : value.toFixed(digits); }

  function compactCase(item) {
    var id = item[0], repeat = item[1], score = item[2], secs = item[3], line = item[4];
    var graders = item[5];
    var tb = document.createElement("tbody");
    tb.className = "case";
    tb.setAttribute("data-id", id);
    tb.setAttribute("data-repeat", String(repeat));
    tb.setAttribute("data-status", "passed");
    tb.setAttribute("data-search",
      [id, "passed"].concat(graders.map(function (g) { return g[0]; })).join(" ").toLowerCase());
    var row = document.createElement("tr");
    row.className = "case-row";
    row.tabIndex = 0;
    row.setAttribute("aria-expanded", "false");
    var idCell = td(row, "id", "");
    id.split(/(?<=[-_./:])(?=[^-_./:])/).forEach(function (part, i) {
      if (i) idCell.appendChild(document.createElement("wbr"));
      idCell.appendChild(document.createTextNode(part));
    });
    if (hasRepeat) td(row, "num", String(repeat), String(repeat));
    var badge = document.createElement("span");
    badge.className = "badge passed";
    badge.textContent = "passed";
    td(row, "", "", "3").appendChild(badge);
    td(row, "num", number(score, 3), score === null ? "" : String(score));
    td(row, "why", "");
    var chips = td(row, "graders", "");
    graders.forEach(function (g) {
      var chip = document.createElement("span");
      chip.className = "chip " + g[1];
      chip.textContent = g[0] + " " + number(g[2], 2);
      chips.appendChild(chip);
    });
    td(row, "num time", number(secs, 2), secs === null ? "" : String(secs));
    var detail = document.createElement("tr");
    detail.className = "detail";
    detail.hidden = true;
    var cell = td(detail, "", "Passed" + (line ? " (line " + line + " of the tests file)" : "") +
      ". Details of this case are in results.jsonl.");
    cell.colSpan = hasRepeat ? 7 : 6;
    tb.appendChild(row);
    tb.appendChild(detail);
    return tb;
  }

  function loadMore(n) {
    var end = Math.min(pending.length, loaded + n);
    var rows = document.createDocumentFragment();
    for (; loaded < end; loaded++) rows.appendChild(compactCase(pending[loaded]));
    table.appendChild(rows);
    var sorted = table.querySelector("thead th[aria-sort]");
    if (sorted) sortBy(sorted, true);
    applyFilter();
  }

  function toggle(row, open) {
    var detail = row.nextElementSibling;
    var want = open === undefined ? detail.hidden : open;
    detail.hidden = !want;
    row.setAttribute("aria-expanded", String(want));
  }

  document.querySelectorAll("table.sortable thead th[data-type]").forEach(function (th) {
    th.tabIndex = 0;
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); sortBy(th); }
    });
  });
  table.addEventListener("click", function (ev) {
    var row = ev.target.closest("tr.case-row");
    if (row) toggle(row);
  });
  table.addEventListener("keydown", function (ev) {
    if ((ev.key === "Enter" || ev.key === " ") && ev.target.matches("tr.case-row")) {
      ev.preventDefault();
      toggle(ev.target);
    }
  });
  document.getElementById("expand-all").addEventListener("click", function () {
    table.querySelectorAll("tbody:not([hidden]) tr.case-row").forEach(function (r) {
      toggle(r, true);
    });
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    table.querySelectorAll("tr.case-row").forEach(function (r) { toggle(r, false); });
  });
  document.querySelectorAll("[data-filter-status]").forEach(function (card) {
    card.addEventListener("click", function () {
      var status = card.getAttribute("data-filter-status");
      statusSel.value = statusSel.value === status ? "" : status;
      applyFilter();
    });
  });
  statusSel.addEventListener("change", applyFilter);
  textIn.addEventListener("input", applyFilter);
  if (moreBox) {
    var page = parseInt(document.getElementById("show-more").getAttribute("data-page"), 10);
    document.getElementById("show-more").addEventListener("click", function () { loadMore(page); });
    document.getElementById("show-all").addEventListener("click", function () {
      loadMore(pending.length);
    });
    loadMore(page);
  }
  applyFilter();
  var errBox = document.getElementById("js-errors");
  if (window.evalrunErrors.length) {
    errBox.hidden = false;
    errBox.textContent = window.evalrunErrors.join("\\n");
  }
  document.body.setAttribute("data-ready", "1");
})();
"""

_CSS = """
:root { --fg: #1d2127; --muted: #5f6670; --line: #d9dde3; --bg: #fff; --panel: #f5f7f9;
  --passed: #2e9d5b; --failed: #d2453f; --error: #e39a23; --unscored: #8a8f98; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e4e7eb; --muted: #9aa3ad; --line: #39404a; --bg: #16191d; --panel: #1f242a; }
}
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; padding: 1.5rem; max-width: 1200px; }
h1 { margin: 0 0 .25rem; font-size: 1.6rem; word-break: break-word; }
h2 { margin: 2rem 0 .6rem; font-size: 1.2rem; }
h4 { margin: .6rem 0 .3rem; } h5 { margin: .5rem 0 .2rem; font-size: .85rem; color: var(--muted); }
.desc { color: var(--muted); margin: 0 0 .5rem; }
.verdict { font-weight: 600; font-size: 1.1rem; margin: .2rem 0 0; padding-left: .6rem;
  border-left: 5px solid var(--unscored); }
.verdict.passed { border-left-color: var(--passed); } .verdict.failed { border-left-color: var(--failed); }
.verdict.error { border-left-color: var(--error); }
.scroll { max-width: 100%; overflow-x: auto; }
.matrix td.cell { white-space: nowrap; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; word-break: break-word; }
.cards { display: flex; flex-wrap: wrap; gap: .6rem; margin-top: 1.2rem; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: .5rem .9rem; min-width: 6.5rem; text-align: left; color: inherit; font: inherit; }
.card b { display: block; font-size: 1.35rem; } .card span { color: var(--muted); }
.card small { display: block; color: var(--muted); font-size: .8rem; }
button.card { cursor: pointer; border-left: 5px solid var(--unscored); }
button.card.passed { border-left-color: var(--passed); }
button.card.failed { border-left-color: var(--failed); }
button.card.error { border-left-color: var(--error); }
#score-chart { width: 100%; max-width: 640px; height: auto; display: block; }
#score-chart .axis { stroke: var(--muted); } #score-chart .tick { fill: var(--muted); font-size: 11px; }
#score-chart .mean { stroke: var(--fg); stroke-dasharray: 4 3; }
.legend span { margin-right: 1rem; color: var(--muted); }
.legend i { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem;
  border-radius: 2px; vertical-align: -1px; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .35rem .5rem; text-align: left;
  vertical-align: top; }
td.num, th[data-type="num"] { text-align: right; font-variant-numeric: tabular-nums; }
th[data-type] { cursor: pointer; user-select: none; white-space: nowrap; }
th[data-type]::after { content: " ↕"; color: var(--muted); font-size: .8em; }
th[aria-sort="ascending"]::after { content: " ▲"; color: var(--fg); }
th[aria-sort="descending"]::after { content: " ▼"; color: var(--fg); }
.controls { display: flex; flex-wrap: wrap; gap: .8rem; align-items: center; margin-bottom: .4rem; }
.controls input, .controls select, .controls button { font: inherit; padding: .2rem .4rem; }
#shown-count { color: var(--muted); }
tr.case-row { cursor: pointer; } tr.case-row:hover, tr.case-row:focus { background: var(--panel); }
tr.case-row td.id { font-weight: 600; overflow-wrap: normal; word-break: normal; min-width: 6rem; }
td.why { overflow-wrap: anywhere; min-width: 10rem; }
tr.detail > td { background: var(--panel); padding: .6rem 1rem 1rem; }
.badge, .chip { display: inline-block; border-radius: 10px; padding: 0 .5rem; font-size: .8rem;
  color: #fff; background: var(--unscored); margin: 0 .25rem .15rem 0; white-space: nowrap; }
.badge.passed, .chip.passed { background: var(--passed); }
.badge.failed, .chip.failed { background: var(--failed); }
.badge.error, .chip.error { background: var(--error); }
.grader { border-left: 4px solid var(--unscored); padding: .1rem 0 .3rem .8rem; margin: .6rem 0; }
.grader.passed { border-left-color: var(--passed); } .grader.failed { border-left-color: var(--failed); }
.grader.error { border-left-color: var(--error); }
.facts { color: var(--muted); margin: .1rem 0; } .reason { white-space: pre-wrap; margin: .3rem 0; }
.hits li::marker { content: "✔ "; color: var(--passed); }
.misses li::marker { content: "✘ "; color: var(--failed); }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: .5rem;
  white-space: pre-wrap; word-break: break-word; max-height: 24rem; overflow: auto; margin: .2rem 0; }
.error-box pre, pre.stderr { border-color: var(--error); }
details.call { border: 1px solid var(--line); border-radius: 6px; padding: .3rem .6rem; margin: .3rem 0; }
details summary { cursor: pointer; }
details.transcript { margin: .4rem 0; } details.transcript > summary { font-weight: 600; }
ol.steps { padding-left: 1.2rem; } ol.steps > li { list-style: none; margin: .4rem 0; }
tr.unstable td { color: var(--failed); }
#js-errors { border-color: var(--failed); color: var(--failed); }
@media (max-width: 640px) {
  body { padding: .6rem; }
  #case-table .graders, #case-table .time { display: none; }
  /* Fixed shares of the width: a long id wraps between its words, and only a single word
     wider than its column is broken. */
  #case-table { table-layout: fixed; }
  #case-table th.id { width: 32%; } #case-table th.rep { width: 11%; }
  #case-table th.status { width: 21%; } #case-table th.score { width: 15%; }
  #case-table th.why { width: 32%; }
  #case-table td.id { overflow-wrap: break-word; min-width: 0; }
  #case-table td.why { min-width: 0; }
  #case-table th[data-type]::after { content: ""; }
  #case-table th[aria-sort="ascending"]::after { content: " ▲"; }
  #case-table th[aria-sort="descending"]::after { content: " ▼"; }
  th, td { padding: .3rem .3rem; }
  tr.detail > td { padding: .4rem .5rem .6rem; }
  .card { min-width: 5rem; padding: .4rem .6rem; }
  .controls label, .controls input { max-width: 100%; }
}
"""
