"""AgentV's tests read from other files and its run options (docs/eval-files.md, "AgentV files"):
file:// entries and globs, a folder of cases, a tests file in the current format,
default_test: file://, scenarios, and the keys that map or load with a warning."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalrun.spec.loader import EvalFileError, LoadedEval, load_eval


def write(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def ids(loaded: LoadedEval) -> list[str]:
    return [case.id for case in loaded.tests]


def test_file_entries_and_globs_are_spliced_among_the_inline_tests(tmp_path: Path) -> None:
    write(tmp_path / "cases/a.yaml", "- {id: a1, vars: {input: one}, assert: [Is one]}\n")
    write(tmp_path / "cases/b.jsonl", '{"id": "b1", "vars": {"input": "two"}}\n')
    write(tmp_path / "more/c.yaml", "tests:\n  - {id: c1, vars: {input: three}}\n")
    path = write(
        tmp_path / "suite.yaml",
        """\
        providers: [mock]
        prompts: ["Q: {{ input }}"]
        assert: [{type: contains, value: Q}]
        tests:
          - file://cases/*
          - {id: inline, vars: {input: four}}
          - file://more/c.yaml
        """,
    )
    loaded = load_eval(path)
    assert ids(loaded) == ["a1", "b1", "inline", "c1"]
    a1 = loaded.tests[0]
    assert a1.input_messages[0].text() == "Q: one"
    assert [g.type for g in [*loaded.spec.graders, *a1.graders]] == ["contains", "llm-rubric"]
    assert loaded.tests[2].line == 6  # an inline test keeps its own line


def test_a_missing_or_unreadable_tests_file_is_an_error_at_its_reference(tmp_path: Path) -> None:
    write(tmp_path / "rows.txt", "id: x\n")
    path = write(
        tmp_path / "suite.yaml",
        "providers: [mock]\ntests:\n  - {id: a, vars: {input: q}}\n  - file://nope.yaml\n",
    )
    with pytest.raises(EvalFileError, match=r"suite.yaml:4: tests\[1\]: tests file not found"):
        load_eval(path)
    path.write_text("providers: [mock]\ntests:\n  - file://rows.txt\n")
    with pytest.raises(EvalFileError, match=r":3: tests\[0\]: tests file rows.txt: evalrun reads"):
        load_eval(path)


def test_a_folder_of_cases_names_each_case_after_its_folder(tmp_path: Path) -> None:
    write(tmp_path / "cases/b-second/case.yaml", "input: two\nassert: [Says two]\n")
    write(tmp_path / "cases/a-first/case.yaml", "id: own-id\ninput: one\nassert: [Says one]\n")
    (tmp_path / "cases/no-case").mkdir()
    path = write(tmp_path / "EVAL.yaml", "name: dirs\ntests: ./cases/\n")
    loaded = load_eval(path)
    assert ids(loaded) == ["own-id", "b-second"]
    assert loaded.tests[1].graders[0].config["rubric"] == ["Says two"]
    empty = write(tmp_path / "empty/EVAL.yaml", "name: dirs\ntests: ./none/\n")
    (tmp_path / "empty/none").mkdir()
    with pytest.raises(EvalFileError, match="has no \\*/case.yaml"):
        load_eval(empty)


def test_a_current_format_tests_file_takes_the_suites_context(tmp_path: Path) -> None:
    write(tmp_path / "cases.yaml", "- {id: a, vars: {input: hi}, assert: [Greets]}\n")
    path = write(
        tmp_path / "suite.yaml",
        """\
        input: [{role: system, content: Be brief.}]
        prompts: ["{{ input }}"]
        tests: ./cases.yaml
        """,
    )
    case = load_eval(path).tests[0]
    assert [(m.role, m.text()) for m in case.input_messages] == [
        ("system", "Be brief."),
        ("user", "hi"),
    ]


def test_an_evalrun_tests_file_is_still_streamed(tmp_path: Path) -> None:
    write(tmp_path / "cases.jsonl", '{"id": "a", "input": "q"}\n')
    path = write(tmp_path / "e.eval.yaml", "graders: [{type: is-json}]\ntests: cases.jsonl\n")
    assert load_eval(path).tests_file == tmp_path / "cases.jsonl"


def test_default_test_from_a_file(tmp_path: Path) -> None:
    write(tmp_path / "defaults.yaml", "vars: {who: Ada}\nassert: [{type: icontains, value: ada}]\n")
    path = write(
        tmp_path / "suite.yaml",
        "prompts: ['Hi {{ who }}']\ndefault_test: file://defaults.yaml\ntests: [{id: a, vars: {}}]\n",
    )
    loaded = load_eval(path)
    assert loaded.tests[0].input_messages[0].text() == "Hi Ada"
    assert loaded.spec.graders[0].type == "icontains"


def test_scenarios_cross_config_rows_with_test_rows(tmp_path: Path) -> None:
    write(
        tmp_path / "scenarios/extra.yaml",
        "scenarios:\n  - config: [{vars: {lang: German, hi: hallo}}]\n"
        "    tests: [{id: own, vars: {phrase: hello}, assert: [{type: equals, value: '{{ hi }}'}]}]\n",
    )
    path = write(
        tmp_path / "suite.yaml",
        """\
        prompts: ["Translate '{{ phrase }}' to {{ lang }}."]
        scenarios:
          - config:
              - {id: es, vars: {lang: Spanish, hi: hola}}
              - {id: fr, vars: {lang: French, hi: bonjour}}
            tests:
              - {vars: {phrase: hello}, assert: [{type: equals, value: "{{ hi }}"}]}
              - {vars: {phrase: thanks}, assert: [Polite]}
          - file://scenarios/*.yaml
        """,
    )
    loaded = load_eval(path)
    assert ids(loaded) == [
        "es__scenario_test_1",
        "es__scenario_test_2",
        "fr__scenario_test_1",
        "fr__scenario_test_2",
        "own",
    ]
    fr = loaded.tests[2]
    assert fr.input_messages[0].text() == "Translate 'hello' to French."
    assert fr.graders[0].value == "bonjour"


def test_run_options_map_and_what_changes_nothing_is_a_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path / "suite.yaml",
        """\
        name: options
        threshold: 0.7
        target: {name: sut, hooks: {before_each: x}}
        tags: {experiment: baseline}
        defaults: {system_message: Be terse.}
        preprocessors: [{type: xlsx, command: [bun, x.ts]}]
        input_files: [shared.md]
        default_test: {options: {transform: file://t.ts}}
        tests:
          - id: a
            input: q
            input_files: [own.md]
            assertions:
              - {type: contains, value: x, id: HAS_X}
              - {type: is-json, threshold: 0.2}
          - id: b
            input: q
            execution: {skip_defaults: true}
            assertions: [{type: is-json}]
        """,
    )
    loaded = load_eval(path)
    assert loaded.spec.target == "sut"
    assert loaded.spec.metadata["tags"] == {"experiment": "baseline"}
    a, b = loaded.tests
    assert [(g.name, g.threshold) for g in a.graders] == [("HAS_X", 0.7), ("is-json", 0.2)]
    assert [Path(f).name for f in a.input_files] == ["shared.md", "own.md"]
    assert b.input_files == []
    assert [m.role for m in a.input_messages] == ["user"]  # AgentV sends no system_message
    warned = "\n".join(loaded.warnings)
    for line, key in (
        (3, "target: only the name is used: hooks are ignored"),
        (5, "defaults.system_message: ignored, as AgentV ignores it"),
        (6, "preprocessors: ignored"),
        (8, "default_test.options: ignored (transform)"),
    ):
        assert f"{path}:{line}: {key}" in warned


def test_default_test_threshold_wins_over_the_suites(tmp_path: Path) -> None:
    path = write(
        tmp_path / "suite.yaml",
        "threshold: 0.9\ndefault_test: {threshold: 0.6}\nprompts: ['{{ input }}']\n"
        "tests: [{id: a, vars: {input: q}, assert: [{type: is-json}]}]\n",
    )
    assert load_eval(path).tests[0].graders[0].threshold == 0.6


def test_an_llm_rubrics_judge_options(tmp_path: Path) -> None:
    path = write(
        tmp_path / "suite.yaml",
        """\
        prompts: ["{{ input }}"]
        tests:
          - id: a
            vars: {input: q}
            assert:
              - {type: llm-rubric, value: Is kind, target: other_judge, temperature: 0.3}
              - {type: llm-rubric, value: Is brief, max_steps: 3}
              - {type: llm-rubric, value: Is right, prompt: {command: [bun, p.ts]}}
        """,
    )
    loaded = load_eval(path)
    own_judge, stepped, templated = loaded.tests[0].graders
    assert own_judge.config["provider"] == "other_judge"
    assert own_judge.config["temperature"] == 0.3
    assert own_judge.access is not None and own_judge.access.allow == ["other_judge"]
    assert stepped.config["max_steps"] == 3
    assert templated.config["rubric"] == ["Is right"]
    warned = "\n".join(loaded.warnings)
    assert "tests[0].graders[1].max_steps: ignored: its judge takes no tool steps" in warned
    assert "tests[0].graders[2].prompt: ignored: evalrun's llm-rubric asks its own" in warned


def test_a_custom_assertion_runs_its_script_found_walking_up(tmp_path: Path) -> None:
    script = write(tmp_path / ".agentv/assertions/min-words.ts", "export default () => 1\n")
    path = write(
        tmp_path / "evals/suite.yaml",
        """\
        prompts: ["{{ input }}"]
        tests:
          - id: a
            vars: {input: q}
            assert: [{type: min-words, min: 3}, {type: not-contains, value: x}]
        """,
    )
    custom, negated = load_eval(path).tests[0].graders
    assert (custom.type, custom.name, custom.argv) == (
        "script",
        "min-words",
        ["bun", "run", str(script.resolve())],
    )
    assert custom.config == {"min": 3}
    assert (negated.type, negated.negate) == ("contains", True)
    path.write_text(path.read_text().replace("min-words", "max-words"))
    with pytest.raises(EvalFileError, match="unknown grader type 'max-words'"):
        load_eval(path)


def test_a_test_with_criteria_and_no_graders_is_judged_on_them(tmp_path: Path) -> None:
    path = write(
        tmp_path / "e.eval.yaml",
        "target: mock\ntests:\n  - {id: a, input: q, criteria: Names Paris.}\n",
    )
    grader = load_eval(path).tests[0].graders[0]
    assert (grader.type, grader.name) == ("llm-rubric", "criteria")
    bare = write(tmp_path / "bare.eval.yaml", "tests:\n  - {id: a, input: q}\n")
    with pytest.raises(EvalFileError, match="tests without graders: a"):
        load_eval(bare)


@pytest.mark.parametrize(("threshold", "status"), [(None, "failed"), (0.7, "passed")])
def test_an_agentv_script_grader_passes_at_the_threshold_the_file_sets(
    tmp_path: Path, threshold: float | None, status: str
) -> None:
    """A score of 0.75 and no ``pass``: AgentV's 0.8 unless a threshold was set (the suite's
    ``threshold`` maps onto the grader's)."""
    import asyncio
    import sys

    from evalrun.launcher.launch import LaunchContext, launch_grader
    from evalrun.spec.models import GraderSpec, TestCase

    given = {} if threshold is None else {"threshold": threshold}
    spec = GraderSpec(command=[sys.executable, "-c", "print('{\"score\": 0.75}')"], **given)
    ctx = LaunchContext(eval_dir=tmp_path, judge=None, wire="agentv", agentv_rules=True)
    case = TestCase(id="a", input="q")
    result = asyncio.run(launch_grader(spec, case, "answer", ctx)).result
    assert (result.score, result.status, result.threshold) == (0.75, status, threshold or 0.8)


def test_a_promptfoo_csv_reference_gives_one_test_per_row(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text(
        "id,vars.input,__expected,__expected2,__metric,__threshold,__metadata:tags[],__description,lang\n"
        'greet,Say hi,"icontains-any:hello, hi",not-contains:bye,greeting,0.6,"a,b",Greets,en\n'
        ",Count,starts-with:1,grade:Counts up,,,,,\n"
    )
    path = write(
        tmp_path / "suite.yaml",
        "providers: [mock]\nprompts: ['{{ input }}']\ntests: [file://rows.csv]\n",
    )
    greet, second = load_eval(path).tests
    assert (greet.id, second.id) == ("greet", "row-2")
    assert greet.input_messages[0].text() == "Say hi"
    assert [(g.type, g.name, g.value, g.negate, g.threshold) for g in greet.graders] == [
        ("icontains-any", "greeting-1", ["hello", "hi"], False, 0.6),
        ("contains", "greeting-2", "bye", True, 0.6),
    ]
    assert greet.criteria == "Greets"
    assert greet.metadata["tags"] == ["a", "b"] and greet.metadata["vars"] == {"lang": "en"}
    starts, rubric = second.graders
    assert (starts.type, starts.threshold) == ("starts-with", 0.75)
    assert (rubric.type, rubric.config["rubric"]) == ("llm-rubric", ["Counts up"])


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("javascript:output.length > 3", "code assertions in a CSV cell are not run"),
        ("latency(100):", "__expected latency: not one of"),
    ],
)
def test_a_csv_cell_evalrun_cannot_run_is_refused(tmp_path: Path, cell: str, message: str) -> None:
    (tmp_path / "rows.csv").write_text(f'id,input,__expected\na,q,"{cell}"\n')
    path = write(tmp_path / "suite.yaml", "name: csv\ntests: [file://rows.csv]\n")
    with pytest.raises(
        EvalFileError, match=rf"suite.yaml:2: tests\[0\]: tests file rows.csv: .*{message}"
    ):
        load_eval(path)
