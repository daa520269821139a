"""report.html: one self-contained page (inline CSS, JS and SVG; nothing fetched).

Everything is rendered here with ``html.escape``; the script only sorts, filters and opens
rows, and never turns data into markup. It records its own errors into ``#js-errors``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from evalrun.reporters import fmt
from evalrun.reporters.bundle_view import BundleView, case_duration_s, case_problems
from evalrun.results.models import STATUSES, CaseResult, GraderResult
from evalrun.results.summary import Series

TEXT_LIMIT = 20_000
SEARCH_LIMIT = 4_000
BINS = 10
COLORS = {"passed": "#2e9d5b", "failed": "#d2453f", "error": "#e39a23", "unscored": "#8a8f98"}


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: float | None) -> str:
    """A sort key for a ``data-v`` attribute; empty sorts last."""
    return "" if value is None else repr(float(value))


def _badge(status: str) -> str:
    return f'<span class="badge {e(status)}">{e(status)}</span>'


def _pre(value: Any, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<pre{attr}>{e(fmt.clip(str(value), TEXT_LIMIT))}</pre>"


def _table(header: Iterable[str], rows: Iterable[str], *, cls: str = "", attrs: str = "") -> str:
    head = "".join(header)
    return (
        f'<table class="{cls}"{attrs}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _th(label: str, kind: str | None = None) -> str:
    """A header cell; ``kind`` ("num" or "text") makes the column sortable."""
    return f'<th data-type="{kind}">{e(label)}</th>' if kind else f"<th>{e(label)}</th>"


def _td_num(value: float | None, text: str | None = None) -> str:
    shown = fmt.score(value) if text is None else text
    return f'<td class="num" data-v="{_num(value)}">{e(shown)}</td>'


# --- page sections -------------------------------------------------------------------------


def _header(view: BundleView) -> str:
    s = view.summary
    state = "complete" if s.get("complete") else "incomplete"
    if s.get("interrupted"):
        state += " (interrupted)"
    items = [
        ("Target", s.get("target")),
        ("Judge", s.get("judge")),
        ("Started", s.get("started_at")),
        ("Finished", s.get("finished_at")),
        ("Duration", fmt.seconds(s.get("duration_s"))),
        ("Run", state if s.get("complete") is not None else None),
        ("Threshold", s.get("threshold")),
        ("Exit code", s.get("exit_code")),
        ("Repeats", s.get("repeat") if (s.get("repeat") or 1) > 1 else None),
        ("Bundle", view.run_dir.resolve().name),
    ]
    meta = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in items if v is not None)
    desc = f'<p class="desc">{e(s["description"])}</p>' if s.get("description") else ""
    return f'<header><h1>{e(view.title)}</h1>{desc}<dl class="meta">{meta}</dl></header>'


def _cards(view: BundleView) -> str:
    counts = view.stats.counts
    cards = [f'<div class="card"><b>{counts["total"]}</b><span>results</span></div>']
    for status in STATUSES:
        cards.append(
            f'<button type="button" class="card {status}" data-filter-status="{status}">'
            f"<b>{counts.get(status, 0)}</b><span>{status}</span></button>"
        )
    cards.append(
        f'<div class="card"><b>{fmt.score(view.stats.mean_score)}</b><span>mean score</span></div>'
    )
    cards.append(
        f'<div class="card"><b>{fmt.percent(view.stats.pass_rate)}</b><span>pass rate</span></div>'
    )
    calls = view.judge_stats["count"]
    cards.append(f'<div class="card"><b>{calls}</b><span>judge calls</span></div>')
    return f'<section id="summary" class="cards">{"".join(cards)}</section>'


def _histogram(view: BundleView) -> str:
    """Stacked bars of case scores in tenths, coloured by status, with the mean marked."""
    bins = [dict.fromkeys(STATUSES, 0) for _ in range(BINS)]
    unscored = 0
    for case in view.stats.results:
        if case.score is None:
            unscored += 1
            continue
        index = min(BINS - 1, max(0, int(float(case.score) * BINS)))
        bins[index][case.status if case.status in COLORS else "error"] += 1
    width, height, left, right, top, bottom = 640, 240, 40, 12, 16, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max([sum(b.values()) for b in bins] + [1])
    bar_w = plot_w / BINS
    parts = [
        f'<svg id="score-chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Score distribution" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" class="axis"/>',
    ]
    for tick in sorted({0, peak // 2, peak}):
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
            f'<text x="{x + 4:.1f}" y="{top + 6}" class="tick">mean {mean:.3f}</text>'
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


def _checks(grader: GraderResult) -> str:
    if not grader.checks:
        return ""
    rows = []
    for check in grader.checks:
        ok = bool(check.get("pass"))
        score = check.get("score")
        rows.append(
            f'<tr class="{"pass" if ok else "fail"}"><td>{e(check.get("text", ""))}</td>'
            f"<td>{'pass' if ok else 'fail'}</td>"
            f"<td class=num>{e(fmt.score(score if isinstance(score, (int, float)) else None))}"
            f"</td><td>{e(check.get('reason', ''))}</td></tr>"
        )
    return "<h5>Checks</h5>" + _table(
        [_th("Check"), _th("Result"), _th("Score"), _th("Reason")], rows, cls="checks"
    )


def _grader_card(grader: GraderResult) -> str:
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
        details = json.dumps(grader.details, indent=2, ensure_ascii=False, default=str)
        body.append(f"<details><summary>Details</summary>{_pre(details)}</details>")
    if grader.stderr_tail:
        body.append(f"<h5>stderr</h5>{_pre(grader.stderr_tail, 'stderr')}")
    body.append("</div>")
    return "".join(body)


def _judge_call(call: dict[str, Any]) -> str:
    latency = call.get("latency_ms")
    head = [
        f"{call.get('grader') or '?'} → {call.get('target') or '?'}",
        str(call.get("status") or ""),
        f"{float(latency):.1f} ms" if isinstance(latency, (int, float)) else "",
        f"{call.get('input_tokens') or 0}+{call.get('output_tokens') or 0} tokens",
        "cached" if call.get("cached") else "",
        "replayed" if call.get("replayed") else "",
        str(call.get("error_code") or ""),
    ]
    parts = [f"<summary>{e(' · '.join(h for h in head if h))}</summary>"]
    for key, label in (
        ("system_prompt", "System prompt"),
        ("question", "Question"),
        ("response", "Response"),
        ("error", "Error"),
    ):
        if call.get(key):
            parts.append(f"<h5>{label}</h5>{_pre(call[key])}")
    if call.get("task"):
        task = json.dumps(call["task"], indent=2, ensure_ascii=False, default=str)
        parts.append(f"<h5>Typed task</h5>{_pre(task)}")
    return f'<details class="call">{"".join(parts)}</details>'


def _case_repeat(view: BundleView, case: CaseResult) -> str:
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


def _case_detail(view: BundleView, case: CaseResult) -> str:
    parts = []
    if case.error:
        parts.append(f'<div class="error-box"><h4>Error</h4>{_pre(case.error)}</div>')
    parts += [_grader_card(g) for g in case.graders]
    parts.append(_case_repeat(view, case))
    if case.output is not None:
        parts.append(f"<h4>Output</h4>{_pre(case.output, 'output')}")
    timings = {k: v for k, v in (case.timings or {}).items() if v is not None}
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


def _case_rows(view: BundleView) -> Iterator[str]:
    repeats = view.repeats is not None
    columns = 6 if repeats else 5
    for index, case in enumerate(view.cases):
        chips = "".join(
            f'<span class="chip {e(g.status)}" title="{e(g.reason or g.status)}">'
            f"{e(g.name)} {e(fmt.score(g.score, 2))}</span>"
            for g in case.graders
        )
        duration = case_duration_s(case)
        row = (
            f'<tr class="case-row" tabindex="0" aria-expanded="false">'
            f'<td class="id">{e(case.id)}</td>'
            f"{_td_num(case.repeat, str(case.repeat)) if repeats else ''}"
            f'<td data-v="{STATUSES.index(case.status) if case.status in STATUSES else 9}">'
            f"{_badge(case.status)}</td>"
            f"{_td_num(case.score)}"
            f"<td>{chips}</td>"
            f"{_td_num(duration, '–' if duration is None else f'{duration:.2f}')}</tr>"
        )
        detail = f'<tr class="detail" hidden><td colspan="{columns}">{_case_detail(view, case)}</td></tr>'
        yield (
            f'<tbody class="case" id="case-{index}" data-id="{e(case.id)}" '
            f'data-repeat="{case.repeat}" data-status="{e(case.status)}" '
            f'data-search="{e(_search_text(case))}">{row}{detail}</tbody>'
        )


def _case_section(view: BundleView) -> tuple[str, str]:
    """The case section around its rows: (before, after)."""
    options = '<option value="">all statuses</option>' + "".join(
        f'<option value="{s}">{s} ({view.stats.counts.get(s, 0)})</option>' for s in STATUSES
    )
    header = "".join(
        [
            _th("Case", "text"),
            _th("Repeat", "num") if view.repeats else "",
            _th("Status", "num"),
            _th("Score", "num"),
            _th("Graders"),
            _th("Time (s)", "num"),
        ]
    )
    before = (
        '<section id="cases"><h2>Cases</h2><div class="controls">'
        f'<label>Status <select id="status-filter">{options}</select></label>'
        '<label>Filter <input id="text-filter" type="search" '
        'placeholder="id, reason, output…" autocomplete="off"></label>'
        '<button type="button" id="expand-all">expand all</button>'
        '<button type="button" id="collapse-all">collapse all</button>'
        '<span id="shown-count" aria-live="polite"></span></div>'
        '<table id="case-table" class="sortable grouped">'
        f"<thead><tr>{header}</tr></thead>"
    )
    return before, '</table><p id="no-match" hidden>No case matches the filter.</p></section>'


def write(view: BundleView, out: TextIO) -> None:
    """The page, written one case at a time."""
    cases_before, cases_after = _case_section(view)
    out.write(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>evalrun: {e(view.title)}</title>"
        f"<script>{_ERROR_HOOK}</script><style>{_CSS}</style></head>"
        '<body data-ready="0">'
        + _header(view)
        + _cards(view)
        + _histogram(view)
        + _grader_section(view)
        + _repeat_section(view)
        + cases_before
    )
    out.writelines(_case_rows(view))
    out.write(
        cases_after
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

  function sortBy(th) {
    var tbl = th.closest("table");
    var index = Array.prototype.indexOf.call(th.parentNode.cells, th);
    var type = th.getAttribute("data-type");
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
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
    shown.textContent = count + " of " + table.tBodies.length + " shown";
    noMatch.hidden = count !== 0;
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
.desc { color: var(--muted); margin: 0 0 .8rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; word-break: break-word; }
.cards { display: flex; flex-wrap: wrap; gap: .6rem; margin-top: 1.2rem; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 8px;
  padding: .5rem .9rem; min-width: 6.5rem; text-align: left; color: inherit; font: inherit; }
.card b { display: block; font-size: 1.35rem; } .card span { color: var(--muted); }
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
tr.case-row td.id { font-weight: 600; word-break: break-all; }
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
tr.unstable td { color: var(--failed); }
#js-errors { border-color: var(--failed); color: var(--failed); }
"""
