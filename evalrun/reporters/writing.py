"""Writing reports from a bundle on disk: one format to a stream, or every format asked for into
the bundle's report files in one pass (docs/reports.md)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from evalrun.reporters.bundle_view import BundleView, load_bundle
from evalrun.reporters.formats import DEFAULT_FORMATS, FORMATS, check_formats, format_module
from evalrun.reporters.onepass import ReportWriter, write_all
from evalrun.results.scan import ResultScan
from evalrun.results.summary import DEFAULT_UNSTABLE_BOUND

if TYPE_CHECKING:
    from evalrun.reporters.drafts import ReportDrafts


def _writer(view: BundleView, fmt: str, out: TextIO) -> ReportWriter:
    return format_module(fmt).Writer(view, out)


def report_drafts(formats: Iterable[str], expected: int = 0) -> ReportDrafts:
    """Drafts of the reports in ``formats`` for a run that writes ``expected`` results, to be
    told each case it writes (docs/reports.md, "When reports are written")."""
    from evalrun.reporters.drafts import ReportDrafts

    return ReportDrafts([format_module(fmt) for fmt in formats], expected)


def write(view: BundleView, fmt: str, out: TextIO) -> None:
    """Stream the report in format ``fmt`` to ``out``, one case at a time."""
    write_all(view, [_writer(view, fmt, out)])


def render(view: BundleView, fmt: str) -> str:
    """The whole report as one string (for small bundles and tests; files use :func:`write`)."""
    buffer = io.StringIO()
    write(view, fmt, buffer)
    return buffer.getvalue()


def write_reports(
    run_dir: Path | str,
    formats: Iterable[str] = DEFAULT_FORMATS,
    *,
    unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
    scan: ResultScan | None = None,
) -> list[Path]:
    """Render the bundle in ``run_dir`` into its report files; returns the paths written.
    ``scan``: the pass the run made over ``results.jsonl``, so the reports need not make it
    again."""
    formats = list(formats)
    check_formats(formats)  # before reading the bundle
    return write_view(load_bundle(run_dir, unstable_bound=unstable_bound, scan=scan), formats)


def write_view(
    view: BundleView,
    formats: Iterable[str] = DEFAULT_FORMATS,
    drafts: ReportDrafts | None = None,
) -> list[Path]:
    """:func:`write_reports` for a bundle already read (the run reuses its view for the GitHub
    Actions report), with the sections the run drafted (``drafts``) where they fit."""
    formats = list(formats)
    check_formats(formats)
    paths = [view.run_dir / FORMATS[fmt][1] for fmt in formats]
    temps = [p.with_name(p.name + ".tmp") for p in paths]
    try:
        with contextlib.ExitStack() as stack:
            handles = [stack.enter_context(open(t, "w", encoding="utf-8")) for t in temps]
            writers = [_writer(view, f, h) for f, h in zip(formats, handles, strict=True)]
            write_all(view, writers, drafts)
    except BaseException:  # Ctrl-C or a full disk: no half-written report is left behind
        for temp in temps:
            temp.unlink(missing_ok=True)
        raise
    for temp, path in zip(temps, paths, strict=True):
        temp.replace(path)
    return paths
