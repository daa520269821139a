"""One error tree (docs/architecture.md, "Errors and exit codes"): every exception class of
evalrun derives from ``EvalrunError``, user errors carry exit 2, and every command stops
through ``fail()``."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
import typer

from evalrun.commands.failing import fail
from evalrun.errors import ConfigError, EvalrunError, ExitCode, UserError

ROOT = Path(__file__).resolve().parent.parent
#: Builtin exception names, as a class statement spells its bases.
BUILTIN_ERRORS = {
    name
    for name in dir(builtins)
    if isinstance(getattr(builtins, name), type)
    and issubclass(getattr(builtins, name), BaseException)
}


def _base_names(node: ast.ClassDef) -> list[str]:
    """``class A(m.B, C)`` -> ``["B", "C"]``."""
    return [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]


def outside_the_tree(sources: dict[str, str]) -> list[str]:
    """``file:line: Name`` for each exception class that does not derive from EvalrunError."""
    classes: dict[str, tuple[str, int, list[str]]] = {}
    for shown, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = (shown, node.lineno, _base_names(node))
    rooted = {"EvalrunError"}
    grew = True
    while grew:
        grew = False
        for name, (_, _, bases) in classes.items():
            if name not in rooted and any(base in rooted for base in bases):
                rooted.add(name)
                grew = True
    exceptions = {"EvalrunError"} | {
        name
        for name, (_, _, bases) in classes.items()
        if any(base in BUILTIN_ERRORS or base in rooted for base in bases)
    }
    return sorted(f"{classes[name][0]}:{classes[name][1]}: {name}" for name in exceptions - rooted)


def evalrun_sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "evalrun").rglob("*.py"))
    }


def test_every_exception_class_of_evalrun_has_the_one_root() -> None:
    assert outside_the_tree(evalrun_sources()) == []


def test_the_check_finds_an_exception_outside_the_tree() -> None:
    """The rule can fail: a planted class with a builtin base is named with its line; a class
    that derives from the tree through others is not."""
    planted = {
        "errors.py": "class EvalrunError(Exception):\n    pass\n",
        "a.py": "class Mine(errors.EvalrunError):\n    pass\nclass Deeper(Mine, KeyError):\n    pass\n",
        "b.py": "x = 1\n\nclass Stray(ValueError):\n    pass\nclass Plain:\n    pass\n",
    }
    assert outside_the_tree(planted) == ["b.py:3: Stray"]


def test_user_errors_exit_2_and_others_say_their_code(capsys: pytest.CaptureFixture[str]) -> None:
    """The problems come first, one a line, then ``error: MESSAGE``; the exit code is the
    error's own (docs/results.md, "Exit codes")."""
    exit_ = fail(ConfigError("targets.yaml:3: kind: unknown"), problems=["a: x", "b: y"])
    assert isinstance(exit_, typer.Exit) and exit_.exit_code == ExitCode.USAGE == 2
    assert capsys.readouterr().err == "a: x\nb: y\nerror: targets.yaml:3: kind: unknown\n"
    assert fail("--out takes exactly one --format").exit_code == 2
    assert fail("the probe failed", code=ExitCode.GATE_FAILED).exit_code == 1
    assert capsys.readouterr().err.splitlines()[-1] == "error: the probe failed"


def test_user_text_is_printed_safely(capsys: pytest.CaptureFixture[str]) -> None:
    """A terminal escape in a file name reaches stderr as text, never as a control sequence."""
    fail(UserError("evil\x1b[2J.yaml: not found"))
    assert "\x1b" not in capsys.readouterr().err


def test_the_exit_codes_are_the_documented_ones() -> None:
    """docs/results.md's table of exit codes lists exactly the codes of ExitCode."""
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    table = text.split("## Exit codes", 1)[1].split("\n\n")[1]
    documented = {int(line.split("|")[1]) for line in table.splitlines()[2:]}
    codes = {v for k, v in vars(ExitCode).items() if not k.startswith("_")}
    assert documented == codes == {0, 1, 2, 3, 130}
    assert issubclass(ConfigError, UserError) and issubclass(UserError, EvalrunError)
