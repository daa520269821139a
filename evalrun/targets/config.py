"""``targets.yaml``: the named targets a run may use, and where that file is found."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError

if TYPE_CHECKING:
    from evalrun.yamlsource import LineMap

from evalrun.errors import ConfigError

_ENV_REF = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class TargetNotConfigured(ConfigError):
    """A target name that no targets file (nor the built-ins) defines."""

    def __init__(self, name: str, known: list[str]) -> None:
        from evalrun.suggest import did_you_mean

        self.name = name
        self.known = known
        super().__init__(
            f"unknown target '{name}'{did_you_mean(name, known)} "
            f"(configured: {', '.join(known) or 'none'})"
        )


class MockRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    match: str | None = None
    task: str | None = None
    response: str


class Price(BaseModel):
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0


class Hedge(BaseModel):
    """Opt-in hedged requests (docs/targets.md, "Tails"): a second copy of a deterministic call
    still unanswered at the ``quantile`` of the target's latency, for at most ``max_share`` of
    its calls."""

    model_config = ConfigDict(extra="forbid")

    quantile: float = Field(0.95, gt=0, lt=1)
    max_share: float = Field(0.05, gt=0, le=1)


#: where an unconfigured target's concurrency starts, and how far it may grow
DEFAULT_CONCURRENCY = 8
CONCURRENCY_CEILING = 256


class TargetConfig(BaseModel):
    """One named target. Kind-specific keys the common model does not know stay in extras."""

    model_config = ConfigDict(extra="allow")

    name: str
    kind: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = 60.0
    #: calls in flight at once; unset: adaptive from DEFAULT_CONCURRENCY up to CONCURRENCY_CEILING
    max_concurrency: int | None = Field(None, ge=1)
    max_retries: int = 3
    price: Price | None = None
    hedge: Hedge | None = None
    # mock
    default: str | None = None
    rules: list[MockRule] = Field(default_factory=list)
    #: the answer to a free-text prompt that asks for yes or no and matches no rule
    #: (docs/targets.md, "mock")
    yes_no: str | None = None
    latency_ms: float = 0.0

    @property
    def concurrency_bounds(self) -> tuple[int, int]:
        """(start, ceiling) of the adaptive limit (docs/targets.md, "Concurrency"): a configured
        ``max_concurrency`` is both, since it says what the account allows; 429s still cut it."""
        if self.max_concurrency is not None:
            return self.max_concurrency, self.max_concurrency
        return DEFAULT_CONCURRENCY, CONCURRENCY_CEILING

    def extra(self, key: str, default: Any = None) -> Any:
        return (self.model_extra or {}).get(key, default)

    def resolve_secret(self, env: Mapping[str, str] | None = None) -> str | None:
        """The API key from ``api_key_env`` or an ``${{ env.NAME }}`` reference; error if unset."""
        env = os.environ if env is None else env
        if self.api_key_env:
            value = env.get(self.api_key_env)
            if not value:
                raise ConfigError(
                    f"target '{self.name}' needs the environment variable "
                    f"{self.api_key_env} (api_key_env), which is not set"
                )
            return value
        if self.api_key:
            ref = _ENV_REF.fullmatch(self.api_key.strip())
            if ref:
                value = env.get(ref.group(1))
                if not value:
                    raise ConfigError(
                        f"target '{self.name}' needs the environment variable "
                        f"{ref.group(1)}, which is not set"
                    )
                return value
            return self.api_key
        return None

    def secret_env_names(self) -> list[str]:
        """Environment variables this target reads credentials from (scrubbed from graders)."""
        names = [self.api_key_env] if self.api_key_env else []
        if self.api_key:
            names += _ENV_REF.findall(self.api_key)
        return names


class TargetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targets: list[TargetConfig] = Field(default_factory=list)
    #: ``file:line: key: message`` on unquoted values that YAML 1.1 reads otherwise
    #: (docs/eval-files.md, "YAML values"); the commands print them
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return self._warnings

    def get(self, name: str) -> TargetConfig:
        for target in self.targets:
            if target.name == name:
                return target
        raise TargetNotConfigured(name, self.names)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.targets]

    def add_panel(self, members: list[str]) -> str:
        """The name of a panel of ``members`` (``judge: [a, b, c]`` in an eval file)."""
        name = "panel:" + "+".join(members)
        if name not in self.names:
            self.targets.append(TargetConfig(name=name, kind="panel", members=list(members)))
        return name


#: Targets that exist without any targets.yaml, so a fresh checkout can run offline.
BUILTIN_TARGETS: list[dict[str, Any]] = [
    {"name": "local", "kind": "local"},
    {"name": "mock", "kind": "mock", "default": "mock answer", "yes_no": "yes"},
]


@dataclass
class TargetsLookup:
    """Which targets file a command uses, and where it looked (docs/targets.md)."""

    path: Path | None
    looked: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.path is not None:
            return f"targets file: {self.path}"
        return (
            f"no targets.yaml found (looked for {'; '.join(self.looked)}), so only the "
            f"built-in targets exist ({', '.join(t['name'] for t in BUILTIN_TARGETS)}); "
            "pass --targets FILE to use another"
        )


def locate_targets_file(
    explicit: Path | None, eval_dir: Path | None, cwd: Path | None = None
) -> TargetsLookup:
    """The one lookup rule every command uses (docs/targets.md): ``--targets FILE``; else
    ``targets.yaml`` beside the eval file; else ``targets.yaml`` or ``evals/targets.yaml`` in
    the current folder; else ``.evalrun/targets.yaml`` in the current folder or a parent."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"--targets: targets file not found: {explicit}")
        return TargetsLookup(explicit)
    here = cwd or Path()
    candidates = [eval_dir / "targets.yaml"] if eval_dir is not None else []
    candidates += [here / "targets.yaml", here / "evals" / "targets.yaml"]
    candidates = list(dict.fromkeys(candidates))
    for candidate in candidates:
        if candidate.is_file():
            return TargetsLookup(candidate)
    absolute = here.resolve()
    for folder in (absolute, *absolute.parents):
        candidate = folder / ".evalrun" / "targets.yaml"
        if candidate.is_file():
            return TargetsLookup(candidate)
    looked = [str(c) for c in candidates]
    looked.append(f".evalrun/targets.yaml in {absolute} and every parent folder")
    return TargetsLookup(None, looked)


