"""Minimal Python helpers for AgentV script-graders and eval authoring."""

from .evals import (
    EvalDefinition,
    EvalTest,
    JsonlCase,
    render_eval_yaml,
    render_jsonl,
    run_agentv_eval,
    write_eval_yaml,
    write_jsonl,
)
from .grader import (
    Assertion,
    CodeGraderContext,
    Check,
    ProviderClient,
    ScriptGraderContext,
    ScriptGraderResult,
    define_script_grader,
    emit_grader_result,
    load_grader_input,
    run_script_grader,
)

__all__ = [
    "Assertion",
    "Check",
    "ScriptGraderContext",
    "ScriptGraderResult",
    "CodeGraderContext",
    "ProviderClient",
    "define_script_grader",
    "emit_grader_result",
    "load_grader_input",
    "run_script_grader",
    "EvalDefinition",
    "EvalTest",
    "JsonlCase",
    "render_eval_yaml",
    "render_jsonl",
    "run_agentv_eval",
    "write_eval_yaml",
    "write_jsonl",
]
