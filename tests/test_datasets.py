"""Tests from CSV files and ``datasets`` datasets, with ``columns:`` (docs/datasets.md): the
worked examples of the doc run as written there, and every bad input is a located error."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.targets import install_hint
from tests.conftest import ROOT, read_bundle, run_cli

DOC = (ROOT / "docs" / "datasets.md").read_text()


def block(after: str, lang: str = "") -> str:
    """The first fenced block of ``lang`` after the text ``after`` in docs/datasets.md."""
    start = DOC.index(after)
    found = re.compile(rf"^```{lang}\n(.*?)^```$", re.M | re.S).search(DOC, start)
    assert found, (after, lang)
    return found.group(1)


def shown(command: str) -> list[str]:
    """The output lines of the block that starts with ``command`` (``$``, ``...`` lines left out)."""
    lines = block(f"```\n{command}\n").splitlines()
    return [line for line in lines if not line.startswith(("$", "..."))]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    return str(caught.value).splitlines()


def test_the_csv_worked_example_validates_and_runs_as_the_doc_shows(tmp_path: Path) -> None:
    write(tmp_path, "qa.csv", block("`qa.csv` holds", "csv"))
    write(tmp_path, "qa.eval.yaml", block("`qa.eval.yaml`:", "yaml"))
    validate_out, run_out = shown("$ evalrun validate qa.eval.yaml")

    checked = run_cli("validate", "qa.eval.yaml", cwd=tmp_path)
    assert (checked.returncode, checked.stdout.strip()) == (0, validate_out), checked.stderr

    ran = run_cli("run", "qa.eval.yaml", "--out", "out", cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr  # one case fails on purpose
    assert run_out in ran.stdout
    results, _ = read_bundle(tmp_path / "out")
    by_id = {r["id"]: r for r in results}
    assert {i: r["status"] for i, r in by_id.items()} == {
        "capital": "passed",
        "poem": "passed",
        "sum": "failed",
    }
    # the line each row starts on, past the quoted line breaks of `poem`
    assert {i: r["line"] for i, r in by_id.items()} == {"capital": 2, "poem": 3, "sum": 6}
    assert by_id["poem"]["output"] == "Waves on waves,\nsalt on the wind."


def test_cells_are_json_only_for_list_and_mapping_keys(tmp_path: Path) -> None:
    write(
        tmp_path,
        "t.csv",
        'id,input,expected_output,criteria,metadata,input_files\n001,"[1, 2]",true,,"{""a"": [1]}",'
        '"[""f.txt""]"\n',
    )
    loaded = load_eval(write(tmp_path, "t.eval.yaml", "graders: [{type: is-json}]\ntests: t.csv\n"))
    assert not isinstance(loaded.tests, list)  # streamed, like a .jsonl file
    (case,) = list(loaded.tests)
    assert (case.id, case.input, case.expected_output) == ("001", "[1, 2]", "true")
    assert case.criteria is None  # an empty cell is a key not given
    assert (case.metadata, case.input_files) == ({"a": [1]}, ["f.txt"])


def test_a_csv_without_an_id_column_numbers_its_rows(tmp_path: Path) -> None:
    write(tmp_path, "t.csv", "input\nfirst\n\nsecond\n")
    loaded = load_eval(write(tmp_path, "t.eval.yaml", "graders: [{type: is-json}]\ntests: t.csv\n"))
    assert [(c.id, c.input, c.line) for c in loaded.tests] == [
        ("0", "first", 2),
        ("1", "second", 4),
    ]


def test_csv_problems_name_the_file_the_row_line_and_the_key(tmp_path: Path) -> None:
    write(tmp_path, "h.csv", "id,inptu,notes\na,b,c\n")
    assert problems(write(tmp_path, "h.eval.yaml", "tests: h.csv\n")) == [
        f"{tmp_path / 'h.csv'}:1: inptu: unknown column: not a test key; did you mean 'input'? "
        "(rename it, or pick the columns to read with 'columns:')",
        f"{tmp_path / 'h.csv'}:1: notes: unknown column: not a test key "
        "(rename it, or pick the columns to read with 'columns:')",
    ]
    rows = 'id,input,graders\na,"one\ntwo",\nb,,\na,x,\n'
    write(tmp_path, "r.csv", rows)
    assert problems(write(tmp_path, "r.eval.yaml", "tests: r.csv\n")) == [
        f"{tmp_path / 'r.csv'}:4: tests[1].input: Field required",
    ]
    write(tmp_path, "r.csv", rows.replace("b,,", "b,y,"))
    assert problems(tmp_path / "r.eval.yaml") == [
        f"{tmp_path / 'r.csv'}:5: tests[2].id: duplicate test id 'a' (first used on line 2); "
        "ids must be unique"
    ]
    write(tmp_path, "r.csv", 'id,input,graders\na,"one\ntwo",[{"type": "regx"}]\n')
    (problem,) = problems(tmp_path / "r.eval.yaml")
    assert problem.startswith(f"{tmp_path / 'r.csv'}:2: tests[0].graders[0].type: ")
    write(tmp_path, "r.csv", 'id,input,graders\na,"one\ntwo",\nb,x,[{type: regex}]\n')
    assert problems(tmp_path / "r.eval.yaml") == [
        f"{tmp_path / 'r.csv'}:4: tests[1].graders: the cell is not JSON (Expecting property "
        "name enclosed in double quotes); "
        "a 'graders' cell holds JSON"
    ]
    write(tmp_path, "r.csv", f"id,input\na,{'x' * 131_073}\n")  # past the csv module's limit
    assert problems(tmp_path / "r.eval.yaml") == [
        f"{tmp_path / 'r.csv'}:2: invalid CSV: field larger than field limit (131072)"
    ]
    write(tmp_path, "r.csv", "id,input\na,x,extra\n")
    assert problems(tmp_path / "r.eval.yaml") == [
        f"{tmp_path / 'r.csv'}:2: the row has 3 cells; the header has 2"
    ]


def test_columns_map_keys_and_are_checked_at_their_lines(tmp_path: Path) -> None:
    write(tmp_path, "qa.csv", "question,answer,source\nWhat?,That.,wiki\n")
    mapped = """graders: [{type: is-json}]
