"""AgentV's ``extensions`` mapped onto the suite's workspace (docs/agents.md, "AgentV's
workspace keys").

AgentV imports a ``file://module.mjs:hook`` extension into its own process and calls the
function with the case's context. evalrun runs it as a workspace script instead: Node imports
the module and calls the same function with the same context, so the workspace the agent gets
is the one the extension makes. ``agentv:agent-rules`` hands rule paths to AgentV's own agent
providers; a ``cli`` agent is told nothing, so only the copies it makes would change the
workspace, and those evalrun cannot make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalrun.spec.agentv import Notes

_BEFORE = ("beforeAll", "beforeEach")
_AFTER = ("afterEach", "afterAll")
_AGENT_RULES = "agentv:agent-rules"
_AGENT_RULES_PATHS = ("skills", "hooks", "agents", "rules")
#: module types Node imports as they are
_NODE_MODULES = (".mjs", ".js", ".cjs")
#: Node's side of a file extension: argv is the module, the hook, the eval file's folder; stdin
#: the workspace script's context (AgentV's names), to which AgentV's extension context adds
#: ``hook_name`` and ``eval_dir``
NODE_CALL = """\
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [file, hook, evalDir] = process.argv.slice(1);
const context = { ...JSON.parse(readFileSync(0, 'utf8')), hook_name: hook, eval_dir: evalDir };
const module = await import(pathToFileURL(file).href);
const call = module[hook] ?? module.default?.[hook];
if (typeof call !== 'function') {
  console.error(`extension ${file} does not export ${hook}`);
  process.exit(1);
}
await call(context, { hookName: hook });
"""


def map_extensions(data: dict[str, Any], folder: Path, warnings: Notes) -> None:
    """Add the suite's file extensions to its workspace's setup (before the agent) and
    teardown (after it). One evalrun cannot run makes the workspace unsupported, so its cases
    are errors rather than cases run in another workspace than AgentV's."""
    entries = data.get("extensions")
    if not isinstance(entries, list):
        return
    workspace = data.get("workspace")
    for i, entry in enumerate(entries):
        at = ("extensions", i)
        if _agent_rules(entry):
            if isinstance(entry, dict) and any(entry.get(k) for k in _AGENT_RULES_PATHS):
                _unsupported(data, at, f"{_AGENT_RULES} copies rule files in", warnings)
            else:
                warnings.append((at, f"{_AGENT_RULES}: no target is told the rule paths"))
            continue
        module, hook = _file_extension(entry)
        if module is None:
            continue
        path = (folder / module).resolve()
        if not isinstance(workspace, dict):
            warnings.append(
                (at, f"extension {module} ({hook}) not run: the suite has no workspace")
            )
        elif path.suffix not in _NODE_MODULES:
            _unsupported(data, at, f"extension {module} is not a module Node runs", warnings)
        else:
            group = "setup" if hook in _BEFORE else "teardown"
            command = [
                "node",
                "--input-type=module",
                "-e",
                NODE_CALL,
                str(path),
                hook,
                str(folder.resolve()),
            ]
            workspace[group] = [*_scripts(workspace.get(group)), {"command": command}]
            commands = workspace.get("required_commands") or []
            workspace["required_commands"] = [
                *commands,
                *(["node"] if "node" not in commands else []),
            ]


def _agent_rules(entry: Any) -> bool:
    if isinstance(entry, dict):
        return entry.get("id") == _AGENT_RULES
    return isinstance(entry, str) and entry.split(":", 2)[:2] == _AGENT_RULES.split(":")


def _file_extension(entry: Any) -> tuple[str | None, str]:
    """A ``file://path:hook`` extension's path and hook; (None, "") for anything else (AgentV's
    own loader refuses those)."""
    if not isinstance(entry, str) or not entry.startswith("file://"):
        return None, ""
    module, _, hook = entry.removeprefix("file://").rpartition(":")
    return (module, hook) if module and hook in (*_BEFORE, *_AFTER) else (None, "")


def _scripts(value: Any) -> list[Any]:
    return [value] if isinstance(value, dict) else list(value or [])


def _unsupported(data: dict[str, Any], at: tuple[Any, ...], reason: str, warnings: Notes) -> None:
    warnings.append((at, f"{reason}; its cases will be errors"))
    workspace = data.get("workspace")
    if not isinstance(workspace, dict):
        workspace = data["workspace"] = {}
    workspace["unsupported"] = [*workspace.get("unsupported", []), reason]
