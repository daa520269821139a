"""``targets.yaml``: the named targets a run may use, and where that file is found."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

KINDS = ("openai", "azure", "anthropic", "gemini", "cli", "mock", "local")

_ENV_REF = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


class ConfigError(Exception):
    """A configuration problem the user must fix; the CLI exits 2 on it."""


class MockRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    match: str | None = None
    task: str | None = None
    response: str


class Price(BaseModel):
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0


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
    max_concurrency: int = 8
    max_retries: int = 3
    price: Price | None = None
    # mock
    default: str | None = None
    rules: list[MockRule] = Field(default_factory=list)
    latency_ms: float = 0.0

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
        known = ", ".join(t.name for t in self.targets) or "none"
        raise ConfigError(f"unknown target '{name}' (configured: {known})")

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.targets]


#: Targets that exist without any targets.yaml, so a fresh checkout can run offline.
BUILTIN_TARGETS: list[dict[str, Any]] = [
    {"name": "local", "kind": "local"},
    {"name": "mock", "kind": "mock", "default": "mock answer"},
]


def find_targets_file(
    explicit: Path | None, eval_dir: Path | None, cwd: Path | None = None
) -> Path | None:
    """``--targets``, then beside the eval file, then ``.evalrun/targets.yaml`` upward from cwd."""
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"targets file not found: {explicit}")
        return explicit
    if eval_dir is not None:
        beside = eval_dir / "targets.yaml"
        if beside.is_file():
            return beside
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / ".evalrun" / "targets.yaml"
        if candidate.is_file():
            return candidate
    return None


def load_targets(path: Path | None) -> TargetsFile:
    """Load a targets file (or none) and add the built-in targets it does not redefine."""
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
            if target.kind not in KINDS:
                raise ConfigError(
                    f"{path}: target '{target.name}' has unknown kind '{target.kind}' "
                    f"(known kinds: {', '.join(KINDS)})"
                )
        targets = [t.model_dump(exclude_unset=True) for t in parsed.targets]
    defined = {t["name"] for t in targets}
    targets += [t for t in BUILTIN_TARGETS if t["name"] not in defined]
    return TargetsFile.model_validate({"targets": targets})