def find_targets_file(
    explicit: Path | None, eval_dir: Path | None, cwd: Path | None = None
) -> Path | None:
    return locate_targets_file(explicit, eval_dir, cwd).path


#: keys every kind accepts beyond the common model's fields (docs/targets.md)
COMMON_EXTRAS: dict[str, Any] = {"cache": bool}


def load_targets(path: Path | None) -> TargetsFile:
    """Load a targets file (or none) and add the built-in targets it does not redefine. The file
    is checked strictly (docs/targets.md): every problem is reported at once as
    ``file:line: key: message``."""
    from evalrun.yamlsource import (
        load_yaml_with_lines,
        validate_keeping_text,
        validation_error_message,
    )

    targets: list[dict[str, Any]] = []
    warnings: list[str] = []
    if path is not None:
        parsed = load_yaml_with_lines(path)
        data = {} if parsed.data is None else parsed.data
        if not isinstance(data, dict):
            raise ConfigError(f"{path}:1: expected a mapping with a 'targets:' list")
        try:
            loaded, warnings = validate_keeping_text(TargetsFile, data, parsed, path)
        except ValidationError as exc:
            raise ConfigError(
                validation_error_message(path, exc, parsed.lines, TargetsFile)
            ) from None
        problems = _problems(loaded, parsed.lines)
        if problems:
            problems.sort(key=lambda item: item[0])
            raise ConfigError("\n".join(f"{path}:{line}: {text}" for line, text in problems))
        targets = [t.model_dump(exclude_unset=True) for t in loaded.targets]
    defined = {t["name"] for t in targets}
    targets += [t for t in BUILTIN_TARGETS if t["name"] not in defined]
    out = TargetsFile.model_validate({"targets": targets})
    out._warnings = warnings
    return out


