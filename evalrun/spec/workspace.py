"""The ``workspace:`` key of an eval file and of a test (docs/agents.md, "Workspaces"): the
folder an agent works in for one case, what it is made from, and the scripts around it."""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: a setup script's timeout unless it sets one (seconds; AgentV's default for its setup hooks)
SETUP_TIMEOUT_S = 60.0
#: a teardown script's (AgentV's default for its teardown hooks)
TEARDOWN_TIMEOUT_S = 30.0


class WorkspaceScript(BaseModel):
    """A setup or teardown script: an argv run without a shell (docs/agents.md)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | str
    #: seconds; unset: 60 for setup, 30 for teardown
    timeout: float | None = Field(None, gt=0)
    #: relative to the eval file's folder; unset: the workspace
    cwd: str | None = None

    @field_validator("command")
    @classmethod
    def _argv_splits(cls, value: list[str] | str) -> list[str] | str:
        argv = _split(value)
        if not argv:
            raise ValueError("a script needs a non-empty 'command' (an argv list)")
        return value

    @property
    def argv(self) -> list[str]:
        return _split(self.command)


def _split(command: list[str] | str) -> list[str]:
    if isinstance(command, list):
        return [str(part) for part in command]
    try:
        return shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"cannot split the command into arguments: {exc}") from None


class RepoSource(BaseModel):
    """A local git repository checked out at ``ref`` (no network: a path, never a URL)."""

    model_config = ConfigDict(extra="forbid")

    #: the repository's folder (or a bare repository), relative to the eval file's folder
    source: str
    #: a commit, branch or tag of it
    ref: str = "HEAD"
    #: where in the workspace it goes (``.``: the workspace itself)
    into: str = "."

    @field_validator("source")
    @classmethod
    def _local(cls, value: str) -> str:
        if "://" in value and not value.startswith("file://"):
            raise ValueError(
                f"{value!r} is a remote repository: evalrun works offline and clones only "
                "local repositories (a folder path or file:// URL)"
            )
        return value.removeprefix("file://")


class WorkspaceSpec(BaseModel):
    """What a case's workspace is made from. Every key of a test's ``workspace:`` replaces the
    suite's key of the same name."""

    model_config = ConfigDict(extra="forbid")

    #: a folder copied into the workspace, relative to the eval file's folder
    template: str | None = None
    #: local git repositories cloned into it, after the template
    repos: list[RepoSource] = Field(default_factory=list)
    #: run in order in the fresh workspace before the agent; a failure is the case's error
    setup: list[WorkspaceScript] = Field(default_factory=list)
    #: run in order after the graders, always (also after a failed setup or agent)
    teardown: list[WorkspaceScript] = Field(default_factory=list)
    #: the agent's sandbox (docs/agents.md, "The agent's sandbox")
    sandbox: Literal["strict", "process", "none"] = "strict"
    #: programs that must be on PATH before setup runs (AgentV's ``env.required_commands``)
    required_commands: list[str] = Field(default_factory=list)
    #: what an AgentV file asks of its workspace that evalrun cannot do offline (a remote
    #: repository, a container), set when AgentV's keys are mapped: such a case is an error
    unsupported: list[str] = Field(default_factory=list)

    @field_validator("setup", "teardown", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value


def merged(suite: WorkspaceSpec | None, test: WorkspaceSpec | None) -> WorkspaceSpec | None:
    """The workspace a test gets: the suite's, with the keys the test sets replaced."""
    if test is None or suite is None:
        return test or suite
    return suite.model_copy(update={key: getattr(test, key) for key in test.model_fields_set})
