"""The pytest plugin's hooks: eval files collected as tests, one item per case
(docs/pytest.md).

Loaded in every pytest session where evalrun is installed, so it does nothing unless asked
(``--evalrun``, or the ``evalrun_paths`` ini option) and stays small: pytest parses a plugin
module on every start where bytecode is not cached (PYTEST_DONT_REWRITE: it has no asserts to
rewrite). The items, and ``@evalrun.case``, are in ``evalrun.pytest_items``, imported when an
eval file is collected or a marked test runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evalrun.pytest_state import session

if TYPE_CHECKING:
    import pytest

SUFFIXES = (".eval.yaml", ".eval.yml", ".eval.json")


def pytest_configure(config: pytest.Config) -> None:
    session["config"] = config


def pytest_unconfigure(config: pytest.Config) -> None:
    session.pop("config", None)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalrun", "evalrun: eval files as tests (docs/pytest.md)")
    group.addoption(
        "--evalrun",
        action="store_true",
        default=False,
        help="Collect *.eval.yaml files as tests, one per case.",
    )
    group.addoption("--evalrun-target", metavar="NAME", help="Target that answers the cases.")
    group.addoption("--evalrun-judge", metavar="NAME", help="Target the judge calls go to.")
    group.addoption(
        "--evalrun-workers", type=int, metavar="N", help="Cases in flight at once (default 4)."
    )
    parser.addini(
        "evalrun_paths",
        type="paths",
        default=[],
        help="Folders or eval files collected as tests without --evalrun (and only these).",
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not file_path.name.endswith(SUFFIXES):
        return None
    config = parent.config
    paths: list[Path] = config.getini("evalrun_paths")
    if paths:
        if not any(file_path == p or p in file_path.parents for p in paths):
            return None
    elif not config.getoption("evalrun"):
        return None
    from evalrun.pytest_items import EvalFileNode

    return EvalFileNode.from_parent(parent, path=file_path)
