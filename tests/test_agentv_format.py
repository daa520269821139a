"""AgentV eval files load as they are: the 4.x spellings and the current (promptfoo-style) ones
map onto the same models, run to the same results, and validate against ``evalrun schema``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalrun.spec.loader import EvalFileError, load_eval
from tests.conftest import ROOT, read_bundle, run_cli

FIXTURES = ROOT / "tests" / "data" / "agentv" / "evals"
PAIRS = [("rag-4x", "rag-current"), ("checks-4x", "checks-current")]
BUNDLES: dict[str, Path] = {}


def write(tmp_path: Path, body: str, name: str = "suite.eval.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def outcome(out: Path) -> list[tuple[Any, ...]]:
    rows, _ = read_bundle(out)
    return sorted(
        (
            row["id"],
            row["status"],
            row["score"],
            sorted((g["name"], g["status"], g["score"]) for g in row["graders"]),
        )
        for row in rows
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, list[tuple[Any, ...]]]]:
    out: dict[str, tuple[int, list[tuple[Any, ...]]]] = {}
    for name in [n for pair in PAIRS for n in pair]:
        bundle = tmp_path_factory.mktemp(name) / "out"
        result = run_cli(str(FIXTURES / f"{name}.eval.yaml"), "--out", str(bundle), "-q")
        assert result.returncode in (0, 1), result.stdout + result.stderr
        out[name] = (result.returncode, outcome(bundle))
        BUNDLES[name] = bundle
    return out


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(("old", "new"), PAIRS)
def test_both_generations_run_to_the_same_results(runs, old: str, new: str) -> None:
    """The same cases, statuses and scores, grader by grader in the file's order. Only an
    unnamed assertion's name differs: the current format takes AgentV's current names
    (``contains-Baikal``, docs/eval-files.md, "Grader names"), 4.x the type."""

    def unnamed(run: tuple[int, list[tuple[Any, ...]]]) -> tuple[int, list[tuple[Any, ...]]]:
        code, rows = run
        return code, [(i, s, v, sorted((gs, gv) for _, gs, gv in g)) for i, s, v, g in rows]

    assert unnamed(runs[old]) == unnamed(runs[new])


def test_the_rag_fixture_scores_what_the_scripted_judge_says(runs) -> None:
    code, rows = runs["rag-current"]
    assert code == 1
    by_id = {row[0]: row for row in rows}
    assert by_id["everest"][1:3] == ("passed", 1.0)
    baikal = by_id["baikal"]
    assert baikal[1] == "failed"
    # a script grader that prints no "pass" passes at 0.8 in an AgentV file, as in AgentV
    # (docs/grader-protocol.md, "AgentV files")
    assert baikal[3] == [
        ("contains-Baikal", "passed", 1.0),
        ("contextual_precision", "failed", 0.5),
        ("llm-rubric", "failed", 0.25),
    ]
    assert baikal[2] == pytest.approx((1.0 + 0.5 + 0.25) / 3, abs=1e-3)


def test_the_checks_fixture_maps_every_assertion_type(runs) -> None:
    code, rows = runs["checks-current"]
    by_id = {row[0]: row for row in rows}
    # AgentV's rule (docs/eval-files.md, "AgentV's scoring rule"): 4 of 5 checks pass, so the
    # aggregate is 0.8 and the test passes though one check failed
    assert code == 0
    assert by_id["greet"][1:3] == ("passed", pytest.approx(0.8))
    assert dict((g[0], g[1]) for g in by_id["greet"][3]) == {
        "agentv_style": "passed",
        "icontains-any-2": "passed",
        "starts-with-Hello": "passed",
        "not-contains": "passed",
        "not-icontains": "failed",
    }
    assert {g[0] for g in by_id["order-json"][3]} == {
        "agentv_style",
        "is-json",
        "contains-all-2",
        'regex-"order":\\s*\\d+',
    }
    assert by_id["order-json"][1] == "passed"


def test_reports_show_the_checks_evidence(runs) -> None:
    bundle = BUNDLES["checks-current"]
    rows, _ = read_bundle(bundle)
    greet = next(row for row in rows if row["id"] == "greet")
    style = next(g for g in greet["graders"] if g["name"] == "agentv_style")
    assert style["checks"][0]["evidence"] == "hello ada"
    markdown = (bundle / "report.md").read_text()
    assert "| Check | Pass | Score | Reason | Evidence |" in markdown
    assert "| hello ada |" in markdown
    html = (bundle / "report.html").read_text()
    assert "<td>hello ada</td>" in html and ">Evidence<" in html


def test_current_format_maps_onto_the_models() -> None:
    loaded = load_eval(FIXTURES / "checks-current.eval.yaml")
    assert loaded.spec.target == "sut"
    greet = loaded.tests[0]
    assert greet.input == "Reply for beginners: Greet Ada."
    assert greet.expected_output == "Hello, Ada!"
    assert greet.metadata["topic"] == "greeting"
    by_name = {g.name: g for g in greet.graders}
    hello = by_name["starts-with-Hello"]  # AgentV's name for it (docs/eval-files.md)
    assert (hello.type, hello.value) == ("starts-with", "Hello")
    assert by_name["not-icontains"].negate and by_name["not-icontains"].type == "icontains"
    assert loaded.spec.graders[0].name == "agentv_style"
    rag = load_eval(FIXTURES / "rag-current.eval.yaml")
    everest = rag.tests[0]
    assert everest.criteria == "Gives the height in metres"
    assert [m.role for m in everest.expected_messages] == ["assistant", "assistant"]
    rubric = everest.graders[0]
    assert (rubric.type, rubric.config, rubric.weight) == (
        "llm-rubric",
        {"rubric": ["Gives the height in metres"]},
        1.0,
    )
    precision = rag.spec.graders[0]
    assert precision.access is not None and precision.access.max_calls == 10
    assert rag.deprecations == []


def test_4x_spellings_load_with_deprecation_notes_naming_the_replacement() -> None:
    loaded = load_eval(FIXTURES / "rag-4x.eval.yaml")
    assert loaded.spec.target == "sut"
    notes = "\n".join(loaded.deprecations)
    path = FIXTURES / "rag-4x.eval.yaml"
    assert f"{path}:12: eval_cases: AgentV 4.x's name: AgentV now uses 'tests'" in notes
    assert f"{path}:6: execution.target: AgentV 4.x's key: AgentV now uses 'providers'" in notes
    assert f"{path}:10: graders[0].script: AgentV 4.x's key: AgentV now uses 'command'" in notes
    assert "tests[0].graders[0].type: 'llm-grader' is AgentV 4.x's type: AgentV now uses" in notes
    assert "graders[0].type: 'code-grader' is AgentV 4.x's type: AgentV now uses 'script'" in notes
    assert "tests[0].input_messages: AgentV 4.x's name" in notes
    result = run_cli("validate", str(path))
    assert result.returncode == 0
    assert "(deprecated; still loads)" in result.stderr
    assert "ok (2 tests" in result.stdout


def test_vars_use_other_vars_and_every_prompt_makes_a_case(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        providers:
          - openai:gpt-4o-mini: {label: sut}
        defaults: {grader: judge}
        prompts:
          - id: plain
            raw: "Q: {{ question }}"
          - id: chat
            raw:
              - {role: system, content: "Talk to {{ audience }}."}
              - {role: user, content: "{{ vars.question }}"}
        default_test:
          vars: {audience: children}
        tests:
          - vars:
              who: {name: Ada}
              question: Who was {{ vars.who.name }}?
            assert: [Names her work on the Analytical Engine]
        """,
    )
    loaded = load_eval(path)
    assert (loaded.spec.target, loaded.spec.judge) == ("sut", "judge")
    # each prompt is a variant of the one test: a matrix column (docs/eval-files.md)
    assert [(case.id, case.prompt) for case in loaded.tests] == [
        ("test-1", "plain"),
        ("test-1", "chat"),
    ]
    assert loaded.prompts == ["plain", "chat"]
    assert loaded.tests[0].input == "Q: Who was Ada?"
    assert [(m.role, m.content) for m in loaded.tests[1].input_messages] == [
        ("system", "Talk to children."),
        ("user", "Who was Ada?"),
    ]
    assert loaded.tests[1].criteria == "Names her work on the Analytical Engine"


