"""Reports rendered from a run bundle on disk (never from the runner's memory): the package's
face. The engine lives in its modules: ``formats.py`` (the table of formats), ``writing.py``
(``write_reports(run_dir)`` renders a bundle's report files; ``write_view`` does it for a bundle
already read, as the run does), ``onepass.py`` (the one pass for all formats); ``github.py``
adds the job summary and annotations under GitHub Actions.
"""

from __future__ import annotations

from evalrun.reporters.bundle_view import BundleNotFound, BundleView, load_bundle
from evalrun.reporters.formats import DEFAULT_FORMATS, FORMATS
from evalrun.reporters.github import github_actions_report
from evalrun.reporters.onepass import write_all
from evalrun.reporters.writing import render, report_drafts, write, write_reports, write_view

__all__ = [
    "DEFAULT_FORMATS",
    "FORMATS",
    "BundleNotFound",
    "BundleView",
    "github_actions_report",
    "load_bundle",
    "render",
    "report_drafts",
    "write",
    "write_all",
    "write_reports",
    "write_view",
]
