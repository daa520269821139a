"""Imports follow the flow in docs/architecture.md ("Who may import whom").

Read from the source with ``ast``, so imports inside functions (the usual way round a rule)
count too. A stage knows the stages it hands work to and the formats it reads or writes; it never
knows who called it. The launcher sees the proxy only through ``launcher.GrantIssuer``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evalrun", "proxy", "grader_sdk", "graders")

#: Foundations: small modules with no knowledge of any stage.
BASE = {"evalrun.safetext", "evalrun.suggest", "evalrun.compact", "evalrun.yamlsource"}
#: The judge-call record: made by the proxy, carried by launcher and runner, read by reports.
RECORDS = {"evalrun.judgecall"}
#: Formats every stage may read or write: the eval file and the results bundle.
FORMATS = {"evalrun.spec", "evalrun.results"}

#: What each unit may import of ours (besides itself). Keep equal to docs/architecture.md.
ALLOWED: dict[str, set[str]] = {
    "grader_sdk": set(),
    "graders": {"grader_sdk"},
    "evalrun": set(),
    "evalrun.safetext": set(),
    "evalrun.suggest": set(),
    "evalrun.compact": set(),
    "evalrun.hardening": set(),
    "evalrun.judgecall": set(),
    "evalrun.yamlsource": {"evalrun.safetext", "evalrun.suggest"},
    "evalrun.rubric": BASE,
    "evalrun.spec": BASE,
    "evalrun.results": BASE | RECORDS,
    "evalrun.targets": BASE,
    "proxy": BASE | RECORDS | {"evalrun.targets"},  # not results/: a later stage
    "evalrun.launcher": BASE | RECORDS | FORMATS,
    "evalrun.runner": BASE
    | RECORDS
    | FORMATS
    | {"evalrun.rubric", "evalrun.launcher", "proxy", "evalrun.targets"},
    "evalrun.calibration": BASE | RECORDS | FORMATS,
    "evalrun.reporters": BASE | RECORDS | FORMATS,
}
#: The entry points below the command line: the run's core, the Python API, the pytest plugin.
#: They wire every stage; only the command line and each other import them.
ENTRIES = {"evalrun.session", "evalrun.api", "evalrun.pytest_plugin", "evalrun.pytest_items"}
STAGES = set(ALLOWED) | {"proxy", "evalrun.rubric", "evalrun.launcher"}
ALLOWED.update({entry: STAGES | ENTRIES for entry in ENTRIES})
#: ``import evalrun`` stays light: the package only names the API, imported on first use.
ALLOWED["evalrun"] = {"evalrun.api", "evalrun.pytest_items"}
#: The command line wires everything, and no stage imports it.
TOP = {"evalrun.commands", "evalrun.cli", "evalrun.__main__"}


def unit_of(module: str) -> str:
    """The unit a dotted module belongs to: ``evalrun.<folder or module>`` or a top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "evalrun" and len(parts) > 1 else parts[0]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(module: str, is_package: bool, source: str) -> list[tuple[int, str]]:
    """Every module of ours that ``source`` imports, with its line; relative imports resolved."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
            else:
                names = [node.module or ""]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in PACKAGES]
    return found


def tree() -> list[tuple[str, str, bool, str]]:
    """(shown path, module, is a package, source) for every module of ours."""
    paths = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    return [
        (str(p.relative_to(ROOT)), module_name(p), p.name == "__init__.py", p.read_text())
        for p in paths
    ]


def violations(modules: list[tuple[str, str, bool, str]]) -> list[str]:
    problems = []
    for shown, module, is_package, source in modules:
        unit = unit_of(module)
        allowed = ALLOWED.get(unit)
        for line, name in imported_modules(module, is_package, source):
            target = unit_of(name)
            if target == unit or unit in TOP:
                continue
            if target in TOP:
                problems.append(f"{shown}:{line}: {unit} imports the command line ({name})")
            elif allowed is None:
                problems.append(f"{shown}: {unit} is not in the table")
            elif target not in allowed:
                problems.append(f"{shown}:{line}: {unit} imports {name}")
    return problems


def test_every_import_follows_the_flow() -> None:
    assert violations(tree()) == []


def test_every_unit_is_in_the_table() -> None:
    units = {unit_of(module) for _, module, _, _ in tree()}
    assert units - TOP <= set(ALLOWED), sorted(units - TOP - set(ALLOWED))


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("evalrun.launcher.x", "from proxy import JudgeProxy\n", "evalrun.launcher imports proxy"),
        ("evalrun.launcher.x", "import evalrun.targets.base\n", "imports evalrun.targets.base"),
        ("grader_sdk.x", "from evalrun.results import models\n", "grader_sdk imports evalrun"),
        ("evalrun.targets.x", "from proxy.grants import Grant\n", "evalrun.targets imports proxy"),
        ("evalrun.results.x", "from ..reporters import html\n", "imports evalrun.reporters"),
        (
            "evalrun.spec.x",
            "def f():\n    from evalrun.runner import run\n",
            "imports evalrun.runner",
        ),
        ("evalrun.reporters.x", "from evalrun.commands import run\n", "imports the command line"),
        ("evalrun.spec.x", "from evalrun.targets import TargetsFile\n", "imports evalrun.targets"),
        ("proxy.x", "from evalrun.results.models import CaseResult\n", "proxy imports evalrun"),
        ("evalrun.launcher.x", "from ..runner import judging\n", "imports evalrun.runner"),
        ("evalrun.newpart.x", "from evalrun.spec import models\n", "not in the table"),
        ("evalrun.api", "from evalrun.commands import run\n", "imports the command line"),
        ("evalrun.spec.x", "from evalrun.api import run\n", "imports evalrun.api"),
    ],
)
def test_the_check_catches_a_wrong_import(module: str, source: str, expected: str) -> None:
    """The rule can fail: a planted import is reported, with its line."""
    problems = violations([("planted.py", module, False, source)])
    assert len(problems) == 1 and expected in problems[0], problems
