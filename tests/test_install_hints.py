"""No install hint points at a package this project does not own (docs/targets.md, "Installing
an extra"): on the package index ``evalrun`` is another project's name, so every hint the code
prints names the extra's own packages from pyproject.toml, or installs from a checkout."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from evalrun.targets import install_hint, kinds
from evalrun.targets.config import TargetConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
_SELF = re.compile(r"^evalrun\[([^\]]+)\]$")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(.*)$")


def _requirement(text: str) -> tuple[str, frozenset[str]]:
    """A requirement as (name, specifiers), so ``pytest>=8,<9.1`` equals ``pytest<9.1,>=8``."""
    found = _NAME.match(text.split(";")[0].strip())
    assert found, text
    specifiers = {part.strip() for part in found.group(2).split(",") if part.strip()}
    return found.group(1).lower(), frozenset(specifiers)


def _declared(extra: str) -> set[tuple[str, frozenset[str]]]:
    """pyproject's requirements of ``extra``, an ``evalrun[...]`` self-reference expanded."""
    out: set[tuple[str, frozenset[str]]] = set()
    for text in OPTIONAL[extra]:
        own = _SELF.match(text.strip())
        if own:
            for inner in own.group(1).split(","):
                out |= _declared(inner.strip())
        else:
            out.add(_requirement(text))
    return out


def _named(hint: str) -> list[str]:
    """The packages a hint's ``pip install`` names (the checkout command aside)."""
    command, _, _ = hint.partition(" (or, in a checkout")
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"], hint
    return words[2:]


@pytest.mark.parametrize("extra", sorted(OPTIONAL))
def test_a_hint_names_exactly_the_extras_packages_from_pyproject(extra: str) -> None:
    hint = install_hint(extra)
    named = _named(hint)
    assert named and not any(p.lower().startswith("evalrun") for p in named), hint
    assert {_requirement(p) for p in named} == _declared(extra)
    assert hint.endswith(f"(or, in a checkout of evalrun: pip install -e '.[{extra}]')")


def test_every_hint_the_code_prints_is_one_of_those(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    with_extra = [kind for kind in kinds().values() if kind.extra]
    assert {kind.extra for kind in with_extra} >= {"local", "litellm"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    for kind in with_extra:
        message = kind.missing_extra(TargetConfig(name="t", kind=kind.name))
        assert message is not None and "evalrun[" not in message
        assert message.endswith(install_hint(str(kind.extra)))
    model = pytest.importorskip("evalrun.targets.local.model", reason="needs the [local] extra")
    assert install_hint("local") == model.INSTALL_HINT


#: where hints and install commands are written for users
SCANNED = ("evalrun", "proxy", "grader_sdk", "graders", "bench", "docs", "tests", "README.md")


def test_no_file_tells_anyone_to_install_evalrun_with_an_extra_from_the_index() -> None:
    """``evalrun[...]`` may appear only as a warning (a line saying never) or pinned to a URL
    (``evalrun[local] @ git+...``); pyproject's own self-references are pip's, not a hint."""
    offenders = []
    for top in SCANNED:
        root = ROOT / top
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in files:
            if path.suffix not in {".py", ".md", ".mjs", ".yaml", ".toml"} or path == Path(
                __file__
            ):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                for found in re.finditer(r"evalrun\[[^\]]*\]", line):
                    pinned = line[found.end() :].lstrip().startswith("@ ")
                    if not pinned and "never" not in line.lower():
                        offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
