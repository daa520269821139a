"""Reports rendered from a run bundle on disk (never from the runner's memory).

``write_reports(run_dir)`` is what the runner calls at the end of a run;
``github_actions_report(run_dir)`` adds the job summary and annotations under GitHub Actions.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from evalrun.reporters.bundle_view import BundleNotFound, BundleView, load_bundle
from evalrun.reporters.github import github_actions_report
from evalrun.results.summary import DEFAULT_UNSTABLE_BOUND

#: The name the runner calls.
github_actions = github_actions_report

#: format -> (module under evalrun.reporters with ``write(view, out)``, file name in the bundle)
FORMATS: dict[str, tuple[str, str]] = {
    "md": ("markdown", "report.md"),
    "html": ("html", "report.html"),
    "junit": ("junit", "junit.xml"),
    "json": ("json_report", "report.json"),
}
DEFAULT_FORMATS = ("md", "html", "junit")

__all__ = [
    "DEFAULT_FORMATS",
    "FORMATS",
    "BundleNotFound",
    "BundleView",
    "github_actions",
    "github_actions_report",
    "load_bundle",
    "render",
    "write",
    "write_reports",
]


def write(view: BundleView, fmt: str, out: TextIO) -> None:
    """Stream the report in format ``fmt`` to ``out``, one case at a time."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")
    module = importlib.import_module(f"evalrun.reporters.{FORMATS[fmt][0]}")
    module.write(view, out)


def render(view: BundleView, fmt: str) -> str:
    """The whole report as one string (for small bundles and tests; files use :func:`write`)."""
    buffer = io.StringIO()
    write(view, fmt, buffer)
    return buffer.getvalue()


def _write_atomic(view: BundleView, fmt: str, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        write(view, fmt, handle)
    tmp.replace(path)


def write_reports(
    run_dir: Path | str,
    formats: Iterable[str] = DEFAULT_FORMATS,
    *,
    unstable_bound: float = DEFAULT_UNSTABLE_BOUND,
) -> list[Path]:
    """Render the bundle in ``run_dir`` into its report files; returns the paths written."""
    formats = list(formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown} (choose from {', '.join(FORMATS)})")
    run_dir = Path(run_dir)
    view = load_bundle(run_dir, unstable_bound=unstable_bound)
    written = []
    for fmt in formats:
        path = run_dir / FORMATS[fmt][1]
        _write_atomic(view, fmt, path)
        written.append(path)
    return written