def _problems(loaded: TargetsFile, lines: LineMap) -> list[tuple[int, str]]:
    """(line, ``key: message``) of each target's unknown or mistyped key, missing required key,
    repeated name, and judge panel that includes itself."""
    from evalrun.suggest import did_you_mean
    from evalrun.targets.registry import kinds
    from evalrun.yamlsource import format_loc, line_for

    problems: list[tuple[int, str]] = []
    first: dict[str, int] = {}
    for i, target in enumerate(loaded.targets):
        here = ("targets", i)
        line = lines.get(here, 0)
        if target.name in first:
            problems.append(
                (
                    line,
                    f"{format_loc((*here, 'name'))}: target '{target.name}' is defined twice "
                    f"(first on line {lines.get(('targets', first[target.name]), 0)})",
                )
            )
        first.setdefault(target.name, i)
        kind = kinds().get(target.kind)
        if kind is None:
            problems.append(
                (
                    line_for(lines, (*here, "kind")) or line,
                    f"{format_loc((*here, 'kind'))}: target '{target.name}' has unknown kind "
                    f"'{target.kind}'"
                    f"{did_you_mean(target.kind, kinds())} (known kinds: {', '.join(kinds())})",
                )
            )
            continue
        own = {**COMMON_EXTRAS, **kind.keys}
        for key, value in (target.model_extra or {}).items():
            at = (line_for(lines, (*here, key)) or line, format_loc((*here, key)))
            if key not in own:
                known = [*TargetConfig.model_fields, *own]
                problems.append(
                    (
                        at[0],
                        f"{at[1]}: unknown key '{key}' for kind {kind.name}"
                        f"{did_you_mean(key, known)}",
                    )
                )
                continue
            try:
                TypeAdapter(own[key]).validate_python(value)
            except ValidationError as exc:
                problems.append((at[0], f"{at[1]}: {exc.errors()[0]['msg']}"))
        problems += [
            (line, f"{format_loc(here)}: target '{target.name}' (kind {kind.name}) needs '{key}'")
            for key in kind.requires
            if getattr(target, key) is None
        ]
    problems += _panel_loops(loaded, lines)
    return problems


def _panel_loops(loaded: TargetsFile, lines: LineMap) -> list[tuple[int, str]]:
    """A judge panel that is its own member, directly or through other panels, would call
    itself for ever (docs/judges.md). Each panel's members are searched once (no path is
    walked twice, however the panels list each other)."""
    from evalrun.yamlsource import format_loc, line_for

    members = {  # members of another type are reported by the check of the kind's keys
        t.name: [m for m in t.extra("members") if isinstance(m, str)]
        if isinstance(t.extra("members"), list)
        else []
        for t in loaded.targets
        if t.kind == "panel"
    }
    problems = []
    for i, target in enumerate(loaded.targets):
        if target.kind != "panel":
            continue
        start = target.name
        came_from: dict[str, str] = {}
        todo = [start]
        while todo:
            name = todo.pop()
            if start in members.get(name, []):
                trail = [name]
                while trail[-1] != start:
                    trail.append(came_from[trail[-1]])
                where = ("targets", i, "members")
                problems.append(
                    (
                        line_for(lines, where) or 0,
                        f"{format_loc(where)}: panel '{start}' includes itself "
                        f"({' -> '.join([*reversed(trail), start])})",
                    )
                )
                break
            for member in members.get(name, []):
                if member not in came_from:
                    came_from[member] = name
                    todo.append(member)
    return problems
