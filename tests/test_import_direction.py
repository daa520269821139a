"""Data flows one way (docs/architecture.md): each part of the code imports only the parts it
is allowed to. Read from the source with ``ast``, lazy imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evalrun", "proxy", "grader_sdk", "graders")

#: The shared helpers and records any part of evalrun may use (each imports nothing of ours
#: beyond this set).
SHARED = {
    "evalrun.safetext",
    "evalrun.suggest",
    "evalrun.yamlsource",
    "evalrun.compact",
    "evalrun.judgecall",
}

#: part -> the other parts it may import. ``commands`` and the CLI sit on top and may import
#: anything; everything else is listed, so a new dependency is a deliberate edit here.
ALLOWED: dict[str, set[str]] = {
    "grader_sdk": set(),  # what grader processes import: nothing of ours
    "graders": {"grader_sdk"},
    "evalrun.targets": SHARED,
    "proxy": SHARED | {"evalrun.targets"},
    "evalrun.results": SHARED,
    "evalrun.spec": SHARED | {"evalrun.targets"},  # the targets.yaml schema
    # the launcher sees the proxy only as a GrantIssuer (evalrun/launcher/issuer.py)
    "evalrun.launcher": SHARED | {"evalrun.spec", "evalrun.results"},
    "evalrun.runner": SHARED
    | {"evalrun.spec", "evalrun.launcher", "evalrun.targets", "proxy", "evalrun.results"}
    | {"evalrun.rubric"},
    "evalrun.reporters": SHARED | {"evalrun.results"},
    "evalrun.calibration": SHARED | {"evalrun.results"},
    "evalrun.rubric": SHARED,
    **{helper: SHARED for helper in SHARED},
    "evalrun.judgecall": set(),  # the judge-call record: the proxy's and the reports' own
}


def _part(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "evalrun" and len(parts) > 1 else parts[0]


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> set[str]:
    """Every module of ours that the file imports, at any depth of the code."""
    name = _module_name(path, root)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join([*base, node.module] if node.module else base))
            elif node.module:
                found.add(node.module)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _violations(root: Path = ROOT) -> list[str]:
    problems = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            own = _part(_module_name(path, root))
            allowed = ALLOWED.get(own)
            if allowed is None:
                continue  # commands, the CLI: the top
            for module in sorted(_imports(path, root)):
                if _part(module) not in allowed | {own}:
                    problems.append(f"{path.relative_to(root).as_posix()} imports {module}")
    return problems


def test_every_part_imports_only_what_it_may() -> None:
    assert _violations() == []


def test_the_check_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The rule can fail: a launcher module importing the proxy inside a function, and a
    grader_sdk module reaching evalrun, are both caught."""
    launcher = tmp_path / "evalrun" / "launcher"
    sdk = tmp_path / "grader_sdk"
    launcher.mkdir(parents=True)
    sdk.mkdir()
    (launcher / "bad.py").write_text("def f():\n    from proxy import JudgeProxy\n")
    (launcher / "fine.py").write_text("from . import issuer\nfrom evalrun.spec import models\n")
    (sdk / "bad.py").write_text("import evalrun.results.models\n")
    (launcher / "relative.py").write_text("from ..runner import judging\n")
    assert _violations(tmp_path) == [
        "evalrun/launcher/bad.py imports proxy",
        "evalrun/launcher/relative.py imports evalrun.runner",
        "grader_sdk/bad.py imports evalrun.results.models",
    ]
