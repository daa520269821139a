"""The one table of grader kinds (evalrun/spec/kinds.py) agrees with the code that dispatches on
it, the graders package and the docs' list of types."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from evalrun.launcher.deterministic import CHECKS, EXPECTED_CHECKS
from evalrun.launcher.launch import grader_argv
from evalrun.spec.kinds import ALIASES, KINDS, types
from evalrun.spec.models import GraderSpec

ROOT = Path(__file__).resolve().parents[1]

#: what each required key needs to be given, to build every kind
SAMPLE = {"command": ["python", "g.py"], "value": "x", "schema": {"type": "object"}}


#: the options the checks of an agent's run cannot do without (validated at load, docs/agents.md)
OPTIONS = {
    "execution-metrics": {"config": {"max_tool_calls": 1}},
    "skill-used": {"value": "x"},
    "skill-trigger": {"config": {"skill": "x"}},
    "trajectory:tool-used": {"value": "x"},
    "trajectory:tool-sequence": {"value": ["x"]},
    "trajectory:tool-args-match": {"config": {"value": {"name": "x", "args": {}}}},
    "tool-trajectory": {"config": {"expected": []}},
    "trajectory:step-count": {"config": {"value": {"max": 1}}},
    "trajectory:goal-success": {"config": {"value": "x"}},
}


def _spec(type_: str, **extra: object) -> GraderSpec:
    name = type_.replace("_", "-")
    keys = {key: SAMPLE[key] for key in KINDS[name].requires}
    return GraderSpec.model_validate({"type": type_, **keys, **OPTIONS.get(name, {}), **extra})


def test_every_check_kind_has_a_check_and_every_check_a_kind() -> None:
    assert sorted([*CHECKS, *EXPECTED_CHECKS]) == sorted(types("check"))


def test_every_builtin_is_a_module_of_the_graders_package() -> None:
    for type_ in types("builtin"):
        module = KINDS[type_].module
        assert module and importlib.util.find_spec(module) is not None, type_
        assert grader_argv(_spec(type_))[1:] == ["-m", module]


@pytest.mark.parametrize("type_", list(KINDS))
def test_each_kind_validates_and_runs_as_the_table_says(type_: str) -> None:
    kind = KINDS[type_]
    spec = _spec(type_)
    assert spec.kind is kind
    assert spec.needs_judge is (kind.runs == "builtin")
    assert spec.run_mode == ("serve" if kind.runs == "builtin" else "process")
    assert _spec(type_, mode="process").run_mode == "process"
    for key in kind.requires:
        with pytest.raises(ValidationError, match=f"needs '{key}'"):
            GraderSpec.model_validate({"type": type_})


def test_builtins_get_a_default_grant_and_keep_their_own_budget() -> None:
    assert _spec("quality").access.max_calls == 50
    assert _spec("quality", target={"max_calls": 3}).access.max_calls == 3
    assert _spec("contains").access is None
    assert _spec("script", target=True).needs_judge


def test_aliases_and_underscores_name_the_same_kind() -> None:
    for alias, type_ in ALIASES.items():
        assert _spec(type_, type=alias).type == type_
    assert _spec("is_json").type == "is-json"
    with pytest.raises(ValidationError, match="unknown grader type 'nonsense' \\(known: script,"):
        GraderSpec.model_validate({"type": "nonsense"})


def test_the_docs_list_every_type_of_the_table() -> None:
    """The ``type`` row of the graders table in docs/eval-files.md."""
    text = (ROOT / "docs" / "eval-files.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| `type` |"))

    def listed(label: str) -> list[str]:
        found = re.search(label + r" \(([^)]*)\)", row)
        assert found, f"docs/eval-files.md: the type row has no '{label} (...)'"
        return re.findall(r"`([^`]+)`", found.group(1))

    assert listed("a built-in") == list(types("builtin"))
    assert listed("a deterministic check") == list(types("check"))
    assert listed("AgentV's kinds that load but cannot run yet") == list(types("unsupported"))
    assert re.findall(r"`([^`]+)`", row.split("|")[3])[0] == types("command")[0]
