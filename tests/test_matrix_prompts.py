"""Prompt variants as matrix columns (docs/results.md, "A matrix run"; docs/eval-files.md,
"Prompt variants"): results keyed by (case, target, prompt), one row per test, a column per
target x prompt in the summary and every report, resume, merge and compare per cell, the run
index's target filter, the run span naming every target. In this process through the Python
API with scripted ``mock`` targets and deterministic graders (no grader process); the
command line end to end, 2 targets x 2 prompts, runs under ``slow``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalrun.reporters import load_bundle, write_reports
from evalrun.reporters.compare import compare_bundles
from evalrun.reporters.github import annotations
from evalrun.reporters.merge import MergeError, merge_bundles
from evalrun.results.index import IndexedRun, list_runs, record
from evalrun.results.reader import read_case_results
from evalrun.session import EvalError
from evalrun.spec.loader import EvalFileError, load_eval
from tests.conftest import read_bundle, run_cli
from tests.test_matrix import project as matrix_project
from tests.test_matrix import run

TARGETS = """
targets:
  - name: paris-bot
    kind: mock
    default: "No idea."
    rules:
      - {match: "one word.*France", response: "Paris"}
      - {match: "Please.*France", response: "Paris, of course."}
  - name: terse-bot
    kind: mock
    default: "No idea."
    rules:
      - {match: "one word.*France", response: "Paris"}
"""

#: evalrun's own keys: the tests that share an id and name a `prompt` are its variants
OWN = """
description: capitals
graders:
  - {name: paris, type: icontains, value: paris}
tests:
  - {id: france, prompt: terse, input: "In one word: the capital of France?"}
  - {id: france, prompt: polite, input: "Please, the capital of France?"}
  - {id: spain, prompt: terse, input: "In one word: the capital of Spain?"}
  - {id: spain, prompt: polite, input: "Please, the capital of Spain?"}
"""

#: AgentV's current format: `prompts:` rendered with each test's vars
AGENTV = """
prompts:
  - {id: terse, raw: "In one word: {{ question }}"}
  - {id: polite, raw: "Please, {{ question }}"}
tests:
  - id: france
    vars: {question: "the capital of France?"}
    assert: [{type: icontains, value: paris}]
  - id: spain
    vars: {question: "the capital of Spain?"}
    assert: [{type: icontains, value: paris}]
