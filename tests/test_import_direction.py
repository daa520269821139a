"""Imports follow the flow in docs/architecture.md ("Who may import whom").

Read from the source with ``ast``, so imports inside functions (the usual way round a rule)
count too. A stage knows the stages it hands work to and the formats it reads or writes; it never
knows who called it. The launcher sees the proxy only through ``launcher.GrantIssuer``; other
stages see targets only through ``evalrun/targets/__init__.py``; and no module imports itself
through others (a cycle), which is reported with each import's file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evalrun", "proxy", "grader_sdk", "graders", "rubrics")

#: The root of evalrun's errors and the exit codes (evalrun/errors.py): every unit of evalrun
#: may raise them, the records included; it imports nothing of ours.
ERRORS = {"evalrun.errors"}
#: Foundations: small modules with no knowledge of any stage.
BASE = ERRORS | {
    "evalrun.safetext",
    "evalrun.suggest",
    "evalrun.compact",
    "evalrun.hardening",
    "evalrun.sqlitewal",
    "evalrun.yamlsource",
    "evalrun.loopback",
    "evalrun.userdirs",
    "evalrun.argvpaths",
}
#: The records every stage after their maker carries: the judge-call record (made by the proxy)
#: and the agent transcript (read by a cli target, graded and written to the bundle).
RECORDS = {"evalrun.judgecall", "evalrun.transcripts"}
#: Formats every stage may read or write: the eval file and the results bundle.
FORMATS = {"evalrun.spec", "evalrun.results"}

#: What each unit may import of ours (besides itself). Keep equal to docs/architecture.md.
ALLOWED: dict[str, set[str]] = {
    "grader_sdk": set(),
    "rubrics": set(),  # the bundled YAML files and the paths to them
    "graders": {"grader_sdk", "rubrics"},
    "evalrun": set(),
    "evalrun.safetext": set(),
    "evalrun.suggest": set(),
    "evalrun.compact": set(),
    "evalrun.sqlitewal": set(),
    "evalrun.hardening": set(),
    "evalrun.loopback": set(),
    "evalrun.errors": set(),
    "evalrun.userdirs": set(),
    "evalrun.argvpaths": set(),
    "evalrun.judgecall": set(),
    "evalrun.telemetry": ERRORS | RECORDS | FORMATS,  # the records and results it makes spans of
    "evalrun.transcripts": ERRORS,
    "evalrun.yamlsource": ERRORS | {"evalrun.safetext", "evalrun.suggest"},
    "evalrun.rubric": BASE | {"rubrics"},
    "evalrun.spec": BASE | {"evalrun.transcripts"},  # the agent checks' options, at load time
    "evalrun.results": BASE | RECORDS,
    "evalrun.targets": BASE | {"evalrun.transcripts"},
    "proxy": BASE | RECORDS | {"evalrun.targets"},  # not results/: a later stage
    # a case's workspace: made from the eval file's keys, read by the launcher and the runner
    "evalrun.workspaces": BASE | {"evalrun.spec"},
    "evalrun.launcher": BASE | RECORDS | FORMATS | {"evalrun.workspaces"},
    "evalrun.runner": BASE
    | RECORDS
    | FORMATS
    | {
        "evalrun.rubric",
        "evalrun.launcher",
        "proxy",
        "evalrun.targets",
        "evalrun.telemetry",
        "evalrun.workspaces",
    },
    "evalrun.calibration": BASE | RECORDS | FORMATS,
    "evalrun.reporters": BASE | RECORDS | FORMATS,
    # reads bundles as the reports do, and reuses their view of one (bundle_view, compare)
    "evalrun.viewer": BASE | RECORDS | FORMATS | {"evalrun.reporters"},
}
#: The entry points below the command line: the run's core, the Python API, the pytest plugin.
#: They wire every stage; only the command line and each other import them.
ENTRIES = {
    "evalrun.session",
    "evalrun.api",
    "evalrun.pytest_plugin",
    "evalrun.pytest_items",
    "evalrun.pytest_state",
    "evalrun.projectconfig",
}
STAGES = set(ALLOWED) | {"proxy", "evalrun.rubric", "evalrun.launcher"}
ALLOWED.update({entry: STAGES | ENTRIES for entry in ENTRIES})
#: ``import evalrun`` stays light: the package only names the API, imported on first use.
ALLOWED["evalrun"] = {"evalrun.api", "evalrun.pytest_items"}
#: The command line wires everything, and no stage imports it.
TOP = {"evalrun.commands", "evalrun.cli", "evalrun.__main__"}
#: The one module of ``evalrun.targets`` other units may import.
TARGETS_FACE = "evalrun.targets"


def unit_of(module: str) -> str:
    """The unit a dotted module belongs to: ``evalrun.<folder or module>`` or a top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "evalrun" and len(parts) > 1 else parts[0]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_only_lines(tree: ast.Module) -> set[int]:
    """Lines of the imports under ``if TYPE_CHECKING:``: they never run, so they make no cycle."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            lines |= {inner.lineno for part in node.body for inner in ast.walk(part)}
    return lines


def imported_modules(
    module: str,
    is_package: bool,
    source: str,
    *,
    known: Collection[str] = (),
    runtime_only: bool = False,
) -> list[tuple[int, str]]:
    """Every module of ours that ``source`` imports, with its line; relative imports resolved.
    ``from P import N`` names ``P.N`` when that is one of the ``known`` modules (a submodule).
    ``runtime_only`` leaves out the imports under ``if TYPE_CHECKING:``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    parsed = ast.parse(source)
    skipped = type_only_lines(parsed) if runtime_only else set()
    found: list[tuple[int, str]] = []
    for node in ast.walk(parsed):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            submodules = [f"{origin}.{alias.name}" for alias in node.names]
            names = [name for name in submodules if name in known] or [origin]
        else:
            continue
        if node.lineno not in skipped:
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
    known = {module for _, module, _, _ in modules}
    problems = []
    for shown, module, is_package, source in modules:
        unit = unit_of(module)
        allowed = ALLOWED.get(unit)
        for line, name in imported_modules(module, is_package, source, known=known):
            target = unit_of(name)
            if target == unit:
                continue
            if target in TOP and unit not in TOP:
                problems.append(f"{shown}:{line}: {unit} imports the command line ({name})")
            elif allowed is None and unit not in TOP:
                problems.append(f"{shown}: {unit} is not in the table")
            elif unit not in TOP and target not in allowed:
                problems.append(f"{shown}:{line}: {unit} imports {name}")
            elif target == "evalrun.targets" and name != TARGETS_FACE:
                problems.append(f"{shown}:{line}: {unit} imports {name}, not {TARGETS_FACE}")
    return problems


