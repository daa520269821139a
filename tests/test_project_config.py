"""The project's own settings agree with what the docs and CI say of them: every marker a plain
``pytest`` leaves out runs in ``.ci/run`` and ``make test-all``, and mypy's list of modules not
yet clean is the one docs/architecture.md ("Types") names."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from tests.conftest import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def left_out() -> set[str]:
    """The markers the default ``-m`` of ``addopts`` leaves out."""
    addopts = pyproject()["tool"]["pytest"]["ini_options"]["addopts"]
    expression = addopts[addopts.index("-m") + 1]
    return set(re.findall(r"not (\w+)", expression))


def test_every_marker_left_out_by_default_is_registered_and_runs_in_ci() -> None:
    registered = {
        line.split(":")[0] for line in pyproject()["tool"]["pytest"]["ini_options"]["markers"]
    }
    assert left_out() == {"slow", "bench", "ray", "browser"} <= registered
    for path in (".ci/run", "Makefile"):
        runs = [
            shlex.split(line.strip())
            for line in (ROOT / path).read_text().splitlines()
            if "-m pytest" in line and " -m '" in line
        ]
        assert len(runs) == 1, (path, runs)
        chosen = set(runs[0][runs[0].index("-m", 3) + 1].split(" or "))
        assert chosen == left_out(), (path, chosen)


def test_the_mypy_debt_is_the_list_in_the_docs() -> None:
    overrides = pyproject()["tool"]["mypy"]["overrides"]
    debt = {m for o in overrides if o.get("ignore_errors") for m in o["module"]}
    docs = (ROOT / "docs" / "architecture.md").read_text()
    types = docs[docs.index("## Types") :]
    types = types[: types.index("\n## ")]
    assert set(re.findall(r"`((?:evalrun|proxy|graders|grader_sdk)\.[\w.]+)`", types)) == debt
