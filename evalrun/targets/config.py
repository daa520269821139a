"""``targets.yaml``: the named targets a run may use, and where that file is found."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

_ENV_REF = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class ConfigError(Exception):
    """A configuration problem the user must fix; the CLI exits 2 on it."""


class UnknownTarget(ConfigError):
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

    def get(self, name: str) -> TargetConfig:
        for target in self.targets:
            if target.name == name:
                return target
        raise UnknownTarget(name, self.names)

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
    {"name": "mock", "kind": "mock", "default": "mock answer"},
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


def load_targets(path: Path | None) -> TargetsFile:
    """Load a targets file (or none) and add the built-in targets it does not redefine."""
    from evalrun.targets.registry import kind_of  # the registry reads this module's types
    from evalrun.yamlsource import load_yaml_with_lines, validation_error_message

    targets: list[dict[str, Any]] = []
    if path is not None:
        data, lines = load_yaml_with_lines(path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping with a 'targets:' list")
        try:
            parsed = TargetsFile.model_validate(data)
        except Exception as exc:  # pydantic.ValidationError
            raise ConfigError(validation_error_message(path, exc, lines, TargetsFile)) from None
        for target in parsed.targets:
            try:
                kind_of(target)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
        targets = [t.model_dump(exclude_unset=True) for t in parsed.targets]
    defined = {t["name"] for t in targets}
    targets += [t for t in BUILTIN_TARGETS if t["name"] not in defined]
    return TargetsFile.model_validate({"targets": targets})
