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
from evalrun.reporters.bundle_view import BundleView, case_duration_s, case_problems
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


def _testcase(view: BundleView, case: CaseResult, classname: str) -> ET.Element:
    element = ET.Element(
        "testcase",
        {
            "name": _clean(view.label(case)) or "(unnamed)",
            "classname": classname,
            "time": _time(case_duration_s(case)),
        },
    )
    problems = "\n".join(case_problems(case))
    headline = f"{case.status}: score {fmt.score(case.score)}"
    if case.status == "failed":
        child = ET.SubElement(element, "failure", {"message": _clean(headline), "type": "failed"})
        child.text = _clean(problems)
    elif case.status == "error":
        first = case_problems(case)[:1]
        message = first[0] if first else "error"
        child = ET.SubElement(element, "error", {"message": _clean(message), "type": "error"})
        child.text = _clean(problems)
    elif case.status == "unscored":
        reasons = "; ".join(case_problems(case)) or "every grader abstained"
        ET.SubElement(element, "skipped", {"message": _clean(f"unscored: {reasons}")})
    if case.output is not None:
        out = ET.SubElement(element, "system-out")
        out.text = _clean(fmt.clip(str(case.output), OUTPUT_LIMIT))
    return element


def _skeleton(view: BundleView) -> ET.Element:
    """The document with a placeholder where the test cases go."""
    counts = view.stats.counts
    total_time = view.summary.get("duration_s")
    if not isinstance(total_time, (int, float)):
        total_time = sum(case_duration_s(c) or 0.0 for c in view.cases)
    suite_attrs = {
        "name": _clean(view.title),
        "tests": str(counts["total"]),
        "failures": str(counts["failed"]),
        "errors": str(counts["error"]),
        "skipped": str(counts["unscored"]),
        "time": _time(total_time),
        "timestamp": _timestamp(view.summary.get("started_at")),
        "hostname": _clean(socket.gethostname() or "localhost"),
    }
    root = ET.Element(
        "testsuites",
        {k: suite_attrs[k] for k in ("name", "tests", "failures", "errors", "time")},
    )
    suite = ET.SubElement(root, "testsuite", {"id": "0", "package": "evalrun", **suite_attrs})
    props = ET.SubElement(suite, "properties")
    s = view.summary
    for key in ("target", "judge", "mean_score", "pass_rate", "repeat", "threshold", "exit_code"):
        if s.get(key) is not None:
            ET.SubElement(props, "property", {"name": key, "value": _clean(s[key])})
    ET.SubElement(suite, _CASES)
    ET.SubElement(suite, "system-out").text = ""
    ET.SubElement(suite, "system-err").text = ""
    return root


def write(view: BundleView, out: TextIO) -> None:
    """The document as ``ET.indent`` lays it out, written one test case at a time."""
    root = _skeleton(view)
    ET.indent(root)
    head, tail = ET.tostring(root, encoding="unicode").split(f"\n{_INDENT}<{_CASES} />")
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n' + head)
    classname = _classname(view)
    for case in view.cases:
        element = _testcase(view, case, classname)
        ET.indent(element, level=2)
        out.write(f"\n{_INDENT}" + ET.tostring(element, encoding="unicode"))
    out.write(tail + "\n")
