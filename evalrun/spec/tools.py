"""``tools:``, ``max_turns:`` and ``tool_choice:`` of an eval file: the tools a model target is
offered, the mocked results evalrun answers its calls with, and whether the model must call one
(docs/agents.md, "Model targets with tools").

A suite declares tools once; a test may add its own and re-declare a suite tool by name to give
it this test's mocked results (:func:`tools_for`).
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

#: OpenAI's rule for a function name, the strictest of the providers' (docs/agents.md)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: the keys that say how a call is answered; a test that sets any of them replaces the suite's
MOCK_KEYS = frozenset({"result", "results", "command"})
#: ``max_turns`` when neither the test nor the suite sets it
DEFAULT_MAX_TURNS = 10


def _function_of(data: Any, refusal: str) -> dict[str, Any] | None:
    """The ``function`` of OpenAI's nested form (``{type: function, function: {...}}``), or
    None when ``data`` is not in that form."""
    if not isinstance(data, dict) or not isinstance(data.get("function"), dict):
        return None
    if data.get("type", "function") != "function":
        raise ValueError(f"{refusal}, not {data['type']!r}")
    function: dict[str, Any] = data["function"]
    return function


class MockedResult(BaseModel):
    """One entry of ``results:``: this result when the call's arguments contain ``arguments``."""

    model_config = ConfigDict(extra="forbid")

    arguments: dict[str, Any] | None = None
    result: Any
    is_error: bool = False


class ToolSpec(BaseModel):
    """A function tool (name, description, JSON Schema ``parameters``) and its mocked results.
    OpenAI's nested form (``{type: function, function: {...}}``) is read too."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    #: the result of every call no entry of ``results`` matched
    result: Any = None
    results: list[MockedResult] = Field(default_factory=list)
    #: a script that reads the call as JSON on stdin and prints the result as JSON
    command: list[str] | str | None = None
    timeout: float = Field(30.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _accept_openai_form(cls, data: Any) -> Any:
        function = _function_of(data, "only function tools can be offered")
        if function is None:
            return data
        rest = {k: v for k, v in data.items() if k not in ("type", "function")}
        return {**function, **rest}

    @field_validator("name")
    @classmethod
    def _name_fits_every_provider(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"tool name {value[:80]!r} must be 1 to 64 letters, digits, '_' or '-'"
            )
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters_are_a_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            if value.get("type", "object") != "object":
                raise ValueError("parameters must be a JSON Schema of type 'object'")
            from evalrun.spec.jsonschema_check import schema_problem  # slow import: only here

            problem = schema_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("command")
    @classmethod
    def _command_splits(cls, value: list[str] | str | None) -> list[str] | str | None:
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"cannot split the command into arguments: {exc}") from None
        if value is not None and not value:
            raise ValueError("command must name a program")
        return value

    @model_validator(mode="after")
    def _one_fallback(self) -> ToolSpec:
        if self.command is not None and "result" in self.model_fields_set:
            raise ValueError("give 'result' or 'command' for the calls 'results' misses, not both")
        return self

    @property
    def argv(self) -> list[str] | None:
        if self.command is None:
            return None
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)

    @property
    def has_result(self) -> bool:
        """``result:`` was given (``result: null`` is a result too)."""
        return "result" in self.model_fields_set


def tools_for(suite: list[ToolSpec], test: list[ToolSpec]) -> list[ToolSpec]:
    """The suite's tools, then the test's own. A test tool named like a suite tool replaces the
    keys it sets; if it sets a mock key (``result``, ``results``, ``command``) its mock replaces
    the suite's whole (docs/agents.md)."""
    merged = {tool.name: tool for tool in suite}
    for tool in test:
        base = merged.get(tool.name)
        if base is None:
            merged[tool.name] = tool
            continue
        update = {k: getattr(tool, k) for k in tool.model_fields_set if k != "name"}
        if MOCK_KEYS & tool.model_fields_set:
            cleared: dict[str, Any] = {"result": None, "results": [], "command": None}
            base = base.model_copy(update=cleared)
            base.model_fields_set.difference_update(MOCK_KEYS)
        merged[tool.name] = base.model_copy(update=update)
        merged[tool.name].model_fields_set.update(update)
    return list(merged.values())


def unique_names(tools: list[ToolSpec]) -> list[ToolSpec]:
    """A list of tools naming one tool twice is refused: which one a call means is unclear."""
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise ValueError(f"tool '{tool.name}' is declared twice")
        seen.add(tool.name)
    return tools


#: ``tools:`` of a suite or a test
Tools = Annotated[list[ToolSpec], AfterValidator(unique_names)]
#: ``max_turns:``: the most model calls one case's tool loop makes
MaxTurns = Annotated[int | None, Field(ge=1)]


class NamedTool(BaseModel):
    """``tool_choice: {name: NAME}``: the model must call this tool (OpenAI's nested form,
    ``{type: function, function: {name}}``, is read too)."""

    model_config = ConfigDict(extra="forbid")

    name: str

    @model_validator(mode="before")
    @classmethod
    def _accept_openai_form(cls, data: Any) -> Any:
        function = _function_of(data, "tool_choice can name a function tool")
        return data if function is None else {"name": function.get("name")}


#: ``tool_choice:``: may the model call a tool (``auto``), must it (``required``), may it not
#: (``none``), or must it call this one
ToolChoice = Literal["auto", "none", "required"] | NamedTool | None


def choice_problem(choice: ToolChoice, tools: list[ToolSpec]) -> str | None:
    """Why ``choice`` cannot be asked of these tools, or None."""
    if choice is None:
        return None
    if not tools:
        return "tool_choice is set, but no tools are offered"
    names = [tool.name for tool in tools]
    if isinstance(choice, NamedTool) and choice.name not in names:
        return f"tool_choice names '{choice.name[:80]}', which is not offered (tools: {', '.join(names)})"
    return None


def choice_wire(choice: ToolChoice) -> str | dict[str, Any] | None:
    """The choice in OpenAI's shape, which every provider translates (docs/targets.md)."""
    if isinstance(choice, NamedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice
