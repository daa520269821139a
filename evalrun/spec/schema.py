"""The published JSON Schemas (``evalrun schema``, ``evalrun schema --targets``) for editors.

The targets.yaml schema is built where both formats are known (``commands/run.py``), so the
spec does not import the targets stage. The eval-file schema is the models' own schema widened by the spellings the loader maps before
validation (AgentV 4.x and AgentV's current format, docs/eval-files.md), so an editor accepts
every file ``evalrun validate`` accepts. It may accept a little more; ``validate`` has the last
word. Committed copies live in docs/schemas/ (a test keeps them equal to these).
"""

from __future__ import annotations

import copy
from typing import Any

from evalrun.spec.kinds import CONFIG_OPTIONS, types
from evalrun.spec.models import EvalFile

DRAFT = "https://json-schema.org/draft/2020-12/schema"
EVAL_SCHEMA_ID = "eval.schema.json"
TARGETS_SCHEMA_ID = "targets.schema.json"

_ANY_OBJECT = {"type": "object", "additionalProperties": True}
_COMMAND = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
_PROVIDER = {
    "description": "AgentV: the target(s) that answer each case; the first one is used",
    "anyOf": [
        {"type": "string"},
        _ANY_OBJECT,
        {"type": "array", "minItems": 1, "items": {"anyOf": [{"type": "string"}, _ANY_OBJECT]}},
    ],
}
_PROMPT = {
    "anyOf": [
        {"type": "string"},
        {"type": "array", "items": _ANY_OBJECT},
        {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "label": {"type": "string"},
                "raw": {"anyOf": [{"type": "string"}, {"type": "array"}]},
                "prompt": {"anyOf": [{"type": "string"}, {"type": "array"}]},
                "file": {"type": "string"},
                "path": {"type": "string"},
            },
        },
    ]
}
#: Graders whose AgentV options are kept in ``config`` (agentv_extras.py): the kinds that load
#: but cannot run here, the checks that read them there (``CONFIG_OPTIONS``), and AgentV's script
#: graders, whose unknown keys AgentV passes through.
_OPEN_TYPES = [t for k in [*types("unsupported"), *CONFIG_OPTIONS] for t in (k, f"not-{k}")]
_OPEN_GRADER = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {"enum": [*_OPEN_TYPES, "composite", "script", "code-grader", "code_grader"]}
    },
}
_ASSERTIONS = {
    "type": "array",
    "description": "AgentV: assertions; a plain string is an llm-rubric item",
    "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/GraderSpec"}, _OPEN_GRADER]},
}
_CONVERSATION = {"$ref": "#/$defs/TestCase/properties/input"}
_FILE_REF = {"type": "string", "pattern": "^file://"}


#: evalrun's workspace, or AgentV's (a mapping with its keys, or a workspace file's path)
_WORKSPACE = {
    "anyOf": [{"$ref": "#/$defs/WorkspaceSpec"}, {"type": "string"}, _ANY_OBJECT, {"type": "null"}],
    "description": "The case's workspace (docs/agents.md, Workspaces); AgentV's spelling too",
}
_ENVIRONMENT = {
    "anyOf": [{"type": "string"}, _ANY_OBJECT],
    "description": "AgentV: the testbed recipe (type: host, workdir, setup), or file://PATH",
}


