"""``evalrun/reporters/__init__.py`` is the package's face only (docs/architecture.md): it defines
nothing, and the modules under it never import back into it; the engine is ``formats.py``,
``writing.py`` and ``onepass.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import evalrun.reporters as reporters

PACKAGE = Path(reporters.__file__).resolve().parent
FACE = "evalrun.reporters"


def definitions(source: str) -> list[str]:
    """What a module does besides its docstring, imports and ``__all__``, as ``LINE: code``."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            continue
        found.append(f"{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def imports_of_the_face(source: str, submodules: set[str]) -> list[str]:
    """``LINE: NAME`` for each name a module takes from the face rather than from the module
    that defines it (``from evalrun.reporters import fmt``, a submodule, is fine)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == FACE and not node.level:
            found += [f"{node.lineno}: {a.name}" for a in node.names if a.name not in submodules]
    return found


def _submodules() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


def test_the_face_defines_nothing_and_names_only_what_submodules_define() -> None:
    source = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    assert definitions(source) == []
    reexported = {
        alias.name
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(FACE + ".")
        for alias in node.names
    }
    assert reexported == set(reporters.__all__)


def test_no_reporter_module_imports_back_into_the_face() -> None:
    submodules = _submodules()
    found = {
        path.name: imports_of_the_face(path.read_text(encoding="utf-8"), submodules)
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name != "__init__.py"
    }
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_checks_catch_an_engine_in_the_face_and_an_import_back() -> None:
    """Both rules can fail: a planted definition and a planted import back are named."""
    face = '"""Doc."""\nfrom x import y\n__all__ = ["y"]\nFORMATS = {}\n'
    assert definitions(face) == ["4: FORMATS = {}"]
    merge = "from evalrun.reporters import fmt, write_reports\n"
    assert imports_of_the_face(merge, {"fmt"}) == ["1: write_reports"]