def cycles(modules: list[tuple[str, str, bool, str]]) -> list[str]:
    """Each loop of runtime imports between modules (imports inside functions count), as
    ``a.py:LINE -> b.py:LINE -> a``: one per strongly connected group of modules."""
    known = {module: shown for shown, module, _, _ in modules}
    edges: dict[str, dict[str, int]] = {module: {} for module in known}
    for _, module, is_package, source in modules:
        for line, name in imported_modules(
            module, is_package, source, known=set(known), runtime_only=True
        ):
            if name in known and name != module:
                edges[module].setdefault(name, line)
    found = []
    for group in strongly_connected(edges):
        start = min(group)
        path = shortest_loop(edges, start, group)
        steps = [
            f"{known[a]}:{edges[a][b]}" for a, b in zip(path, path[1:] + path[:1], strict=True)
        ]
        found.append(" -> ".join(steps) + f" -> {known[start]}")
    return sorted(found)


def strongly_connected(edges: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's groups of two or more modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def shortest_loop(edges: dict[str, dict[str, int]], start: str, group: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``group`` (breadth first)."""
    paths = {start: [start]}
    queue = [start]
    for node in queue:
        for nxt in sorted(edges[node]):
            if nxt == start:
                return paths[node]
            if nxt in group and nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                queue.append(nxt)
    raise AssertionError(f"{start} is in no loop")


def test_every_import_follows_the_flow() -> None:
    assert violations(tree()) == []


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(tree()) == []


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
        ("proxy.x", "from evalrun.targets.base import Target\n", "not evalrun.targets"),
        ("evalrun.runner.x", "def f():\n    import evalrun.targets.pool\n", "not evalrun.targets"),
        ("proxy.x", "from evalrun.targets import registry\n", "evalrun.targets.registry, not"),
        ("evalrun.hardening", "from evalrun.spec import models\n", "hardening imports"),
        ("evalrun.spec.x", "from rubrics import bundled\n", "evalrun.spec imports rubrics"),
        ("rubrics", "from grader_sdk import replies\n", "rubrics imports grader_sdk"),
        ("evalrun.api", "from evalrun.commands import run\n", "imports the command line"),
        ("evalrun.spec.x", "from evalrun.api import run\n", "imports evalrun.api"),
        ("evalrun.errors", "from evalrun.safetext import printable\n", "errors imports"),
        ("evalrun.transcripts.x", "from evalrun.suggest import near\n", "transcripts imports"),
        ("grader_sdk.x", "from evalrun.errors import UserError\n", "grader_sdk imports"),
    ],
)
def test_the_check_catches_a_wrong_import(module: str, source: str, expected: str) -> None:
    """The rule can fail: a planted import is reported, with its line."""
    known = ("planted.py", module, False, source)
    problems = violations([known, ("registry.py", "evalrun.targets.registry", False, "")])
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_planted_cycle_is_reported_with_each_import() -> None:
    """The cycle rule can fail: a loop through a function-level import is found, a type-only
    import makes none."""
    planted = [
        ("a.py", "evalrun.x.a", False, "from evalrun.x import b\n"),
        ("b.py", "evalrun.x.b", False, "import os\n\ndef f():\n    from evalrun.x.c import g\n"),
        ("c.py", "evalrun.x.c", False, "from .a import h\n"),
        ("d.py", "evalrun.x.d", False, "if TYPE_CHECKING:\n    from evalrun.x.a import h\n"),
        ("e.py", "evalrun.x.e", False, "from evalrun.x.d import k\n"),
    ]
    assert cycles(planted) == ["a.py:1 -> b.py:4 -> c.py:1 -> a.py"]
    typed = [*planted[3:], ("d2.py", "evalrun.x.d2", False, "from evalrun.x.e import z\n")]
    assert cycles(typed) == []