"""

BOTH = ["paris-bot", "terse-bot"]
COLUMNS = ["paris-bot × terse", "paris-bot × polite", "terse-bot × terse", "terse-bot × polite"]


def project(tmp_path: Path, suite: str = OWN) -> Path:
    return matrix_project(tmp_path, suite, targets=TARGETS)


def cells(out: Path) -> dict[tuple[str, str, str], str]:
    lines, _ = read_bundle(out)
    found = {(line["id"], line["target"], line["prompt"]): line["status"] for line in lines}
    assert len(found) == len(lines)  # one line per cell
    return found


@pytest.mark.parametrize("suite", [OWN, AGENTV], ids=["own-keys", "agentv-prompts"])
def test_two_targets_by_two_prompts_are_one_bundle_keyed_by_case_target_prompt(
    tmp_path: Path, suite: str
) -> None:
    out = tmp_path / "run"
    outcome = run(project(tmp_path, suite), out, BOTH)
    assert outcome.exit_code == 1  # terse-bot fails every polite cell, both fail spain
    assert cells(out) == {
        ("france", "paris-bot", "terse"): "passed",
        ("france", "paris-bot", "polite"): "passed",
        ("france", "terse-bot", "terse"): "passed",
        ("france", "terse-bot", "polite"): "failed",
        ("spain", "paris-bot", "terse"): "failed",
        ("spain", "paris-bot", "polite"): "failed",
        ("spain", "terse-bot", "terse"): "failed",
        ("spain", "terse-bot", "polite"): "failed",
    }
    _, summary = read_bundle(out)
    assert summary["matrix"] == BOTH and summary["prompts"] == ["terse", "polite"]
    assert summary["counts"]["total"] == 8 and summary["missing"] == 0
    columns = {c["column"]: c for c in summary["columns"]}
    assert list(columns) == COLUMNS  # each target's variants side by side
    assert (columns["terse-bot × polite"]["target"], columns["terse-bot × polite"]["prompt"]) == (
        "terse-bot",
        "polite",
    )
    assert columns["paris-bot × terse"]["counts"]["passed"] == 1
    assert columns["terse-bot × polite"]["counts"]["failed"] == 2
    assert columns["paris-bot × polite"]["mean_score"] == pytest.approx(0.5)
    low, high = columns["paris-bot × polite"]["pass_rate_ci"]
    assert low < 0.5 < high


def test_one_target_with_prompt_variants_is_a_matrix_of_its_variants(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(project(tmp_path, AGENTV), out, "terse-bot")
    lines, summary = read_bundle(out)
    assert summary["target"] == "terse-bot" and "matrix" not in summary
    assert summary["prompts"] == ["terse", "polite"]
    assert [c["column"] for c in summary["columns"]] == ["terse-bot × terse", "terse-bot × polite"]
    assert {(line["id"], line["prompt"]) for line in lines} == {
        (case, prompt) for case in ("france", "spain") for prompt in ("terse", "polite")
    }
    assert "| Case | terse-bot × terse | terse-bot × polite |" in (out / "report.md").read_text()


def test_a_run_without_variants_writes_no_prompt_key(tmp_path: Path) -> None:
    suite = OWN.replace("prompt: terse, ", "").replace("prompt: polite, ", "")
    suite = suite.replace('id: france, input: "Please', 'id: france-2, input: "Please')
    suite = suite.replace('id: spain, input: "Please', 'id: spain-2, input: "Please')
    out = tmp_path / "run"
    run(project(tmp_path, suite), out, "paris-bot")
    lines, summary = read_bundle(out)
    assert len(lines) == 4 and not any("prompt" in line for line in lines)
    assert "prompts" not in summary and "columns" not in summary and "matrix" not in summary


def test_a_test_id_is_unique_per_prompt_variant(tmp_path: Path) -> None:
    twice = OWN.replace("id: spain, prompt: polite", "id: spain, prompt: terse")
    path = project(tmp_path, twice)
    with pytest.raises(EvalError) as caught:
        run(path, tmp_path / "o", "paris-bot")
    assert f"{path}:9: tests[3].id: duplicate test id 'spain' for prompt 'terse' (first used" in (
        str(caught.value)
    )


@pytest.mark.parametrize("streamed", [False, True])
def test_a_repeated_id_with_a_prompt_on_one_side_only_is_no_variant(
    tmp_path: Path, streamed: bool
) -> None:
    """Before variants, a repeated id was refused; a prompt on one of the two must not turn a
    mistake into a silent second column (the file's tests, and a .jsonl tests file)."""
    rows = ['{"id": "a", "input": "go"}', '{"id": "a", "input": "again", "prompt": "terse"}']
    if streamed:
        (tmp_path / "cases.jsonl").write_text("\n".join(rows) + "\n")
        tests, where = "tests: cases.jsonl\n", f"{tmp_path / 'cases.jsonl'}:2"
    else:
        tests, where = f"tests:\n  - {rows[0]}\n  - {rows[1]}\n", f"{tmp_path / 'e.eval.yaml'}:4"
    path = tmp_path / "e.eval.yaml"
    path.write_text("graders: [{type: contains, value: x}]\n" + tests)
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert str(caught.value) == (
        f"{where}: tests[1].id: duplicate test id 'a' for prompt 'terse' (first used on "
        f"{'line 1' if streamed else 'line 3'}); tests that share an id are prompt variants, "
        "and each names its prompt"
    )


def test_every_report_shows_a_column_per_target_and_prompt(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(project(tmp_path), out, BOTH)
    md = (out / "report.md").read_text()
    assert "| Prompts | terse, polite |" in md
    assert f"| Case | {' | '.join(COLUMNS)} |" in md
    assert (
        "| france | ✅ passed 1.000 | ✅ passed 1.000 | ✅ passed 1.000 | ❌ failed 0.000 |" in md
    )
    assert "| terse-bot × polite | 2 | 0 | 2 | 0 | 0 |" in md  # the per-column summary
    assert "**france @ terse-bot × polite**: failed" in md
    html = (out / "report.html").read_text().replace("<wbr>", "")
    assert "4 columns</h2>" in html and "france @ terse-bot × polite" in html
    junit = (out / "junit.xml").read_text()
    assert 'name="france @ terse-bot × polite"' in junit
    assert 'name="france @ terse-bot × terse"' in junit
    write_reports(out, ("json", "agentv"))
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["prompts"] == ["terse", "polite"]
    assert report["matrix"]["columns"] == COLUMNS
    france = next(row for row in report["matrix"]["rows"] if row["id"] == "france")
    assert france["cells"]["terse-bot × polite"] == {"status": "failed", "score": 0.0}
    failure = next(f for f in report["failures"] if f["id"] == "france")
    assert (failure["target"], failure["prompt"]) == ("terse-bot", "polite")
    titles = [line for line in annotations(load_bundle(out)) if "france" in line]
    assert len(titles) == 1 and "france @ terse-bot × polite failed" in titles[0]
    # AgentV's layout: a variant is its own test folder, read back as the same cell
    rows = [json.loads(line) for line in (out / "index.jsonl").read_text().splitlines()]
    assert len({row["result_dir"] for row in rows}) == 8
    row = next(r for r in rows if r["test_id"] == "france__polite" and r["target"] == "terse-bot")
    assert row["prompt_id"] == "polite"
    agentv = tmp_path / "agentv"
    agentv.mkdir()
    (agentv / "index.jsonl").write_text((out / "index.jsonl").read_text())
    back = {(c.id, c.target, c.prompt): c.status for c in read_case_results(agentv)}
    assert back == cells(out)


def test_resume_grades_only_the_missing_cells(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, BOTH)
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    kept = [line for line in lines if json.loads(line)["prompt"] == "terse"]
    results.write_text("\n".join(kept) + "\n")  # every polite cell was lost
    run(path, out, BOTH, resume=out)
    after, summary = read_bundle(out)
    assert after[:4] == [json.loads(line) for line in kept]  # kept as they were
    assert sorted((line["id"], line["target"], line["prompt"]) for line in after[4:]) == sorted(
        (case, target, "polite") for case in ("france", "spain") for target in BOTH
    )
    assert summary["counts"]["total"] == 8 and summary["missing"] == 0


def test_resume_of_one_target_counts_each_variant(tmp_path: Path) -> None:
    path = project(tmp_path)
    out = tmp_path / "run"
    run(path, out, "paris-bot")
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n")
    run(path, out, "paris-bot", resume=out)
    after, summary = read_bundle(out)
    assert len(after) == 4 and summary["missing"] == 0
    assert len({(line["id"], line["prompt"]) for line in after}) == 4


def test_shards_merge_cell_by_cell_and_overlap_per_prompt(tmp_path: Path) -> None:
    path = project(tmp_path)
    shards = [tmp_path / "s1", tmp_path / "s2"]
    for n, shard in enumerate(shards, start=1):
        run(path, shard, BOTH, shard=f"{n}/2")
    merged = merge_bundles(shards, tmp_path / "merged")
    assert merged.summary["counts"]["total"] == 8
    assert merged.summary["prompts"] == ["terse", "polite"]
    assert [c["column"] for c in merged.summary["columns"]] == COLUMNS
    full = next(shard for shard in shards if read_case_results(shard))
    copy = tmp_path / "copy"
    shutil.copytree(full, copy)
    with pytest.raises(MergeError) as caught:
        merge_bundles([full, copy], tmp_path / "twice")
    assert "× terse (repeat 0) in" in str(caught.value)


def test_compare_pairs_two_runs_cell_by_cell(tmp_path: Path) -> None:
    path = project(tmp_path)
    before, after = tmp_path / "before", tmp_path / "after"
    run(path, before, BOTH)
    run(path, after, ["terse-bot"])
    comparison = compare_bundles(load_bundle(before), load_bundle(after))
    assert {c.id for c in comparison.cases} == {
        f"{case} @ terse-bot × {prompt}"
        for case in ("france", "spain")
        for prompt in ("terse", "polite")
    }
    assert "france @ paris-bot × polite" in comparison.only_base


def test_the_terminal_table_has_a_column_per_target_and_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalrun.commands.run import _print_table

    out = tmp_path / "run"
    run(project(tmp_path), out, BOTH)
    _, summary = read_bundle(out)
    rows = read_case_results(out)
    _print_table(rows, len(rows), summary, out)
    shown = capsys.readouterr().out
    header = next(line for line in shown.splitlines() if "case" in line)
    places = [header.index(column) for column in COLUMNS]
    assert places == sorted(places)
    assert "terse-bot × polite: 2 cases: 2 failed" in shown
    assert "all 4 columns: 8 cells: 3 passed, 5 failed" in shown


def test_the_run_index_target_filter_matches_any_one_target(tmp_path: Path) -> None:
    from evalrun.viewer.catalog import RunFilter, history, run_list

    path = project(tmp_path)
    index = tmp_path / "index.sqlite"
    for name, targets in (("one", "terse-bot"), ("two", BOTH), ("three", "paris-bot")):
        out = tmp_path / name
        outcome = run(path, out, targets)
        _, summary = read_bundle(out)
        record(index, IndexedRun.from_summary(summary, out, outcome.exit_code, None))
    assert [r.target for r in list_runs(index, target="terse-bot")] == [
        "paris-bot, terse-bot",
        "terse-bot",
    ]
    assert [r.target for r in list_runs(index, target="paris-bot", limit=1)] == ["paris-bot"]
    assert list_runs(index, target="paris") == []  # a whole name, not a part of one
    page = run_list(index, RunFilter(target="paris-bot"), start=0, count=10)
    assert page["total"] == 2 and page["targets"] == BOTH
    series = {s["target"]: s["points"] for s in history(index, "capitals")["series"]}
    assert list(series) == ["terse-bot × terse", "terse-bot × polite", *COLUMNS[:2]]
    assert [p["id"] for p in series["terse-bot × polite"]] == [1, 2]
    assert series["paris-bot × terse"][0]["pass_rate"] == 0.5


def test_the_run_span_names_every_target() -> None:
    pytest.importorskip("opentelemetry.sdk", reason="needs the [otel] extra")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from evalrun.telemetry.spans import Model, Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = {}
    for name, targets in (("matrix", ["local", "mock"]), ("one", ["mock"])):
        tracing = Tracing(provider, lambda t: Model(t, "mock", None), None)
        tracing.begin_run(name, targets, None)
        tracing.end_run({"counts": {}}, 0)
        (span,) = [s for s in exporter.get_finished_spans() if s.name == f"evalrun {name}"]
        spans[name] = dict(span.attributes or {})
    assert spans["matrix"]["evalrun.target"] == "local, mock"
    assert list(spans["matrix"]["evalrun.targets"]) == ["local", "mock"]
    assert spans["one"]["evalrun.target"] == "mock" and "evalrun.targets" not in spans["one"]


@pytest.mark.slow  # two real `evalrun` processes (~8 s on a loaded 2-core machine)
def test_the_command_line_runs_two_targets_by_two_prompts_and_lists_the_run(
    tmp_path: Path,
) -> None:
    path = project(tmp_path, AGENTV)
    out = tmp_path / "run"
    done = run_cli(
        str(path), "--target", "paris-bot", "--target", "terse-bot", "--out", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "all 4 columns: 8 cells: 3 passed, 5 failed" in done.stdout
    assert "france @ terse-bot × polite" in done.stderr  # the progress lines name the cell
    assert len(cells(out)) == 8
    _, summary = read_bundle(out)
    assert [c["column"] for c in summary["columns"]] == COLUMNS
    md = (out / "report.md").read_text()
    assert f"| Case | {' | '.join(COLUMNS)} |" in md
    listed = run_cli("runs", "--target", "terse-bot", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["target"] == "paris-bot, terse-bot" and row["exit_code"] == 1