def test_a_prompt_file_is_read_beside_the_eval_file(tmp_path: Path) -> None:
    (tmp_path / "chat.json").write_text(
        json.dumps([{"role": "user", "content": "Translate: {{ text }}"}])
    )
    path = write(
        tmp_path,
        """
        providers: sut
        prompts: [file://chat.json]
        tests:
          - id: t
            vars: {text: Bonjour}
            assert: [{type: icontains, value: hello}]
        """,
    )
    assert load_eval(path).tests[0].input_messages[0].content == "Translate: Bonjour"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            """
            providers: sut
            prompts: ["Hello {{ nmae }}"]
            tests:
              - id: t
                vars: {name: Ada}
                assert: [{type: contains, value: Ada}]
            """,
            ":3: prompts[0]: '{{ nmae }}' names no var (vars: name)",
        ),
        (
            """
            providers: sut
            prompts: ["{{ input }}"]
            tests:
              - id: t
                vars: {input: hi}
                assert:
                  - type: contains
                    value: hi
                  - type: contains
            """,
            ":10: tests[0].graders[1]: Value error, a 'contains' grader needs 'value'",
        ),
        (
            """
            providers: sut
            tests:
              - id: t
                assert: [{type: contains, value: x}]
                vars: {question: hi}
            """,
            ":4: tests[0]: no input: give top-level 'prompts'",
        ),
        (
            """
            providers: sut
            prompts: ["{{ input }}"]
            tests:
              - id: t
                vars: {input: hi}
                assert: [{type: javascript, value: "output.length > 2"}]
            """,
            ":7: tests[0].graders[0].type: Value error, unknown grader type 'javascript'",
        ),
    ],
)
def test_current_format_errors_name_file_line_and_key(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = write(tmp_path, body)
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert f"{path}{expected}" in str(caught.value)


def test_validate_accepts_both_generations_and_the_examples() -> None:
    files = [*sorted((ROOT / "evals").rglob("*.eval.yaml")), *sorted(FIXTURES.glob("*.eval.yaml"))]
    result = run_cli("validate", *map(str, files))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok (") == len(files)


jsonschema = pytest.importorskip("jsonschema")


def published(*args: str) -> Any:
    result = run_cli("schema", *args)
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def test_the_schema_accepts_every_example_and_agentv_fixture() -> None:
    schema = published()
    assert schema["$id"] == "eval.schema.json"
    validator = jsonschema.Draft202012Validator(schema)
    files = [*sorted((ROOT / "evals").rglob("*.eval.yaml")), *sorted(FIXTURES.glob("*.eval.yaml"))]
    assert len(files) >= 11
    for path in files:
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], path


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(
    "doc",
    [
        {"description": "no tests at all"},
        {"tests": [{"id": "a", "input": "q", "inptu": "typo"}], "graders": [{"type": "is-json"}]},
        {"tests": [{"id": "a", "input": "q", "graders": [{"type": "is-json", "timeout": "x"}]}]},
        {"eval_cases": [], "execution": {"target": 3}},
        {"tests": [], "defaults": {"target": "old"}},
    ],
)
def test_the_schema_still_rejects_bad_files(doc: dict[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(published())
    assert list(validator.iter_errors(doc))


def test_the_targets_schema_accepts_the_shipped_targets_files() -> None:
    schema = published("--targets")
    assert schema["$id"] == "targets.schema.json"
    validator = jsonschema.Draft202012Validator(schema)
    for path in [*ROOT.glob("evals/**/targets.yaml"), FIXTURES / "targets.yaml"]:
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path
    assert list(validator.iter_errors({"targets": [{"kind": "mock"}]}))  # no name


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(("name", "args"), [("eval", ()), ("targets", ("--targets",))])
def test_the_committed_schemas_are_what_the_cli_prints(name: str, args: tuple[str, ...]) -> None:
    committed = json.loads((ROOT / "docs" / "schemas" / f"{name}.schema.json").read_text())
    flag = " ".join(args)
    assert committed == published(*args), (
        f"docs/schemas/{name}.schema.json is stale: regenerate it with "
        f"`python -m evalrun schema {flag} > docs/schemas/{name}.schema.json`"
    )


def test_example_eval_files_point_editors_at_the_schema() -> None:
    for path in sorted((ROOT / "evals").rglob("*.eval.yaml")):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), path
        target = (path.parent / first.split("$schema=", 1)[1]).resolve()
        assert target == (ROOT / "docs" / "schemas" / "eval.schema.json").resolve(), path


def test_several_providers_are_the_columns_of_a_matrix_run(tmp_path: Path) -> None:
    """``providers: [a, b]`` is a targets-by-cases matrix (docs/results.md, "A matrix run"):
    every provider is a column, in order, never the first one alone; beside ``target`` it is
    an error at the line of the key."""
    path = write(
        tmp_path,
        """
        description: two providers
        providers:
          - sut
          - {id: "openai:gpt-4o", label: other}
        tests:
          - vars: {input: hi}
            assert: [{type: icontains, value: hi}]
        """,
    )
    loaded = load_eval(path)
    assert loaded.spec.targets == ["sut", "other"] and loaded.spec.target is None
    assert loaded.where(("targets", 1)) == f"{path}:5: targets[1]"
    both = write(
        tmp_path,
        """
        description: both
        target: sut
        providers: [a, b]
        tests:
          - vars: {input: hi}
            assert: [{type: icontains, value: hi}]
        """,
    )
    with pytest.raises(EvalFileError) as caught:
        load_eval(both)
    assert "give 'providers' or 'target', not both" in str(caught.value)
