"""A project's defaults for ``evalrun run``: ``[tool.evalrun]`` in pyproject.toml or an
evalrun.toml found by walking up from the current folder, ``.env``, and ``EVALRUN_<OPTION>``
variables. A flag beats them all; the order is in docs/config.md, "Precedence"."""

from __future__ import annotations

import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalrun.errors import UserError
from evalrun.session import RunSettings
from evalrun.suggest import closest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML with tomli (a dependency there)
    import tomli as tomllib

#: Looked for in each folder from the current one up, evalrun.toml first (docs/config.md).
CONFIG_FILES = ("evalrun.toml", "pyproject.toml")
#: The prefix of the variables that set run options: ``EVALRUN_WORKERS=8``.
ENV_PREFIX = "EVALRUN_"
#: The key that lists the eval files and folders ``evalrun run`` runs when given none.
EVALS_KEY = "evals"
#: Options whose value is a path: a relative one in a config file is read from its folder.
PATH_OPTIONS = frozenset(
    name for name, info in RunSettings.model_fields.items() if "Path" in str(info.annotation)
)
#: Options that take several values: a variable separates them with commas.
LIST_OPTIONS = frozenset(
    name for name, info in RunSettings.model_fields.items() if "list" in str(info.annotation)
)


class ProjectConfigError(UserError):
    """A config file, ``.env`` or ``EVALRUN_*`` variable that cannot be used; the message names
    the file (with the table) or the variable, and the key."""


@dataclass(frozen=True)
class Setting:
    """One option's project default and where it came from (``-v`` prints it)."""

    value: Any
    source: str


@dataclass
class ProjectDefaults:
    """What a run takes from the project before its flags: each option's default, the eval
    paths to run when none is given, and the files read."""

    settings: dict[str, Setting] = field(default_factory=dict)
    evals: list[Path] = field(default_factory=list)
    config_file: Path | None = None
    dotenv_file: Path | None = None

    def values(self) -> dict[str, Any]:
        return {name: setting.value for name, setting in self.settings.items()}


def find_config(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest config file at or above ``start`` and its evalrun table: an evalrun.toml
    (the whole file), or a pyproject.toml with ``[tool.evalrun]`` (one without it is passed
    over, as ruff and pytest do)."""
    for folder in (start, *start.parents):
        for name in CONFIG_FILES:
            path = folder / name
            if not path.is_file():
                continue
            document = _read_toml(path)
            if name == "evalrun.toml":
                return path, document
            table = document.get("tool", {}).get("evalrun")
            if table is not None:
                if not isinstance(table, dict):
                    raise ProjectConfigError(f"{path}: [tool.evalrun] must be a table")
                return path, table
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:  # its message carries the line and column
        raise ProjectConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ProjectConfigError(f"{path}: cannot be read: {exc.strerror}") from None


def read_dotenv(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``export`` allowed, ``#`` comments, values optionally quoted);
    a line that is none of these is an error naming its line (docs/config.md, ".env")."""
    values: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectConfigError(f"{path}: cannot be read: {exc}") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, equals, value = line.partition("=")
        name = name.strip()
        if not equals or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise ProjectConfigError(f"{path}:{number}: expected NAME=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:  # an unquoted value ends at a comment
            value = value.split(" #", 1)[0].rstrip()
        values[name] = value
    return values


def apply_dotenv(values: Mapping[str, str], environ: MutableMapping[str, str]) -> list[str]:
    """Put ``.env``'s variables into the environment where it has none of that name: a real
    variable always wins. Graders still get only what the scrubbing rules let through
    (docs/security.md). Returns the names set."""
    added = [name for name in values if name not in environ]
    for name in added:
        environ[name] = values[name]
    return added


def _checked(name: str, value: Any, where: str) -> Any:
    """``value`` as the run option ``name`` takes it, or an error naming ``where``."""
    try:
        checked = RunSettings.model_validate({name: value})
    except ValidationError as exc:
        reason = "; ".join(error["msg"] for error in exc.errors())
        raise ProjectConfigError(f"{where}: {reason} (got {value!r})") from None
    return getattr(checked, name)


def _from_table(path: Path, table: dict[str, Any]) -> tuple[dict[str, Setting], list[Path]]:
    """The options a config file sets (keys spelled as the flags, ``max-errors``, or with
    ``_``), paths read from its folder."""
    where_table = f"{path} [tool.evalrun]" if path.name == "pyproject.toml" else str(path)
    settings: dict[str, Setting] = {}
    evals: list[Path] = []
    for key, value in table.items():
        name = key.replace("-", "_")
        where = f"{where_table}: {key}"
        if name == EVALS_KEY:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ProjectConfigError(f"{where}: a list of eval files or folders")
            evals = [path.parent / v for v in value]
            continue
        if name not in RunSettings.model_fields:
            known = [*RunSettings.model_fields, EVALS_KEY]
            guess = closest(name, known)
            hint = f" (did you mean '{guess.replace('_', '-')}'?)" if guess else ""
            raise ProjectConfigError(f"{where}: not an option of evalrun run{hint}")
        if name in PATH_OPTIONS and isinstance(value, str):
            value = path.parent / value
        settings[name] = Setting(_checked(name, value, where), where_table)
    return settings, evals


def _from_variables(variables: Mapping[str, str], source: str) -> dict[str, Setting]:
    """The options ``EVALRUN_<OPTION>`` variables set; an unknown ``EVALRUN_`` name is left
    alone (the proxy's variables share the prefix)."""
    settings: dict[str, Setting] = {}
    for name in RunSettings.model_fields:
        variable = ENV_PREFIX + name.upper()
        if variable not in variables:
            continue
        raw = variables[variable]
        if not raw.strip():  # `EVALRUN_TARGET=` unsets, as a blank line in CI config means
            continue
        value: Any = (
            [v.strip() for v in raw.split(",") if v.strip()] if name in LIST_OPTIONS else raw
        )
        where = variable if source == "environment" else f"{source}: {variable}"
        settings[name] = Setting(_checked(name, value, where), source)
    return settings


def project_defaults(
    cwd: Path, environ: MutableMapping[str, str], *, read_dotenv_file: bool = True
) -> ProjectDefaults:
    """Each run option's default from the project, highest first: ``EVALRUN_*`` in the
    environment, then in ``.env`` (the current folder's, else the config file's folder's),
    then the config file. ``.env``'s other variables join ``environ`` where unset."""
    real = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIX)}
    found = find_config(cwd)
    defaults = ProjectDefaults()
    if found is not None:
        defaults.config_file = found[0]
        defaults.settings, defaults.evals = _from_table(*found)
    if read_dotenv_file:
        folders = [cwd] + ([found[0].parent] if found is not None else [])
        dotenv = next((f / ".env" for f in folders if (f / ".env").is_file()), None)
        if dotenv is not None:
            defaults.dotenv_file = dotenv
            from_file = read_dotenv(dotenv)
            defaults.settings.update(_from_variables(from_file, str(dotenv)))
            apply_dotenv(from_file, environ)
    defaults.settings.update(_from_variables(real, "environment"))
    return defaults