tests:
  from: qa.csv
  columns:
    input: question
    expected_output: answer
"""
    (case,) = list(load_eval(write(tmp_path, "m.eval.yaml", mapped)).tests)
    assert (case.id, case.input, case.expected_output) == ("0", "What?", "That.")
    twice = mapped + "    criteria: question\n"  # one column may feed two keys
    (case,) = list(load_eval(write(tmp_path, "t.eval.yaml", twice)).tests)
    assert (case.input, case.criteria) == ("What?", "What?")
    bad = mapped + "    inptu: question\n    criteria: anwser\n"
    assert problems(write(tmp_path, "b.eval.yaml", bad)) == [
        f"{tmp_path / 'b.eval.yaml'}:7: tests.columns.inptu: Extra inputs are not permitted: "
        "unknown key 'inptu'; did you mean 'input'?"
    ]
    missing = mapped + "    criteria: anwser\n"
    assert problems(write(tmp_path, "c.eval.yaml", missing)) == [
        f"{tmp_path / 'c.eval.yaml'}:7: tests.columns.criteria: no column 'anwser'; did you "
        "mean 'answer'? (columns: question, answer, source)"
    ]
    (problem,) = problems(write(tmp_path, "d.eval.yaml", mapped + "    metadata: source\n"))
    assert problem == (
        f"{tmp_path / 'qa.csv'}:2: tests[0].metadata (column 'source'): the cell is not JSON "
        "(Expecting value); a 'metadata' cell holds JSON"
    )
    write(tmp_path, "t.jsonl", '{"id": "a", "input": "x"}\n')
    jsonl = "graders: [{type: is-json}]\ntests: {from: t.jsonl, columns: {input: x}}\n"
    assert problems(write(tmp_path, "e.eval.yaml", jsonl)) == [
        f"{tmp_path / 'e.eval.yaml'}:2: tests: 'columns:' is for .csv files and hf:// datasets only"
    ]


def test_a_csv_changed_after_the_check_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "t.csv", "id,input\na,x\n")
    loaded = load_eval(write(tmp_path, "t.eval.yaml", "graders: [{type: is-json}]\ntests: t.csv\n"))
    write(tmp_path, "t.csv", "id,input\na,x\nb,y\n")
    with pytest.raises(EvalFileError, match="changed after it was checked"):
        list(loaded.tests)


def test_a_missing_datasets_extra_is_a_config_error_with_the_install_hint(tmp_path: Path) -> None:
    write(tmp_path, "h.eval.yaml", "graders: [{type: is-json}]\ntests: hf://./data?split=test\n")
    hide = (
        "import runpy, sys; sys.modules['datasets'] = None; "  # as if the extra were missing
        "sys.argv = ['evalrun', *sys.argv[1:]]; runpy.run_module('evalrun', run_name='__main__')"
    )
    for command in ("validate", "run"):
        done = run_cli_hiding(hide, command, "h.eval.yaml", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert (
            "h.eval.yaml:2: tests: hf://./data?split=test needs the [datasets] extra, which is "
            f"not installed (missing: datasets): {install_hint('datasets')}"
        ) in done.stderr + done.stdout
        assert "evalrun[" not in done.stderr + done.stdout


def run_cli_hiding(code: str, *args: str, cwd: Path) -> object:
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_schema_accepts_a_source_with_columns_and_refuses_unknown_keys() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "docs" / "schemas" / "eval.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    good = {"tests": {"from": "hf://./d?split=test", "columns": {"input": "question"}}}
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors({"tests": {"from": "a.csv", "columns": {"inptu": "q"}}}))
    assert list(validator.iter_errors({"tests": {"form": "a.csv"}}))


# --- datasets (the [datasets] extra) ---------------------------------------------------------


@pytest.fixture
def datasets() -> object:
    return pytest.importorskip("datasets")


def test_the_dataset_worked_example_runs_as_the_doc_shows(tmp_path: Path, datasets) -> None:
    import subprocess

    made = subprocess.run(
        [sys.executable, "-c", block("### A dataset, worked", "python")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    write(tmp_path, "math.eval.yaml", block("`math.eval.yaml` reads", "yaml"))
    (summary,) = shown("$ evalrun run math.eval.yaml")
    ran = run_cli("run", "math.eval.yaml", "--out", "out", cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert summary in ran.stdout
    results, _ = read_bundle(tmp_path / "out")
    assert [(r["id"], r["status"]) for r in results] == [("q1", "passed"), ("q2", "passed")]


def save(tmp_path: Path, datasets, rows: dict) -> None:
    split = datasets.Dataset.from_dict(rows)
    datasets.DatasetDict({"test": split}).save_to_disk(str(tmp_path / "d"))


def test_dataset_rows_are_checked_and_named_by_row_and_column(tmp_path: Path, datasets) -> None:
    save(
        tmp_path,
        datasets,
        {
            "q": ["a?", None, "c?"],
            "n": [7, 8, 7],
            "msgs": [[{"role": "user", "content": "hi"}]] * 3,
        },
    )
    ref = "hf://./d?split=test"
    eval_ = (
        "graders: [{type: is-json}]\ntests:\n  from: " + ref + "\n  columns: {id: n, input: q}\n"
    )
    assert problems(write(tmp_path, "a.eval.yaml", eval_)) == [
        f"{ref}: row 1: tests[1].input (column 'q'): Field required",
    ]
    eval_ = eval_.replace("input: q", "input: msgs")
    assert problems(write(tmp_path, "b.eval.yaml", eval_)) == [
        f"{ref}: row 2: tests[2].id (column 'n'): duplicate test id '7' (first used on row 0); "
        "ids must be unique"
    ]
    loaded = load_eval(write(tmp_path, "c.eval.yaml", eval_.replace("test\n", "test&limit=2\n")))
    cases = list(loaded.tests)
    assert [(c.id, c.input_messages[0].content) for c in cases] == [("7", "hi"), ("8", "hi")]


def test_dataset_references_are_checked_at_the_tests_line(tmp_path: Path, datasets) -> None:
    save(tmp_path, datasets, {"input": ["x"], "title": ["t"]})
    at = f"{tmp_path / 'e.eval.yaml'}:2: tests"
    cases = {
        "hf://./d?split=tset": f"{at}: hf://./d?split=tset: no split 'tset'; did you mean 'test'? (test)",
        "hf://./d?split=test&limt=1": f"{at}: hf://./d?split=test&limt=1: unknown option 'limt'; did you mean 'limit'? (options: split, limit)",
        "hf://./d?limit=0": f"{at}: hf://./d?limit=0: limit must be a whole number above 0, not '0'",
        "hf://./nowhere": f"{at}: hf://./nowhere: no such folder or file: {tmp_path / 'nowhere'}",
        "hf://./d?split=test": f"{at}: hf://./d?split=test: title: unknown column: not a test key (rename it, or pick the columns to read with 'columns:')",
    }
    for ref, problem in cases.items():
        assert problems(
            write(tmp_path, "e.eval.yaml", f"graders: [{{type: is-json}}]\ntests: {ref}\n")
        ) == [problem], ref


def test_an_unreachable_hub_dataset_is_a_clean_error(tmp_path: Path, datasets) -> None:
    import os

    write(
        tmp_path,
        "h.eval.yaml",
        "graders: [{type: is-json}]\ntests: hf://someone/some-data?split=test\n",
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
    }
    done = run_cli("validate", "h.eval.yaml", cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert (
        "h.eval.yaml:2: tests: hf://someone/some-data?split=test: cannot load: "
        in done.stdout + done.stderr
    )
