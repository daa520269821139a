"""Reports rendered from a run bundle on disk (never from the runner's memory).

``write_reports(run_dir)`` is what the runner calls at the end of a run;
``github_actions_report(run_dir)`` adds the job summary and annotations under GitHub Actions.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path

from evalrun.reporters.bundle_view import BundleNotFound, BundleView, load_bundle
from evalrun.reporters.github import github_actions_report
from evalrun.results.summary import DEFAULT_UNSTABLE_BOUND

#: The name the runner calls.
github_actions = github_actions_report

#: format -> (module under evalrun.reporters with ``render(view) -> str``, file name in the bundle)
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
    "write_reports",
]


def render(view: BundleView, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")
    module = importlib.import_module(f"evalrun.reporters.{FORMATS[fmt][0]}")
    return module.render(view)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
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
        text = render(view, fmt)
        path = run_dir / FORMATS[fmt][1]
        _write_atomic(path, text)
        written.append(path)
    return written
