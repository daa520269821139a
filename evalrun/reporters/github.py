"""GitHub Actions output: the Markdown summary on the job page, annotations for bad cases.

Escaping follows the workflow-command rules: in messages ``%``, CR and LF are percent-encoded;
in properties (``title=``) ``:`` and ``,`` are encoded as well.
"""

import os
import sys
from collections.abc import Mapping
from itertools import islice
from pathlib import Path
from typing import TextIO

from evalrun.reporters import markdown
from evalrun.reporters.bundle_view import BundleView, case_problems, load_bundle
from evalrun.safetext import escape_controls, no_workflow_commands

#: GitHub refuses job summaries over 1 MiB; stay well under it.
SUMMARY_LIMIT = 900_000
ANNOTATION_LIMIT = 50


def escape_data(text: str) -> str:
    """A command's message: the workflow-command encoding (lines kept as ``%0A``), then control
    characters shown as escapes and no old-style ``##[`` command (evalrun.safetext)."""
    encoded = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return no_workflow_commands(escape_controls(encoded))


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def tests_file_in(view: BundleView, workspace: Path) -> str | None:
    """The file the cases are defined in, relative to ``workspace`` (as GitHub wants it for
    ``file=``), or None when the bundle does not say or the file is outside the workspace."""
    s = view.meta
    recorded = s.tests_file or s.eval_file
    if not recorded:
        return None
    path = Path(recorded)
    if not path.is_absolute():
        path = workspace / path
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return None


def annotations(
    view: BundleView, *, limit: int = ANNOTATION_LIMIT, workspace: Path | None = None
) -> list[str]:
    """``::error`` lines for failed and errored cases (at most ``limit``, then a notice), each
    on the case's line of the eval file when the bundle records it (docs/github-actions.md)."""
    file = tests_file_in(view, Path.cwd() if workspace is None else workspace)
    lines = []
    for case in islice(view.failures, limit):
        title = f"{view.title}: {view.label(case)} {case.status}"
        score = "-" if case.score is None else f"{case.score:.3f}"
        message = "\n".join([f"score {score}", *case_problems(case)])
        where = ""
        if file is not None:
            where = f"file={escape_property(file)},"
            if case.line is not None:
                where += f"line={int(case.line)},"
        lines.append(f"::error {where}title={escape_property(title)}::{escape_data(message)}")
    if view.failure_count > limit:
        more = f"{view.failure_count - limit} more failed or errored case(s); see the job summary"
        lines.append(f"::notice title={escape_property(view.title)}::{escape_data(more)}")
    return lines


def job_summary(view: BundleView) -> str:
    text = markdown.render(view, details=False)
    if len(text.encode()) > SUMMARY_LIMIT:
        text = markdown.render(view, details=False, max_failures=20)
    return text


def github_actions_report(
    run: BundleView | Path | str,
    *,
    env: Mapping[str, str] | None = None,
    stream: TextIO | None = None,
    limit: int = ANNOTATION_LIMIT,
) -> bool:
    """When running under GitHub Actions, write the job summary and annotations.

    Returns False (and does nothing) outside GitHub Actions.
    """
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") != "true":
        return False
    view = run if isinstance(run, BundleView) else load_bundle(run)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as handle:
            handle.write(job_summary(view) + "\n")
    out = sys.stdout if stream is None else stream
    workspace = Path(env["GITHUB_WORKSPACE"]) if env.get("GITHUB_WORKSPACE") else Path.cwd()
    for line in annotations(view, limit=limit, workspace=workspace):
        out.write(line + "\n")
    out.flush()
    return True
