"""A case's tools, from the eval file's ``tools:`` and ``max_turns:`` to the target's tool loop
(docs/agents.md, "Model targets with tools")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from evalrun.launcher.environment import grader_environment, own_python
from evalrun.launcher.sandbox import Level, script_wrap
from evalrun.runner.plan import RunPlan
from evalrun.spec.models import TestCase
from evalrun.spec.tools import DEFAULT_MAX_TURNS, ToolChoice, ToolSpec, choice_wire, tools_for
from evalrun.targets import MockedResult, MockTool, Toolbox


@dataclass(frozen=True)
class ToolUse:
    toolbox: Toolbox
    max_turns: int


def tool_use_for(plan: RunPlan, case: TestCase, masked: Sequence[Path]) -> ToolUse | None:
    """The case's toolbox and turn cap, or None when it offers no tools (one plain call).
    Tool scripts run from the eval file's folder, with a grader's environment (the run's
    secrets left out, docs/security.md), in the run's sandbox with ``masked`` hidden."""
    spec = plan.loaded.spec
    tools = tools_for(spec.tools, case.tools)
    if not tools:
        return None
    names = plan.pool.secret_env_names()
    choice = case.tool_choice or spec.tool_choice
    box = toolbox(tools, plan.loaded.folder, names, plan.sandbox.default, masked, choice)
    return ToolUse(box, case.max_turns or spec.max_turns or DEFAULT_MAX_TURNS)


def toolbox(
    tools: list[ToolSpec],
    folder: Path,
    secret_names: Iterable[str],
    level: Level = "none",
    masked: Sequence[Path] = (),
    choice: ToolChoice = None,
) -> Toolbox:
    """The tools as the target's loop runs them, their scripts started in ``folder``, each in
    a sandbox of ``level`` where it may write nothing but its private ``/tmp``."""
    cwd = folder.resolve()
    return Toolbox(
        tools=tuple(_mock_tool(tool) for tool in tools),
        cwd=cwd,
        env=grader_environment(secret_names=secret_names),
        wrap=partial(_wrapped, level, cwd, tuple(masked)),
        choice=choice_wire(choice),
    )


def _wrapped(level: Level, cwd: Path, masked: tuple[Path, ...], argv: Sequence[str]) -> list[str]:
    return script_wrap(level, argv, cwd, masked)


def _mock_tool(tool: ToolSpec) -> MockTool:
    argv = tool.argv
    return MockTool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters or {"type": "object", "properties": {}},
        results=tuple(
            MockedResult(entry.result, entry.arguments, entry.is_error) for entry in tool.results
        ),
        fallback=MockedResult(tool.result) if tool.has_result else None,
        command=tuple(own_python(argv)) if argv is not None else None,
        timeout=tool.timeout,
    )
