"""The grader kinds: every ``type:`` an eval file may name, how it runs and what it needs.

One table, read by the spec's validation, the launcher's dispatch, the preflight and the list in
docs/eval-files.md (a test keeps that list equal to this one). Adding a kind:
docs/architecture.md, "Adding a grader kind".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``command``: the eval file's own argv; ``check``: a deterministic check in evalrun's process
#: (``evalrun/launcher/deterministic.py``); ``builtin``: a grader of the ``graders`` package;
#: ``unsupported``: loads and validates (AgentV's files name it) but cannot run in evalrun yet:
#: at run time it errors with the kind's ``why`` (docs/eval-files.md, "AgentV files").
Runs = Literal["command", "check", "builtin", "unsupported"]


@dataclass(frozen=True)
class GraderKind:
    type: str
    runs: Runs
    #: keys the grader must set (``schema`` is ``GraderSpec.schema_``)
    requires: tuple[str, ...] = ()
    #: ``builtin``: the module run as ``python -m MODULE``
    module: str | None = None
    #: ``unsupported``: why it cannot run, the reason its results give
    why: str = ""

    @property
    def in_process(self) -> bool:
        """Runs in evalrun's process: no child, no sandbox, no judge."""
        return self.runs in ("check", "unsupported")

    @property
    def always_judged(self) -> bool:
        """Gets a proxy grant (``target: true``) even when the eval file sets no ``target``."""
        return self.runs == "builtin"

    @property
    def default_mode(self) -> Literal["process", "serve"]:
        """Built-in graders serve many cases from one process unless ``mode:`` says otherwise."""
        return "serve" if self.runs == "builtin" else "process"


def _builtin(type_: str) -> GraderKind:
    return GraderKind(type_, "builtin", module="graders." + type_.replace("-", "_"))


KINDS: dict[str, GraderKind] = {
    kind.type: kind
    for kind in (
        GraderKind("script", "command", requires=("command",)),
        _builtin("contextual-precision"),
        _builtin("contextual-recall"),
        _builtin("quality"),
        _builtin("pattern"),
        _builtin("prompt-quality"),
        _builtin("llm-rubric"),
        GraderKind("contains", "check", requires=("value",)),
        GraderKind("icontains", "check", requires=("value",)),
        GraderKind("regex", "check", requires=("value",)),
        GraderKind("equals", "check", requires=("value",)),
        GraderKind("is-json", "check"),
        GraderKind("json-schema", "check", requires=("schema",)),
        GraderKind("contains-all", "check", requires=("value",)),
        GraderKind("icontains-all", "check", requires=("value",)),
        GraderKind("contains-any", "check", requires=("value",)),
        GraderKind("icontains-any", "check", requires=("value",)),
        GraderKind("starts-with", "check", requires=("value",)),
        GraderKind("ends-with", "check", requires=("value",)),
        GraderKind("tool-trajectory", "check"),
        GraderKind("execution-metrics", "check"),
        GraderKind("skill-used", "check"),
        GraderKind("skill-trigger", "check"),
        GraderKind("trajectory:tool-used", "check"),
        GraderKind("trajectory:tool-sequence", "check"),
        GraderKind("trajectory:tool-args-match", "check"),
        GraderKind("trajectory:step-count", "check"),
        GraderKind("field-accuracy", "check"),
        _builtin("task-completion"),
        # AgentV's goal judge: task-completion with the goal as its done-criteria
        GraderKind("trajectory:goal-success", "builtin", module="graders.task_completion"),
        GraderKind(
            "assert-set",
            "unsupported",
            why="'assert-set' combines its own graders into one score; evalrun runs graders "
            "side by side only, so it cannot run this one: list its graders directly instead",
        ),
    )
}

#: Other spellings of a type (``_`` for ``-`` is accepted everywhere).
ALIASES = {"code-grader": "script", "code-judge": "script", "composite": "assert-set"}
#: checks that read their options from ``config``: an AgentV file's own keys on them go there
#: (docs/eval-files.md, "AgentV files"), like those of the ``unsupported`` kinds
CONFIG_OPTIONS = (
    "tool-trajectory",
    "execution-metrics",
    "skill-used",
    "skill-trigger",
    "trajectory:tool-used",
    "trajectory:tool-sequence",
    "trajectory:tool-args-match",
    "field-accuracy",
    "trajectory:step-count",
    "trajectory:goal-success",
)


def normalize_type(value: str) -> str:
    """The table's name for ``value``; ValueError naming every known type if there is none."""
    normalized = value.replace("_", "-")
    normalized = ALIASES.get(normalized, normalized)
    if normalized not in KINDS:
        raise ValueError(f"unknown grader type '{value}' (known: {', '.join(KINDS)})")
    return normalized


def types(runs: Runs) -> tuple[str, ...]:
    """The types that run one way, in table order."""
    return tuple(k.type for k in KINDS.values() if k.runs == runs)
