"""Eval files: models, loading, errors naming file/line/key, AgentV spellings, validate/schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun.spec.loader import EvalFileError, load_eval
from tests.conftest import run_cli


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_loads_string_and_message_inputs_with_tool_calls(tmp_path):
    path = write(
        tmp_path,
        "ok.eval.yaml",
        """
description: demo
target: mock
graders:
  - {type: contains, value: Paris}
tests:
  - id: plain
    input: What is the capital of France?
  - id: messages
    criteria: Paris
    input:
      - {role: user, content: "Capital of France?"}
    expected_output:
      - role: assistant
        tool_calls:
          - tool: vector_search
            input: {query: capital}
            output: {results: [a, b]}
      - {role: assistant, content: Paris.}
    output: Paris.
""",
    )
    loaded = load_eval(path)
    assert [t.id for t in loaded.tests] == ["plain", "messages"]
    expected = loaded.tests[1].expected_messages
    assert expected[0].tool_calls[0].output == {"results": ["a", "b"]}
    assert expected[1].text() == "Paris."
    assert loaded.tests[0].input_messages[0].role == "user"
    assert loaded.name == "ok"


def test_errors_name_file_line_and_key(tmp_path):
    path = write(
        tmp_path,
        "bad.eval.yaml",
        """target: mock
graders:
  - name: g
    command: [python, g.py]
    timeout: soon
tests:
  - id: a
    input: hi
  - id: b
    inptu: hi
""",
    )
    with pytest.raises(EvalFileError) as err:
        load_eval(path)
    message = str(err.value)
    assert f"{path}:5: graders[0].timeout" in message
    assert f"{path}:10: tests[1].inptu: Extra inputs are not permitted" in message
    assert f"{path}:9: tests[1].input: Field required" in message


def test_yaml_syntax_error_names_line(tmp_path):
    path = write(tmp_path, "broken.eval.yaml", "tests:\n  - id: a\n    input: [unclosed\n")
    with pytest.raises(EvalFileError, match=r"broken\.eval\.yaml:3:12: invalid YAML"):
        load_eval(path)


def test_unknown_grader_type_and_missing_command(tmp_path):
    path = write(
        tmp_path,
        "t.eval.yaml",
        "graders:\n  - type: nonsense\n  - type: script\ntests:\n  - {id: a, input: x}\n",
    )
    with pytest.raises(EvalFileError) as err:
        load_eval(path)
    assert ":2: graders[0].type" in str(err.value)
    assert "unknown grader type 'nonsense'" in str(err.value)
    assert ":3: graders[1]" in str(err.value) and "needs 'command'" in str(err.value)


def test_duplicate_ids_and_ungraded_tests_are_rejected(tmp_path):
    dup = write(
        tmp_path,
        "dup.eval.yaml",
        "graders: [{type: is-json}]\ntests:\n  - {id: a, input: x}\n  - {id: a, input: y}\n",
    )
    with pytest.raises(EvalFileError, match="duplicate test id 'a'"):
        load_eval(dup)
    bare = write(tmp_path, "bare.eval.yaml", "tests:\n  - {id: a, input: x}\n")
    with pytest.raises(EvalFileError, match="tests without graders: a"):
        load_eval(bare)


def test_tests_from_jsonl_with_line_numbers(tmp_path):
    write(
        tmp_path,
        "cases.jsonl",
        '{"id": "one", "input": "x"}\n\n{"id": "two", "input": "y", "bogus": 1}\n',
    )
    path = write(tmp_path, "f.eval.yaml", "graders: [{type: is-json}]\ntests: cases.jsonl\n")
    with pytest.raises(EvalFileError) as err:
        load_eval(path)
    assert "cases.jsonl:3: tests[1].bogus" in str(err.value)
    write(tmp_path, "cases.jsonl", '{"id": "one", "input": "x"}\n{"id": "two", "input": "y"}\n')
    assert [t.id for t in load_eval(path).tests] == ["one", "two"]


def test_jsonl_tests_stream_from_the_file_and_carry_their_lines(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        '{"id": "one", "input": "x"}\n\n{"id": 2, "input": "y"}\n{"id": "three", "input": "z"}\n'
    )
    path = write(tmp_path, "f.eval.yaml", "graders: [{type: is-json}]\ntests: cases.jsonl\n")
    loaded = load_eval(path)
    assert not isinstance(loaded.tests, list)  # read again on each pass, not held
    assert len(loaded.tests) == 3
    assert [(t.id, t.line) for t in loaded.tests] == [("one", 1), ("2", 3), ("three", 4)]
    assert [t.id for t in loaded.tests] == ["one", "2", "three"]  # a second pass
    assert loaded.tests_file is not None and loaded.tests_file.resolve() == cases.resolve()
    cases.write_text('{"id": "one", "input": "changed after the check"}\n')
    with pytest.raises(EvalFileError, match="changed after it was checked"):
        list(loaded.tests)


def test_duplicate_ids_in_jsonl_name_their_line(tmp_path):
    write(
        tmp_path,
        "cases.jsonl",
        '{"id": "a", "input": "x"}\n{"id": "b", "input": "x"}\n{"id": "a", "input": "y"}\n',
    )
    path = write(tmp_path, "f.eval.yaml", "graders: [{type: is-json}]\ntests: cases.jsonl\n")
    with pytest.raises(EvalFileError) as err:
        load_eval(path)
    assert str(err.value).endswith(
        "cases.jsonl:3: tests[2].id: duplicate test id 'a' (first used on line 1); "
        "ids must be unique"
    )


def test_tests_from_yaml_file(tmp_path):
    write(tmp_path, "cases.yaml", "- {id: one, input: x}\n- {id: two, input: y}\n")
    path = write(tmp_path, "f.eval.yaml", "graders: [{type: is-json}]\ntests: cases.yaml\n")
    assert len(load_eval(path).tests) == 2


def test_agentv_spellings_load_onto_the_same_models(tmp_path):
    path = write(
        tmp_path,
        "agentv.eval.yaml",
        """
