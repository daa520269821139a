"""AgentV's workspace keys mapped onto evalrun's ``workspace:`` (docs/agents.md, "AgentV's
workspace keys"), before validation, so errors still name their line.

Two spellings: AgentV 4.x's ``workspace:`` (``template``, ``repos``, ``hooks``, ``isolation``,
``docker``, ``env``; or a path to a YAML file holding them) and AgentV's current
``environment:`` (``type: host`` with ``workdir`` and ``setup``, or ``type: docker``; inline or
``file://``). Both may sit on the suite or on a test. What cannot be done offline (a remote
repository, a container) goes to the workspace's ``unsupported`` with a load warning, and a case
that would need it is an error when it runs, never a case run in a different workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalrun.spec.agentv import Notes
from evalrun.spec.agentv_extensions import map_extensions
from evalrun.spec.agentv_extras import AgentVProblem
from evalrun.yamlsource import LineMap, SourceError, load_yaml_with_lines

#: keys only AgentV's ``workspace:`` has: with any of them, a repo entry with ``repo`` (evalrun's
#: say ``source``), or as a file path, the value is AgentV's spelling, else evalrun's own (the
#: two share ``template`` and ``repos``)
AGENTV_ONLY = ("hooks", "isolation", "docker", "env")
_HOOKS_SETUP = ("before_all", "before_each")
_HOOKS_TEARDOWN = ("after_each", "after_all")


def is_agentv_workspace(value: Any) -> bool:
    """Whether a ``workspace:`` value is in AgentV's spelling (and marks an AgentV file)."""
    if isinstance(value, str):
        return True
    if not isinstance(value, dict):
        return False
    repos = value.get("repos")
    agentv_repo = isinstance(repos, list) and any(
        isinstance(r, dict) and "repo" in r for r in repos
    )
    return agentv_repo or any(key in value for key in AGENTV_ONLY)


def map_workspaces(data: Any, folder: Path, warnings: Notes, lines: LineMap) -> None:
    """Rewrite the suite's and each test's AgentV workspace keys in place. A value that cannot
    be mapped raises ``AgentVProblem`` at its key; what loads but cannot run is a warning.
    ``lines`` learns where the new keys came from, so later errors name the recipe's line."""
    if not isinstance(data, dict):
        return
    _map_one(data, (), folder, warnings, lines)
    tests = data.get("tests")
    if isinstance(tests, list):
        for i, case in enumerate(tests):
            if isinstance(case, dict):
                _map_one(case, ("tests", i), folder, warnings, lines)
    map_extensions(data, folder, warnings)


def _map_one(
    holder: dict[str, Any], at: tuple[Any, ...], folder: Path, warnings: Notes, lines: LineMap
) -> None:
    env, ws = holder.get("environment"), holder.get("workspace")
    if env is not None and ws is not None:
        raise AgentVProblem((*at, "environment"), "give 'environment' or 'workspace', not both")
    if env is not None:
        holder["workspace"] = _from_environment(holder.pop("environment"), at, folder, warnings)
        for new, old in (((), ()), (("template",), ("workdir",)), (("setup",), ("setup",))):
            line = lines.get((*at, "environment", *old)) or lines.get((*at, "environment"))
            if line is not None:
                lines.setdefault((*at, "workspace", *new), line)
    elif is_agentv_workspace(ws):
        holder["workspace"] = _from_workspace(ws, (*at, "workspace"), folder, warnings)


def _read_reference(value: str, at: tuple[Any, ...], folder: Path) -> tuple[Any, Path]:
    file = (folder / value.removeprefix("file://")).resolve()
    try:
        return load_yaml_with_lines(file).data, file.parent
    except SourceError as exc:
        raise AgentVProblem(at, f"cannot read {value}: {exc}") from None
    except OSError as exc:
        raise AgentVProblem(at, f"cannot read {value}: {exc.strerror or exc}") from None


def _from_environment(
    value: Any, at: tuple[Any, ...], folder: Path, warnings: Notes
) -> dict[str, Any]:
    """AgentV's ``environment:`` recipe: ``workdir`` is copied as the template (AgentV works
    in that folder itself; evalrun gives each case a copy), ``setup`` runs in the copy."""
    where = (*at, "environment")
    base = folder
    if isinstance(value, str):
        value, base = _read_reference(value, where, folder)
    if not isinstance(value, dict) or value.get("type") not in ("host", "docker"):
        raise AgentVProblem(where, "an environment is a mapping with type: host or docker")
    out: dict[str, Any] = {}
    if value["type"] == "docker":
        reason = "a docker environment: evalrun runs no containers"
        warnings.append((where, f"{reason}; its cases will be errors"))
        return {"unsupported": [reason]}
    workdir = value.get("workdir")
    if not isinstance(workdir, str):
        raise AgentVProblem((*where, "workdir"), "a host environment needs 'workdir' (a folder)")
    folder_of = (base / workdir).resolve()
    if not folder_of.is_dir() and value.get("setup") is not None:
        reason = (
            f"workdir {workdir} is made by the setup in place (evalrun copies an existing "
            "folder into each case's workspace)"
        )
        warnings.append(((*where, "workdir"), f"{reason}; its cases will be errors"))
        return {"unsupported": [reason]}
    out["template"] = str(folder_of)
    setup = value.get("setup")
    if setup is not None:
        out["setup"] = [_script(setup, (*where, "setup"), None)]
    if value.get("env"):
        warnings.append(((*where, "env"), "not set for the agent or the scripts (not supported)"))
    return out


