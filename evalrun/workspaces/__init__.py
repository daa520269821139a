"""Per-case workspaces for agents (docs/agents.md, "Workspaces"): the folder made from a
template or a local git repository, its setup and teardown scripts, and what changed in it."""

from evalrun.workspaces.lifecycle import CaseWorkspace, FinalWorkspace
from evalrun.workspaces.making import WorkspaceError
from evalrun.workspaces.scripts import ScriptContext, ScriptLaunch

__all__ = ["CaseWorkspace", "FinalWorkspace", "ScriptContext", "ScriptLaunch", "WorkspaceError"]