description: AgentV 4.x style
execution:
  target: gemini-llm
assertions:
  - name: contextual_precision
    type: code-grader
    script: [bun, run, scripts/cp.ts]
    target: {max_calls: 10}
eval_cases:
  - id: one
    criteria: Paris
    input:
      - role: user
        content: capital?
    expected_output:
      - role: assistant
        toolCalls:
          - {tool: vector_search, input: {query: q}, output: {results: [a]}}
""",
    )
    loaded = load_eval(path)
    assert loaded.spec.target == "gemini-llm"
    grader = loaded.spec.graders[0]
    assert grader.type == "script"
    assert grader.argv == ["bun", "run", "scripts/cp.ts"]
    assert grader.access is not None and grader.access.max_calls == 10
    assert loaded.tests[0].expected_messages[0].tool_calls[0].tool == "vector_search"


def test_agentv_errors_still_name_the_line(tmp_path):
    path = write(
        tmp_path,
        "agentv.eval.yaml",
        "assertions:\n  - type: code_grader\n    script: [x]\n    weight: heavy\neval_cases:\n  - {id: a, input: x}\n",
    )
    with pytest.raises(EvalFileError, match=r"agentv\.eval\.yaml:4: graders\[0\]\.weight"):
        load_eval(path)


def test_validate_command_exit_codes(tmp_path):
    good = write(
        tmp_path, "good.eval.yaml", "graders: [{type: is-json}]\ntests: [{id: a, input: x}]\n"
    )
    bad = write(tmp_path, "bad.eval.yaml", "graders: [{type: is-json}]\ntests: [{id: a}]\n")
    ok = run_cli("validate", str(good))
    assert ok.returncode == 0, ok.stderr
    assert "ok (1 test, 1 grader)" in ok.stdout
    failed = run_cli("validate", str(bad))
    assert failed.returncode == 2
    assert "bad.eval.yaml:2: tests[0].input: Field required" in failed.stderr


def test_run_refuses_an_invalid_file_before_running_anything(tmp_path):
    marker = tmp_path / "ran"
    grader = write(tmp_path, "g.py", f"open({str(marker)!r}, 'w').write('x')\nprint('ok')\n")
    path = write(
        tmp_path,
        "bad.eval.yaml",
        f"graders: [{{command: [python, {grader}]}}]\ntests:\n  - {{id: a, input: x, output: y}}\n  - {{id: b, inptu: x}}\n",
    )
    result = run_cli(str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "tests[1]" in result.stderr
    assert not marker.exists()
    assert not (tmp_path / "out").exists()


def test_schema_command_prints_json_schema():
    result = run_cli("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "evalrun eval file"
    assert "tests" in schema["properties"]
    assert "GraderSpec" in json.dumps(schema)


def test_version_flag():
    from evalrun import __version__

    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"evalrun {__version__}"


def test_the_program_flushes_and_runs_atexit_hooks_before_its_quick_exit():
    """``entry`` ends the process with ``os._exit`` (no teardown): whatever was printed still
    arrives whole, ``atexit`` hooks (a Ray cluster's shutdown) still run, the code is kept."""
    script = (
        "import atexit, sys\n"
        "from evalrun.cli import entry\n"
        "atexit.register(lambda: print('hook ran', file=sys.stderr))\n"
        "sys.argv = ['evalrun', *sys.argv[1:]]\n"
        "entry()\n"
        "print('after entry')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, "schema"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and json.loads(done.stdout)["title"] == "evalrun eval file"
    assert "hook ran" in done.stderr and "after entry" not in done.stdout
    failed = subprocess.run(
        [sys.executable, "-c", script, "validate", "no-such.eval.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failed.returncode == 2 and "hook ran" in failed.stderr


def test_the_command_table_says_which_module_adds_each_command():
    """``evalrun run ...`` imports the run command's module only, found through this table."""
    import importlib

    import typer

    from evalrun.cli import COMMANDS

    added: dict[str, str] = {}
    for module in dict.fromkeys(COMMANDS.values()):
        app = typer.Typer()
        importlib.import_module(f"evalrun.commands.{module}").register(app)
        for name in [c.name for c in app.registered_commands] + [
            g.name for g in app.registered_groups
        ]:
            added[name] = module
    assert added == COMMANDS
