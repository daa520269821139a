"""The loader under mutation (docs/security.md): valid eval files and targets.yaml files with one
value, key or tag swapped for another YAML node. ``evalrun validate`` must accept the file or
refuse it with exit 2 and ``file:line:`` on every problem; never a traceback, never exit 1
(the "gate failed" code, docs/results.md). Bounded by example count, not by time."""

from __future__ import annotations

import json
import re
import traceback
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from evalrun.commands import run as run_command

EVAL = {
    "description": "fuzz seed",
    "target": "sut",
    "judge": "judge",
    "graders": [
        {"type": "contains", "value": "yes", "weight": 1.0, "threshold": 0.5},
        {"type": "script", "command": ["python", "grade.py"], "target": {"max_calls": 3}},
    ],
    "tests": [
        {
            "id": "one",
            "input": [{"role": "user", "content": "hi"}],
            "output": "yes we can",
            "metadata": {"k": "v"},
            "graders": [{"type": "regex", "value": "ye+s", "negate": False}],
        },
        {"id": "two", "input": "q", "expected_output": "a", "criteria": "c", "labels": {}},
    ],
}
CURRENT = {  # AgentV's current format (docs/eval-files.md)
    "providers": ["sut"],
    "prompts": ["Answer {{ question }}"],
    "default_test": {"vars": {"question": "why"}, "assert": [{"type": "contains", "value": "a"}]},
    "tests": [
        {"description": "d", "vars": {"question": "how"}, "assert": ["Says how"], "threshold": 0.5}
    ],
}
TARGETS = {
    "targets": [
        {
            "name": "sut",
            "kind": "mock",
            "default": "yes",
            "rules": [{"match": "q", "response": "a"}],
        },
        {"name": "judge", "kind": "openai", "model": "m", "base_url": "http://127.0.0.1:9"},
        {"name": "jury", "kind": "panel", "members": ["judge", "sut"], "min_agreement": 0.5},
        {"name": "agent", "kind": "cli", "command": ["echo"], "price": {"input": 1}},
    ]
}

#: YAML nodes to put in place of a value: other types, tags, lengths, special numbers
NODES = [
    "5",
    "-1",
    "0",
    "[5]",
    "[null]",
    "[[]]",
    "null",
    "{}",
    "[]",
    "''",
    '"' + "x" * 300 + '"',
    "x" * 300,
    "9" * 5000,
    "1e999",
    ".nan",
    ".inf",
    "-.inf",
    "yes",
    "001",
    "1e3",
    "0x1F",
    "true",
    "!!float abc",
    "!!int x",
    "!!bool maybe",
    "!!python/object:os.system x",
    "!!binary aGk=",
    "!!timestamp 2001-12-14",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "!foo x",
    "!!str 5",
    "'\\0'",
    '"\\0"',
    '"\\ud800"',
    "{a: 1}",
    "[a, {b: [c]}]",
    "&x [a, *x]",
    "*nowhere",
    "[" * 120 + "]" * 120,
    "{? [a, b] : c}",
    "{a: 1, a: 2}",
    '"../../../etc/passwd"',
    '"/"',
    '"."',
    '"file://x.jsonl"',
    '"cases.jsonl"',
    '"{{ vars.nope }}"',
    '"("',
    '"a \\"b"',
    "-",
    "=",
    "<<",
    "~",
]
#: names to put in place of a key: neighbours' keys, typos, non-text keys
KEYS = [
    "tests",
    "graders",
    "id",
    "input",
    "output",
    "value",
    "type",
    "command",
    "target",
    "judge",
    "name",
    "kind",
    "model",
    "members",
    "rules",
    "assert",
    "vars",
    "prompts",
    "eval_cases",
    "execution",
    "temprature",
    "1",
    "yes",
    "null",
    "[a, b]",
    "{a: b}",
    "!!binary aGk=",
    "<<",
]


class Raw(str):
    """YAML text written as it is (a node the serializer cannot spell)."""


def _inline(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)}: {_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value)


