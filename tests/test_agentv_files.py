"""AgentV's content parts as AgentV shows them to a model, and the valueless llm-rubric AgentV
skips (docs/eval-files.md, "Keys both generations share", "AgentV's current format")."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrun.spec.loader import load_eval


def write(folder: Path, text: str) -> Path:
    path = folder / "suite.eval.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_part_is_read_and_the_parts_joined_as_agentv_joins_them(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("month,revenue\njan,10\n\n", encoding="utf-8")
    path = write(
        tmp_path,
        "providers: [sut]\n"
        "prompts: ['{{ input }}']\n"
        "tests:\n"
        "  - id: alone\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content:\n"
        "            - {type: file, value: data.csv}\n"
        '            - {type: text, value: "Summarize it.\\n"}\n'
        "  - id: several\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - {role: system, content: Be brief.}\n"
        "        - role: user\n"
        "          content:\n"
        "            - {type: text, value: 'Look:'}\n"
        "            - {type: file, value: data.csv}\n"
        "  - id: missing\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content: [{type: file, value: nowhere.md}, {type: text, value: Hi}]\n",
    )
    tests = load_eval(path).spec.tests
    assert isinstance(tests, list)
    tagged = '<file path="data.csv">\nmonth,revenue\njan,10\n</file>'
    assert tests[0].input_messages[-1].text() == f"{tagged}\n\nSummarize it."
    assert tests[1].input_messages[-1].text() == f"Look:\n{tagged}"
    # a file evalrun cannot read stays a part as written (AgentV also looks elsewhere)
    assert tests[2].input_messages[-1].text() == "Hi"


def test_a_file_part_is_looked_for_in_each_folder_up_to_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV resolves ``../shared/x.md`` from the eval file's folder and each folder above it,
    up to the repository's root; not above it (docs/eval-files.md, "AgentV files")."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "examples" / "shared").mkdir(parents=True)
    (repo / "examples" / "shared" / "x.md").write_text("found\n", encoding="utf-8")
    (tmp_path / "outside.md").write_text("secret\n", encoding="utf-8")
    evals = repo / "examples" / "suite" / "evals"
    evals.mkdir(parents=True)
    monkeypatch.chdir(evals)
    path = write(
        evals,
        "providers: [sut]\n"
        "prompts: ['{{ input }}']\n"
        "tests:\n"
        "  - id: up\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content: [{type: text, value: Read}, {type: file, value: ../shared/x.md}]\n"
        "  - id: above-the-repository\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content: [{type: text, value: Read}, {type: file, value: outside.md}]\n",
    )
    tests = load_eval(path).spec.tests
    assert isinstance(tests, list)
    assert tests[0].input_messages[-1].text() == (
        'Read\n\n<file path="../shared/x.md">\nfound\n</file>'
    )
    assert tests[1].input_messages[-1].text() == "Read"  # the repository is the boundary


def test_a_file_part_read_from_the_working_folder_outside_the_repository_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV looks in the working folder last: a file found only there depends on where the
    run was started, so it is said where the part stands (docs/eval-files.md, "AgentV files").
    The repository's own files, and a message left as written, are not."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "inside.md").write_text("ours\n", encoding="utf-8")
    evals = repo / "evals"
    evals.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "brief.md").write_text("from where it was started\n", encoding="utf-8")
    path = write(
        evals,
        "providers: [sut]\n"
        "prompts: ['{{ input }}']\n"
        "tests:\n"
        "  - id: outside\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content:\n"
        "            - {type: text, value: Read}\n"
        "            - {type: file, value: brief.md}\n"
        "  - id: inside\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content: [{type: file, value: inside.md}]\n"
        "  - id: left-as-written\n"
        "    assert: [{type: contains, value: x}]\n"
        "    vars:\n"
        "      input:\n"
        "        - role: user\n"
        "          content: [{type: file, value: brief.md}, {type: file, value: gone.md}]\n",
    )
    monkeypatch.chdir(elsewhere)
    loaded = load_eval(path)
    tests = loaded.spec.tests
    assert isinstance(tests, list)
    assert "from where it was started" in tests[0].input_messages[-1].text()
    said = [w for w in loaded.warnings if "working folder" in w]
    assert said == [
        f"{path}:11: tests[0].input[0].content[1]: file part brief.md was read from the working "
        f"folder ({elsewhere.resolve()}), outside the eval file's repository ({repo.resolve()}): "
        "AgentV looks there last, so a run started from another folder reads another file or none"
    ]

    monkeypatch.chdir(repo)  # the repository's root: one of the folders AgentV looks in anyway
    (repo / "brief.md").write_text("ours too\n", encoding="utf-8")
    assert not [w for w in load_eval(path).warnings if "working folder" in w]


def test_a_plain_llm_rubric_with_no_value_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "providers: [sut]\n"
        "prompts: ['{{ input }}']\n"
        "assert:\n"
        "  - {metric: judged, type: llm-rubric}\n"
        "  - {type: contains, value: x}\n"
        "tests:\n"
        "  - {id: a, vars: {input: hi}}\n",
    )
    loaded = load_eval(path)
    assert [g.type for g in loaded.spec.graders] == ["contains"]
    assert any("nothing to judge: skipped, as AgentV skips it" in w for w in loaded.warnings)