def eval_json_schema() -> dict[str, Any]:
    schema = EvalFile.model_json_schema(by_alias=True)
    defs = schema["$defs"]
    _widen_grader(defs["GraderSpec"])
    _widen_test(defs["TestCase"])
    _widen_turn(defs["Turn"])
    props = schema["properties"]
    graders = copy.deepcopy(props["graders"])
    tests = copy.deepcopy(props["tests"])
    props.update(
        {
            "$schema": {"type": "string"},
            # AgentV 4.x
            "eval_cases": tests,
            "evalcases": tests,
            "assertions": graders,
            "evaluators": graders,
            "execution": {"type": "object", "properties": {"target": {"type": "string"}}},
            # AgentV's current format
            "input": {**_CONVERSATION, "description": "AgentV: put before every test's input"},
            "providers": _PROVIDER,
            "prompts": {"anyOf": [_PROMPT, {"type": "array", "minItems": 1, "items": _PROMPT}]},
            "assert": _ASSERTIONS,
            "default_test": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "vars": _ANY_OBJECT,
                    "assert": _ASSERTIONS,
                    "metadata": _ANY_OBJECT,
                },
            },
            "defaults": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "provider": {"type": "string"},
                    "grader": {"type": "string"},
                    "system_message": {"type": "string", "description": "AgentV ignores it"},
                },
            },
            # AgentV's run options (agentv_options.py) and file references (agentv_sources.py)
            "threshold": {"type": "number", "minimum": 0, "maximum": 1},
            "preprocessors": {"type": "array", "description": "AgentV: ignored, with a warning"},
            "input_files": {"type": "array", "items": {"type": "string"}},
            "scenarios": {"type": "array", "items": {"anyOf": [_FILE_REF, _ANY_OBJECT]}},
        }
    )
    props["default_test"]["properties"].update(
        {"options": _ANY_OBJECT, "threshold": {"type": "number", "minimum": 0, "maximum": 1}}
    )
    props["default_test"] = {"anyOf": [props["default_test"], _FILE_REF]}
    props["target"] = {
        "anyOf": [
            props["target"],
            {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        ]
    }
    props["tags"] = {"anyOf": [props["tags"], _ANY_OBJECT]}
    _tests_take_file_refs(props["tests"])
    for key in ("graders", "assertions", "evaluators"):
        props[key]["items"] = _ASSERTIONS["items"]
    defs["WorkspaceSpec"]["properties"].pop("unsupported")  # set by the AgentV mapping only
    for holder in (props, defs["TestCase"]["properties"]):
        holder["workspace"] = _WORKSPACE
        holder["environment"] = _ENVIRONMENT
    schema.pop("required", None)
    schema["anyOf"] = [{"required": [k]} for k in ("tests", "eval_cases", "evalcases", "scenarios")]
    return published(
        schema,
        EVAL_SCHEMA_ID,
        "evalrun eval file",
        "An evalrun eval file; AgentV 4.x and AgentV's current spellings are accepted too.",
    )


def _tests_take_file_refs(tests: dict[str, Any]) -> None:
    """A list of tests may hold ``file://`` references to tests files among its tests."""
    for form in tests.get("anyOf", tests.get("oneOf", [])):
        if form.get("type") == "array":
            form["items"] = {"anyOf": [form["items"], _FILE_REF]}


def _widen_test(test: dict[str, Any]) -> None:
    test["required"] = []  # id and input may come from vars and prompts (AgentV current)
    graders = copy.deepcopy(test["properties"]["graders"])
    graders["items"] = _ASSERTIONS["items"]
    test["properties"].update(
        {
            "graders": graders,
            "assertions": graders,
            "evaluators": graders,
            "expected_outcome": {"type": "string"},
            "input_messages": _CONVERSATION,
            "expected_messages": _CONVERSATION,
            "expectedOutput": _CONVERSATION,
            "vars": _ANY_OBJECT,
            "assert": _ASSERTIONS,
            "description": {"type": "string"},
            "threshold": {"type": "number", "minimum": 0, "maximum": 1},
            "conversation_id": {"type": "string"},
            "mode": {"const": "conversation"},
            "execution": {
                "type": "object",
                "properties": {"skip_defaults": {"type": "boolean"}},
                "additionalProperties": False,
            },
        }
    )
    test["properties"]["id"] = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    expected = test["properties"]["expected_output"]  # AgentV's structured answer: a mapping
    test["properties"]["expected_output"] = {"anyOf": [expected, {"type": "object"}]}


def _widen_turn(turn: dict[str, Any]) -> None:
    """A turn's graders under AgentV's names, plain strings among them (docs/agents.md)."""
    graders = copy.deepcopy(turn["properties"]["graders"])
    graders["items"] = _ASSERTIONS["items"]
    turn["properties"].update({"graders": graders, "assertions": graders, "assert": graders})


def _widen_grader(grader: dict[str, Any]) -> None:
    grader["properties"].update(
        {
            "script": _COMMAND,
            "max_calls": {"type": "integer", "minimum": 0},
            "metric": {"type": "string"},
            "provider": {
                "anyOf": [{"type": "string"}, {"type": "boolean"}, {"$ref": "#/$defs/TargetAccess"}]
            },
            "min_score": {"type": "number", "minimum": 0, "maximum": 1},
            "required": {"anyOf": [{"type": "boolean"}, {"type": "number"}]},
            "timeout_ms": {"type": "number", "exclusiveMinimum": 0},
            "criteria": {"anyOf": [{"type": "string"}, {"type": "array"}]},
            "prompt": {"anyOf": [{"type": "string"}, _ANY_OBJECT]},
            "flags": {"type": "string"},
            "id": {"type": "string"},
            "temperature": {"type": "number", "minimum": 0},
            "max_steps": {"type": "integer", "minimum": 0},
            "assert": {"$ref": "#/$defs/GraderSpec/properties/graders"},
            "assertions": {"$ref": "#/$defs/GraderSpec/properties/graders"},
            "aggregator": {},
        }
    )
    grader["properties"]["value"] = {}
    target = grader["properties"]["target"]  # AgentV: an llm-rubric's own judge, by name
    target["anyOf"] = [*target["anyOf"], {"type": "string"}]


def published(schema: dict[str, Any], schema_id: str, title: str, what: str) -> dict[str, Any]:
    out: dict[str, Any] = {"$schema": DRAFT, "$id": schema_id}
    out.update(schema)
    out.update(title=title, description=what)
    return out
