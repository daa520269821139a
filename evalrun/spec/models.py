"""The eval-file format (docs/eval-files.md) as pydantic models; ``evalrun schema`` is generated here."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from evalrun.spec.kinds import KINDS, GraderKind, normalize_type
from evalrun.spec.tools import MaxTurns, ToolChoice, Tools
from evalrun.spec.workspace import WorkspaceSpec
from evalrun.transcripts.options import option_problem


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="allow")

    tool: str
    input: Any = None
    output: Any = None
    id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _accept_openai_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "tool" not in data and "name" in data:
            data = {**data, "tool": data["name"]}
            data.pop("name")
        return data


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str = "user"
    content: Any = None
    tool_calls: list[ToolCall] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _accept_camel_case(cls, data: Any) -> Any:
        if isinstance(data, dict) and "toolCalls" in data and "tool_calls" not in data:
            data = {**data, "tool_calls": data["toolCalls"]}
            data.pop("toolCalls")
        return data

    def text(self) -> str:
        """The message's text content (content parts joined)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            parts = []
            for part in self.content:
                if isinstance(part, str):
                    parts.append(part)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif (
                    isinstance(part, dict)
                    and part.get("type") == "text"
                    and isinstance(part.get("value"), str)
                ):
                    parts.append(part["value"])  # AgentV's text part
            return "\n".join(parts)
        return str(self.content)


class TargetAccess(BaseModel):
    """A grader's access to the judge proxy."""

    model_config = ConfigDict(extra="forbid")

    max_calls: int = Field(50, ge=0)
    allow: list[str] | None = None


class GraderSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    type: str = "script"
    command: list[str] | str | None = None
    target: TargetAccess | bool | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    weight: float = Field(1.0, ge=0)
    threshold: float = Field(0.5, ge=0, le=1)
    timeout: float = Field(120.0, gt=0)
    cwd: str | None = None
    env: list[str] = Field(default_factory=list)
    #: overrides the run's ``--sandbox`` for this grader (docs/security.md)
    sandbox: Literal["auto", "none", "process", "strict"] | None = None
    #: ``process``: one process per case; ``serve``: long-lived processes, one case per line
    #: (docs/grader-protocol.md). Unset: ``serve`` for the built-in graders, else ``process``.
    mode: Literal["process", "serve"] | None = None
    # deterministic graders: `value` is text (docs/eval-files.md, "YAML values")
    value: str | list[str] | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    negate: bool = False
    #: AgentV's ``required: true``: under its threshold (0.8 when unset) the case scores 0. Read
    #: in AgentV files only (docs/eval-files.md, "AgentV's scoring rule")
    required: bool = False
    #: AgentV's ``assert-set``: the graders it combines (validated; not run, see kinds.py)
    graders: list[GraderSpec] = Field(default_factory=list)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        return normalize_type(value)

    @field_validator("command")
    @classmethod
    def _splits(cls, value: list[str] | str | None) -> list[str] | str | None:
        """A command written as one string must split into arguments (``argv``)."""
        if isinstance(value, str):
            import shlex

            try:
                shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"cannot split the command into arguments: {exc}") from None
        return value

    @field_validator("value")
    @classmethod
    def _regex_compiles(cls, value: Any, info: ValidationInfo) -> Any:
        """A pattern that does not compile is refused here, not at every case of the run."""
        if info.data.get("type") == "regex" and value is not None:
            try:
                re.compile(str(value))
            except re.error as exc:
                raise ValueError(f"invalid regex {str(value)!r}: {exc}") from None
        return value

    @field_validator("schema_")
    @classmethod
    def _schema_usable(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """The schema is checked against its own draft's meta-schema (docs/eval-files.md)."""
        if value is not None:
            from evalrun.spec.jsonschema_check import schema_problem  # slow import: only here

            problem = schema_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check_required(self) -> GraderSpec:
        given = {"command": self.command, "value": self.value, "schema": self.schema_}
        for key in self.kind.requires:
            if key == "command" and not given[key]:
                raise ValueError("a script grader needs 'command' (an argv list)")
            if given[key] is None:
                raise ValueError(f"a '{self.type}' grader needs '{key}'")
        if self.name is None:
            self.name = self.type if self.kind.runs != "command" else _command_name(self.command)
        problem = option_problem(self.type, self.value, self.config, self.negate)
        if problem is not None:
            raise ValueError(problem)  # an agent check's options (docs/agents.md)
        return self

    @property
    def kind(self) -> GraderKind:
        """How this grader runs (docs/architecture.md, "Adding a grader kind")."""
        return KINDS[self.type]

    @property
    def access(self) -> TargetAccess | None:
        """The proxy access this grader gets, or None: what it asked for, and ``target: true``
        for the built-in graders that set none."""
        if isinstance(self.target, TargetAccess):
            return self.target
        if self.target is True or self.kind.always_judged:
            return TargetAccess()
        return None

    @property
    def needs_judge(self) -> bool:
        """The run must have a judge target for this grader."""
        return self.access is not None

    @property
    def run_mode(self) -> Literal["process", "serve"]:
        """``mode:``, else the kind's default."""
        return self.mode or self.kind.default_mode

    @property
    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            import shlex

            return shlex.split(self.command)
        return list(self.command or [])


def _command_name(command: list[str] | str | None) -> str:
    argv = command.split() if isinstance(command, str) else list(command or [])
    for part in reversed(argv):
        if not part.startswith("-"):
            return part.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "grader"
    return "grader"


Conversation = str | list[Message]


class Turn(BaseModel):
    """One user turn of a multi-turn test: what the user says, and what grades the target's
    reply to it (docs/agents.md, "Multi-turn conversations")."""

    model_config = ConfigDict(extra="forbid")

    input: Conversation
    expected_output: Conversation | None = None
    graders: list[GraderSpec] = Field(default_factory=list)

    @field_validator("input")
    @classmethod
    def _says_something(cls, value: Conversation) -> Conversation:
        if not as_messages(value, "user") or (isinstance(value, str) and not value.strip()):
            raise ValueError("each turn needs a non-empty input")
        return value

    @property
    def input_messages(self) -> list[Message]:
        return as_messages(self.input, "user")

    @property
    def expected_messages(self) -> list[Message]:
        return as_messages(self.expected_output, "assistant")


class SimulatedUser(BaseModel):
    """A judge-driven user who writes the next user turns after the scripted ones, in character,
    until it says ``stop`` or has written ``max_turns`` (docs/agents.md, "A simulated user")."""

    model_config = ConfigDict(extra="forbid")

    instructions: str = Field(min_length=1)
    max_turns: int = Field(5, ge=1, le=50)
    stop: str = Field("DONE", min_length=1)


class TestCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest class

    id: str
    #: the prompt variant this test is: tests that share an id and differ in it are one row
    #: of the matrix, a column per variant (docs/eval-files.md, "Prompt variants")
    prompt: str | None = Field(None, min_length=1)
    criteria: str | None = None
    input: Conversation
    expected_output: Conversation | None = None
    output: Conversation | None = None
    input_files: list[str] = Field(default_factory=list)
    graders: list[GraderSpec] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: the verdicts a person gave, for ``evalrun calibrate`` (docs/judges.md)
    labels: dict[str, Any] = Field(default_factory=dict)
    #: a multi-turn conversation: the target answers turn by turn, and how the turns' scores
    #: make the case's (docs/agents.md, "Multi-turn conversations")
    turns: list[Turn] | None = Field(None, min_length=1)
    aggregation: Literal["mean", "min", "max"] | None = None
    on_turn_failure: Literal["continue", "stop"] | None = None
    window_size: int | None = Field(None, ge=1)
    simulated_user: SimulatedUser | None = None
    #: tools offered to a model target, with their mocked results (docs/agents.md)
    tools: Tools = Field(default_factory=list)
    max_turns: MaxTurns = None
    tool_choice: ToolChoice = None
    #: this test's workspace keys, over the suite's (docs/agents.md, "Workspaces")
    workspace: WorkspaceSpec | None = None
    #: Where the case is in its file: the line it starts on and its index among the tests
    #: (set by the loader; not keys of the file).
    _line: int | None = PrivateAttr(default=None)
    _index: int = PrivateAttr(default=0)

    @model_validator(mode="before")
    @classmethod
    def _conversation_input(cls, data: Any) -> Any:
        """A multi-turn test's turns carry what the user says: its ``input`` (a system prompt,
        context) may be left out."""
        if (
            isinstance(data, dict)
            and "input" not in data
            and (data.get("turns") is not None or data.get("simulated_user") is not None)
        ):
            data = {**data, "input": []}
        return data

    @model_validator(mode="after")
    def _conversation_keys_need_turns(self) -> TestCase:
        if not self.multi_turn:
            for key in ("aggregation", "on_turn_failure", "window_size"):
                if getattr(self, key) is not None:
                    raise ValueError(f"'{key}' needs 'turns' (a multi-turn test)")
        elif self.expected_output is not None or self.output is not None:
            key = "expected_output" if self.expected_output is not None else "output"
            raise ValueError(f"a multi-turn test takes no '{key}': give each turn its own")
        return self

    @property
    def multi_turn(self) -> bool:
        """Scripted turns, a simulated user, or both: the target answers turn by turn."""
        return self.turns is not None or self.simulated_user is not None

    @property
    def line(self) -> int | None:
        return self._line

    @property
    def index(self) -> int:
        return self._index

    @property
    def input_messages(self) -> list[Message]:
        return as_messages(self.input, "user")

    @property
    def expected_messages(self) -> list[Message]:
        return as_messages(self.expected_output, "assistant")

    @property
    def turn_graders(self) -> list[tuple[int, int, GraderSpec]]:
        """Each turn's graders as (turn index, grader index, grader): checked before a run
        like the test's own."""
        return [(i, j, g) for i, t in enumerate(self.turns or ()) for j, g in enumerate(t.graders)]


#: ``columns:`` of a CSV or dataset source: a test key -> the column it is read from
#: (docs/datasets.md); every test key may be given, nothing else.
Columns = create_model(  # type: ignore[call-overload]
    "Columns",
    __config__=ConfigDict(extra="forbid"),
    **{name: (str | None, None) for name in TestCase.model_fields},
)


class TestsFrom(BaseModel):
    """``tests: {from: data.csv, columns: {input: question}}`` (docs/datasets.md)."""

    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest class

    from_: str = Field(alias="from")
    columns: Columns | None = None  # type: ignore[valid-type]

    def mapping(self) -> dict[str, str] | None:
        """Test key -> column, or None when every column is read as the key of its name."""
        if self.columns is None:
            return None
        return {key: column for key, column in self.columns if column is not None}


def _tests_form(value: Any) -> str:
    """The one form a ``tests:`` value is checked as, so an error speaks of that form only."""
    if isinstance(value, str):
        return "str"
    return "TestsFrom" if isinstance(value, dict) else "list[TestCase]"


#: the tests, or where they come from: a tests file or a dataset, with or without ``columns:``
Tests = Annotated[
    Annotated[list[TestCase], Tag("list[TestCase]")]
    | Annotated[str, Tag("str")]
    | Annotated[TestsFrom, Tag("TestsFrom")],
    Discriminator(_tests_form),
]


class EvalFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    target: str | None = None
    #: several targets, one matrix column each, in one run (docs/results.md, "A matrix run")
    targets: list[str] | None = Field(None, min_length=1)
    #: a target name, or a list of them: a judge panel (docs/judges.md)
    judge: str | list[str] | None = None
    rubric: str | None = None
    graders: list[GraderSpec] = Field(default_factory=list)
    tests: Tests
    #: tools offered to a model target in every test, and the tool loop's cap (docs/agents.md)
    tools: Tools = Field(default_factory=list)
    max_turns: MaxTurns = None
    tool_choice: ToolChoice = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # AgentV's suite keys, kept as they are; none changes what a run does
    # (docs/eval-files.md, "AgentV files" says why each is ignored), but ``workspace``.
    name: str | None = None
    version: str | int | float | None = None
    tags: list[str] = Field(default_factory=list)
    governance: dict[str, Any] = Field(default_factory=dict)
    #: every case's workspace (docs/agents.md, "Workspaces"); AgentV's ``workspace`` and
    #: ``environment`` are mapped onto it (agentv_workspace.py)
    workspace: WorkspaceSpec | None = None
    extensions: Any = None
    evaluate_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("targets")
    @classmethod
    def _one_target_key(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is not None and info.data.get("target") is not None:
            raise ValueError("give 'target' or 'targets', not both")
        if value is not None and len(set(value)) != len(value):
            raise ValueError("each target once: a matrix has one column per target")
        return value


def as_messages(value: Conversation | None, role: str) -> list[Message]:
    if value is None:
        return []
    if isinstance(value, str):
        return [Message(role=role, content=value)]
    return list(value)