def _from_workspace(
    value: Any, at: tuple[Any, ...], folder: Path, warnings: Notes
) -> dict[str, Any]:
    """AgentV 4.x's ``workspace:``. Its hooks run where AgentV runs them by default (the eval's
    folder, or the workspace file's), before_all and before_each in every case's fresh
    workspace, since evalrun shares none between cases."""
    base = folder
    if isinstance(value, str):
        value, base = _read_reference(value, at, folder)
        if not isinstance(value, dict):
            raise AgentVProblem(at, "the workspace file must hold a mapping")
    out: dict[str, Any] = {}
    unsupported: list[str] = []
    template = value.get("template")
    if isinstance(template, str):
        path = (base / template).resolve()
        out["template"] = str(path.parent if path.suffix == ".code-workspace" else path)
    if value.get("isolation") == "shared":
        warnings.append(
            ((*at, "isolation"), "every case gets a fresh workspace in evalrun (per_case)")
        )
    repos = []
    for i, repo in enumerate(value.get("repos") or []):
        mapped = _repo(repo, (*at, "repos", i), base, warnings)
        if isinstance(mapped, str):
            unsupported.append(mapped)
        else:
            repos.append(mapped)
    if repos:
        out["repos"] = repos
    if value.get("docker") is not None:
        reason = "a docker workspace: evalrun runs no containers"
        warnings.append(((*at, "docker"), f"{reason}; its cases will be errors"))
        unsupported.append(reason)
    env = value.get("env") or {}
    if isinstance(env, dict):
        out["required_commands"] = list(env.get("required_commands") or [])
        if env.get("required_python_modules"):
            warnings.append(
                ((*at, "env", "required_python_modules"), "not checked (not supported)")
            )
    hooks = value.get("hooks") or {}
    if isinstance(hooks, dict) and hooks.get("enabled", True) is not False:
        for group, names in (("setup", _HOOKS_SETUP), ("teardown", _HOOKS_TEARDOWN)):
            scripts = []
            for name in names:
                hook = hooks.get(name)
                if isinstance(hook, dict) and hook.get("reset") not in (None, "none"):
                    warnings.append(
                        ((*at, "hooks", name, "reset"), "ignored: every case's workspace is fresh")
                    )
                if isinstance(hook, dict) and hook.get("command") is not None:
                    scripts.append(_script(hook, (*at, "hooks", name), str(base)))
            if scripts:
                out[group] = scripts
    if unsupported:
        out["unsupported"] = unsupported
    return out


def _repo(repo: Any, at: tuple[Any, ...], base: Path, warnings: Notes) -> dict[str, Any] | str:
    """A local repository as evalrun's repo entry; a remote one as the reason it cannot be."""
    if not isinstance(repo, dict) or not isinstance(repo.get("repo"), str):
        raise AgentVProblem(at, "a repo entry needs 'repo' (evalrun clones local repositories)")
    source = repo["repo"]
    local = source.removeprefix("file://")
    if "://" in local or local.startswith("git@") or not (base / local).exists():
        reason = f"repository {source} is not on this machine (evalrun clones no remote repository)"
        warnings.append(((*at, "repo"), f"{reason}; its cases will be errors"))
        return reason
    ref = str(repo.get("commit") or repo.get("base_commit") or "HEAD")
    if repo.get("ancestor"):
        ref = f"{ref}~{int(repo['ancestor'])}"
    if repo.get("sparse"):
        warnings.append(((*at, "sparse"), "ignored: the whole tree is checked out"))
    return {"source": str((base / local).resolve()), "ref": ref, "into": repo.get("path") or "."}


def _script(hook: Any, at: tuple[Any, ...], cwd: str | None) -> dict[str, Any]:
    """A hook or setup block as a workspace script: ``timeout_ms`` in seconds; ``cwd`` kept
    as AgentV reads it (relative to ``cwd``'s base), else ``cwd``."""
    if not isinstance(hook, dict):
        raise AgentVProblem(at, "a hook is a mapping with 'command'")
    out: dict[str, Any] = {"command": hook.get("command")}
    timeout_ms = hook.get("timeout_ms", hook.get("timeoutMs"))
    if isinstance(timeout_ms, (int, float)) and timeout_ms > 0:
        out["timeout"] = timeout_ms / 1000
    own = hook.get("cwd")
    if isinstance(own, str) and cwd is not None:
        out["cwd"] = str((Path(cwd) / own).resolve())
    elif isinstance(own, str) and own not in (".", "./"):
        out["cwd"] = own
    elif cwd is not None:
        out["cwd"] = cwd
    return out