def _key(key: Any) -> str:
    return f"? {key} " if isinstance(key, Raw) and not key.isidentifier() else _inline(key)


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block style, so problems are on lines of their own; Raw nodes inline."""
    pad = " " * indent
    out = []
    if isinstance(value, dict) and value:
        for key, item in value.items():
            if isinstance(key, Raw) and not key.isidentifier():
                out.append(f"{pad}? {key}\n{pad}: {_inline(item)}\n")
            elif isinstance(item, (dict, list)) and item and not isinstance(item, Raw):
                out.append(f"{pad}{_inline(key)}:\n{to_yaml(item, indent + 2)}")
            else:
                out.append(f"{pad}{_inline(key)}: {_inline(item)}\n")
        return "".join(out)
    if isinstance(value, list) and value:
        for item in value:
            if isinstance(item, (dict, list)) and item and not isinstance(item, Raw):
                out.append(f"{pad}-\n{to_yaml(item, indent + 2)}")
            else:
                out.append(f"{pad}- {_inline(item)}\n")
        return "".join(out)
    return f"{pad}{_inline(value)}\n"


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*path, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, seed: dict[str, Any]) -> str:
    """``seed`` with one to three mutations: a value replaced, a key renamed or repeated, an
    item deleted."""
    doc = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        if not _paths(doc)[1:]:
            break
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        action = draw(st.sampled_from(["value", "value", "key", "delete"]))
        if action == "value":
            parent[last] = Raw(draw(st.sampled_from(NODES)))
        elif action == "key" and isinstance(parent, dict):
            items = list(parent.items())
            new = Raw(draw(st.sampled_from(KEYS)))
            parent.clear()
            parent.update((new if k == last else k, v) for k, v in items)
        elif isinstance(parent, dict):
            del parent[last]
        else:
            parent.pop(last)
    return to_yaml(doc)


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """evalrun"""

    run_command.register(app)
    return app


APP = _app()
#: a problem line: FILE:LINE[:COLUMN]: ..., or the line saying which targets file was read
LOCATED = re.compile(
    r"^\S+\.(?:yaml|jsonl):\d+(?::\d+)?: |^\S+\.eval\.yaml: targets: (targets file|no targets)"
)
FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def check_cli(folder: Path, eval_text: str, targets_text: str, command: str = "validate") -> Result:
    """Run ``command`` on the files; it exits 0 or 2, every problem at ``file:line``."""
    path = folder / "f.eval.yaml"
    path.write_text(eval_text, encoding="utf-8")
    (folder / "targets.yaml").write_text(targets_text, encoding="utf-8")
    (folder / "grade.py").write_text("print('{\"score\": 1}')\n", encoding="utf-8")
    args = ["validate", str(path)]
    if command == "run":
        args = ["run", str(path), "--no-cache", "-q", "--out", str(folder / "out")]
    result = CliRunner().invoke(APP, args)
    shown = f"--- f.eval.yaml\n{eval_text}--- targets.yaml\n{targets_text}--- output\n"
    shown += result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(shown + "".join(traceback.format_exception(result.exception)))
    assert result.exit_code in (0, 2), shown
    if result.exit_code == 2:
        problems = [
            line.removeprefix("error: ")
            for line in result.output.splitlines()
            if line.strip()
            and not line.startswith(("warning: ", "error: validate: ", "error: the run did not"))
            and not line.endswith("(deprecated; still loads)")
        ]
        assert problems and all(LOCATED.match(p) for p in problems), shown
    return result


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@FUZZ
@given(text=mutated(EVAL))
def test_a_mutated_eval_file_is_accepted_or_refused_at_its_line(
    tmp_path_factory: Any, text: str
) -> None:
    check_cli(tmp_path_factory.mktemp("fuzz"), text, to_yaml(TARGETS))


@pytest.mark.slow
@FUZZ
@given(text=mutated(CURRENT))
def test_a_mutated_agentv_file_is_accepted_or_refused_at_its_line(
    tmp_path_factory: Any, text: str
) -> None:
    check_cli(tmp_path_factory.mktemp("fuzz"), text, to_yaml(TARGETS))


@pytest.mark.slow
@FUZZ
@given(text=mutated(TARGETS))
def test_a_mutated_targets_file_is_accepted_or_refused_at_its_line(
    tmp_path_factory: Any, text: str
) -> None:
    check_cli(tmp_path_factory.mktemp("fuzz"), to_yaml(EVAL), text)


#: files the loader once crashed on (a traceback, exit 1), each refused now at its line
ONE = "tests: [{id: a, input: q}]\n"
JSON = "graders: [{type: is-json}]\n"
HOSTILE = {
    "graders-int": "graders: 5\n" + ONE,
    "tests-long-path": JSON + "tests: " + "x" * 300 + "\n",
    "float-tag-on-text": "graders: [{type: contains, value: !!float abc}]\n" + ONE,
    "python-tag": "graders: !!python/name:os.system x\n" + ONE,
    "binary-tag": "description: !!binary aGk=\n" + JSON + ONE,
    "timestamp-tag": JSON + "tests: [{id: !!timestamp 2001-12-14, input: q}]\n",
    "set-tag": "graders: !!set {a, b}\n" + ONE,
    "huge-int": "description: " + "9" * 5000 + "\n" + JSON + ONE,
    "repeated-key": JSON + ONE + "tests: []\n",
    "unsplittable-command": "graders: [{command: 'python \"x'}]\n" + ONE,
    "agentv-assert-int": "providers: [sut]\nprompts: [q]\nassert: 5\ntests: [{vars: {}}]\n",
    "agentv-metadata-text": "providers: [sut]\ntests: [{vars: {input: q}, metadata: m}]\n",
    "agentv-config-text": "providers: [sut]\ntests: [{vars: {input: q}, "
    "assert: [{type: llm-rubric, value: v, config: c}]}]\n",
}
PANEL_LOOP = (
    "targets:\n  - {name: sut, kind: mock}\n  - {name: jury, kind: panel, members: [sut, jury]}\n"
)


@pytest.mark.parametrize("command", ["validate", "run"])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_eval_file_is_refused_at_its_line(
    tmp_path: Path, name: str, command: str
) -> None:
    text = "target: sut\n" + HOSTILE[name] if "providers" not in HOSTILE[name] else HOSTILE[name]
    result = check_cli(tmp_path, text, to_yaml(TARGETS), command)
    assert result.exit_code == 2
    tag = re.search(r"!!\S+", HOSTILE[name])
    if tag and name.endswith("-tag"):  # named, rather than read as something else
        assert f"the tag {tag.group()} is not supported" in result.output


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_panel_that_lists_itself_is_refused_at_its_line(tmp_path: Path, command: str) -> None:
    text = "target: sut\njudge: jury\ngraders: [{type: is-json}]\ntests: [{id: a, input: q}]\n"
    assert check_cli(tmp_path, text, PANEL_LOOP, command).exit_code == 2
