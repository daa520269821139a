"""The one table of report formats: each format's module and its file in the bundle
(docs/architecture.md, "Adding a report format")."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType

from evalrun.results.agentv_run import INDEX

#: format -> (module under evalrun.reporters with ``Writer`` and ``draft``, file name in the bundle)
FORMATS: dict[str, tuple[str, str]] = {
    "md": ("markdown", "report.md"),
    "html": ("html", "report.html"),
    "junit": ("junit", "junit.xml"),
    "json": ("json_report", "report.json"),
    "agentv": ("agentv", INDEX),
}
DEFAULT_FORMATS = ("md", "html", "junit")


def format_module(fmt: str) -> ModuleType:
    """The module that writes ``fmt``, imported on first use (a run imports only its formats)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")
    return importlib.import_module(f"evalrun.reporters.{FORMATS[fmt][0]}")


def check_formats(formats: Iterable[str]) -> None:
    """Refuse unknown formats before anything is read or written."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown} (choose from {', '.join(FORMATS)})")
