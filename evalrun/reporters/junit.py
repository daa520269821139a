"""junit.xml in the Ant/Jenkins JUnit dialect CI systems read.

One ``<testsuite>`` per eval, one ``<testcase>`` per case (per case and repeat when the run
repeats): ``<failure>`` for failed, ``<error>`` for error, ``<skipped>`` for unscored.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import TextIO

from evalrun.reporters import fmt
from evalrun.reporters.bundle_view import (
    BundleView,
    CaseView,
    case_duration_s,
    case_problems,
    case_reason,
)
from evalrun.results.models import CaseResult

# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
OUTPUT_LIMIT = 8000
_CASES = "evalrun-cases"
#: Where ``ET.indent`` puts a child of ``<testsuite>``.
_INDENT = "    "


def _clean(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _time(seconds: float | None) -> str:
    return f"{max(0.0, seconds or 0.0):.3f}"


def _timestamp(value: object) -> str:
    """Ant's timestamp form: ``YYYY-MM-DDTHH:MM:SS`` in UTC, no zone suffix."""
    moment = None
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if moment is None:
        moment = datetime.now(timezone.utc)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def _classname(view: BundleView) -> str:
    name = re.sub(r"\.(eval\.)?(ya?ml|json)$", "", view.title.replace("\\", "/").split("/")[-1])
    return "evalrun." + (re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "eval")


#: Anything :func:`_text` or :func:`_attr` would change; most text has none of it.
_SPECIAL = re.compile('[&<>"\n\r\t\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]')


def _text(value: object) -> str:
    """Element text as ElementTree escapes it."""
    text = str(value)
    if not _SPECIAL.search(text):
        return text
    return _clean(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(value: object) -> str:
    """An attribute value as ElementTree escapes it (line breaks kept as references)."""
    text = str(value)
    if not _SPECIAL.search(text):
        return text
    return (
        _text(text)
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\r", "&#13;")
        .replace("\t", "&#09;")
    )


def draft(view: CaseView, case: CaseResult) -> tuple[str, str]:
    """One ``<testcase>`` as ``ET.indent`` lays it out under ``<testsuite>``, in two pieces
    around its ``classname`` (the suite's, which the writer knows); written as text, since
    building elements costs more than the rest of the report for a large run."""
    name = _attr(view.label(case)) or "(unnamed)"
    before = f'\n{_INDENT}<testcase name="{name}" classname="'
    return before, _testcase_rest(case)


def _testcase_rest(case: CaseResult) -> str:
    """The ``<testcase>`` from the end of its ``classname`` on."""
    head = f'" time="{_time(case_duration_s(case))}"'
    output = ""
    if case.output is not None:
        output = f"<system-out>{_text(fmt.clip(str(case.output), OUTPUT_LIMIT))}</system-out>"
    if case.status == "passed":  # most cases of a large run: the short way
        return f"{head}>\n{_INDENT}  {output}\n{_INDENT}</testcase>" if output else head + " />"
    children = []
    # CI views show the message as the headline: the grader and its reason, on one line.
    message = case_reason(case) or f"{case.status}: score {fmt.score(case.score)}"
    if case.status in ("failed", "error"):
        tag = "failure" if case.status == "failed" else "error"
        body = "\n".join([f"{case.status}: score {fmt.score(case.score)}", *case_problems(case)])
        children.append(
            f'<{tag} message="{_attr(message)}" type="{case.status}">{_text(body)}</{tag}>'
        )
    elif case.status == "unscored":
        children.append(f'<skipped message="{_attr(f"unscored: {message}")}" />')
    if output:
        children.append(output)
    if not children:
        return head + " />"
    inner = "".join(f"\n{_INDENT}  {child}" for child in children)
    return f"{head}>{inner}\n{_INDENT}</testcase>"


def _skeleton(view: BundleView) -> ET.Element:
    """The document with a placeholder where the test cases go."""
    counts = view.stats.counts
    total_time = view.meta.duration_s
    if total_time is None:
        total_time = sum(case_duration_s(c) or 0.0 for c in view.cases)
    suite_attrs = {
        "name": _clean(view.title),
        "tests": str(counts.total),
        "failures": str(counts.failed),
        "errors": str(counts.error),
        "skipped": str(counts.unscored),
        "time": _time(total_time),
        "timestamp": _timestamp(view.meta.started_at),
        "hostname": _clean(socket.gethostname() or "localhost"),
    }
    root = ET.Element(
        "testsuites",
        {k: suite_attrs[k] for k in ("name", "tests", "failures", "errors", "time")},
    )
    suite = ET.SubElement(root, "testsuite", {"id": "0", "package": "evalrun", **suite_attrs})
    props = ET.SubElement(suite, "properties")
    meta, run = view.meta, view.stats
    properties = {
        "target": meta.target,
        "judge": meta.judge,
        "mean_score": run.mean_score,
        "mean_score_ci_low": run.mean_score_ci[0] if run.mean_score_ci else None,
        "mean_score_ci_high": run.mean_score_ci[1] if run.mean_score_ci else None,
        "pass_rate": run.pass_rate,
        "pass_rate_ci_low": run.pass_rate_ci[0] if run.pass_rate_ci else None,
        "pass_rate_ci_high": run.pass_rate_ci[1] if run.pass_rate_ci else None,
        "repeat": meta.repeat,
        "threshold": meta.threshold,
        "exit_code": meta.exit_code,
    }
    for key, value in properties.items():
        if value is not None:
            ET.SubElement(props, "property", {"name": key, "value": _clean(value)})
    ET.SubElement(suite, _CASES)
    ET.SubElement(suite, "system-out").text = ""
    ET.SubElement(suite, "system-err").text = ""
    return root


class Writer:
    """The document as ``ET.indent`` lays it out, written one test case at a time."""

    reads_passed = True

    def __init__(self, view: BundleView, out: TextIO) -> None:
        self.view, self.out = view, out
        self.classname = _attr(_classname(view))
        self.tail_text = ""

    def head(self) -> None:
        root = _skeleton(self.view)
        ET.indent(root)
        head, self.tail_text = ET.tostring(root, encoding="unicode").split(
            f"\n{_INDENT}<{_CASES} />"
        )
        self.out.write('<?xml version="1.0" encoding="UTF-8"?>\n' + head)

    def case(self, case: CaseResult) -> None:
        self.place(draft(self.view, case))

    def place(self, pieces: tuple[str, str]) -> None:
        self.out.write(f"{pieces[0]}{self.classname}{pieces[1]}")

    def tail(self) -> None:
        self.out.write(self.tail_text + "\n")
