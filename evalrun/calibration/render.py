"""``evalrun calibrate``'s report as Markdown (also printed) and as a self-contained HTML page."""

from __future__ import annotations

import html
from collections.abc import Sequence

from evalrun.calibration.compare import Calibration


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _cost(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def markdown(cal: Calibration, title: str) -> str:
    lines = [f"# Judge calibration: {title}", ""]
    lines += [
        "| judge | grader | items | kind | agreement | coefficient | cost / call | latency / call |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in cal.rows:
        a = r.agreement
        lines.append(
            f"| {r.judge} | {r.grader} | {a.n} | {r.kind} | {a.agreement:.3f} | "
            f"{a.coefficient_name} {_num(a.coefficient)} | {_cost(r.cost_per_call)} | "
            f"{_num(r.latency_ms_per_call, 1)} ms |"
        )
    lines.append("")
    for judge, score in cal.scores.items():
        missing = cal.unmatched.get(judge, 0)
        note = f"; {missing} labelled items it gave no verdict for" if missing else ""
        lines.append(f"- **{judge}**: mean coefficient {_num(score)}{note}")
    if cal.recommended:
        lines.append(
            f"\n**Recommended judge: {cal.recommended}**, the cheapest per case within "
            f"{cal.tolerance:.2f} of the best mean coefficient."
        )
    else:
        lines.append("\nNo judge could be scored: no labelled item got a verdict.")
    lines += side_by_side(cal)
    for r in cal.rows:
        labels = sorted(
            {*r.agreement.confusion, *(k for v in r.agreement.confusion.values() for k in v)}
        )
        lines += [
            "",
            f"### Confusion: {r.judge} / {r.grader} / {r.kind} (rows: people, columns: judge)",
            "",
        ]
        lines.append("| | " + " | ".join(labels) + " |")
        lines.append("|---" * (len(labels) + 1) + "|")
        for human in labels:
            row = r.agreement.confusion.get(human, {})
            lines.append(
                f"| **{human}** | " + " | ".join(str(row.get(j, 0)) for j in labels) + " |"
            )
    for judge, pairs in cal.disagreements.items():
        if not pairs:
            continue
        lines += ["", f"### Where {judge} and people disagree most", ""]
        lines += ["| case | grader | item | people | judge |", "|---|---|---|---|---|"]
        for p in pairs:
            item = f"{p.kind} {p.item}".strip().replace("|", "\\|")
            lines.append(f"| {p.case_id} | {p.grader} | {item} | {p.human} | {p.judge} |")
    return "\n".join(lines) + "\n"


def mode_table(cal: Calibration) -> tuple[list[str], list[list[str]]]:
    """With ``--mode``: one row per judge, grader and kind, one column per judge mode (its
    coefficient, agreement and items), then each judge's calls per case; empty without modes."""
    modes = list(dict.fromkeys(mode for _, mode in cal.modes.values()))
    if not modes:
        return [], []
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in cal.rows:
        judge, mode = cal.modes[r.judge]
        a = r.agreement
        cells.setdefault((judge, r.grader, r.kind), {})[mode] = (
            f"{a.coefficient_name} {_num(a.coefficient)} ({a.agreement:.3f} of {a.n})"
        )
    rows = [[*key, *(row.get(m, "n/a") for m in modes)] for key, row in cells.items()]
    calls: dict[str, dict[str, str]] = {}
    for label, (judge, mode) in cal.modes.items():
        calls.setdefault(judge, {})[mode] = _num(cal.calls_per_case.get(label), 2)
    rows += [[judge, "judge calls / case", "", *(c.get(m, "n/a") for m in modes)]
             for judge, c in calls.items()]  # fmt: skip
    return ["judge", "grader", "kind", *modes], rows


def side_by_side(cal: Calibration) -> list[str]:
    head, rows = mode_table(cal)
    if not head:
        return []
    lines = ["", "### Judge modes side by side", ""]
    lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _table(head: list[str], rows: Sequence[Sequence[object]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{cells}</tr>{body}</table>"


def page(cal: Calibration, title: str) -> str:
    """The same report as one self-contained HTML page (no script, no network)."""
    parts = [f"<h1>Judge calibration: {html.escape(title)}</h1>"]
    parts.append(
        _table(
            [
                "judge",
                "grader",
                "items",
                "kind",
                "agreement",
                "coefficient",
                "cost / call",
                "latency / call",
            ],
            [
                [
                    r.judge,
                    r.grader,
                    r.agreement.n,
                    r.kind,
                    f"{r.agreement.agreement:.3f}",
                    f"{r.agreement.coefficient_name} {_num(r.agreement.coefficient)}",
                    _cost(r.cost_per_call),
                    f"{_num(r.latency_ms_per_call, 1)} ms",
                ]
                for r in cal.rows
            ],
        )  # fmt: skip
    )
    head, by_mode = mode_table(cal)
    if head:
        parts.append("<h3>Judge modes side by side</h3>")
        parts.append(_table(head, by_mode))
    recommended = cal.recommended or "none (no labelled item got a verdict)"
    parts.append(f"<p><b>Recommended judge: {html.escape(recommended)}</b></p>")
    for r in cal.rows:
        confusion = r.agreement.confusion
        labels = sorted({*confusion, *(k for v in confusion.values() for k in v)})
        parts.append(f"<h3>Confusion: {html.escape(f'{r.judge} / {r.grader} / {r.kind}')}</h3>")
        rows = [[h, *(confusion.get(h, {}).get(j, 0) for j in labels)] for h in labels]
        parts.append(_table(["people \\ judge", *labels], rows))
    for judge, pairs in cal.disagreements.items():
        if pairs:
            parts.append(f"<h3>Where {html.escape(judge)} and people disagree most</h3>")
            rows = [
                [p.case_id, p.grader, f"{p.kind} {p.item}".strip(), p.human, p.judge] for p in pairs
            ]
            parts.append(_table(["case", "grader", "item", "people", "judge"], rows))
    style = "body{font:14px system-ui;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}"
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{style}</style>\n" + "\n".join(parts) + "\n"
    )
