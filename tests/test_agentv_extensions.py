"""AgentV's ``extensions`` (docs/agents.md, "AgentV's workspace keys"): a module's lifecycle
function runs as a workspace script through Node, with AgentV's context, so the agent gets the
workspace AgentV's would; what evalrun cannot run makes the cases errors, never cases run in
another workspace."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import evalrun
from evalrun.spec.loader import load_eval

CORPUS = Path(__file__).parent / "data" / "agentv_corpus" / "58f316ca2" / "examples" / "features"


def node_scripts(path: Path) -> list[list[str]]:
    workspace = load_eval(path).spec.workspace
    assert workspace is not None
    return [script.argv for script in workspace.setup if script.argv[0] == "node"]


def test_agentvs_file_extensions_become_node_setup_scripts() -> None:
    suite = CORPUS / "file-changes-with-repos" / "evals" / "suite.yaml"
    [argv] = node_scripts(suite)
    module = (suite.parent / "../scripts/setup-nested-repo.mjs").resolve()
    assert argv[-3:] == [str(module), "beforeAll", str(suite.parent)]
    workspace = load_eval(suite).spec.workspace
    assert workspace is not None and "node" in workspace.required_commands
    # AgentV's eval_dir is absolute however the file was named
    [from_relative] = node_scripts(Path(os.path.relpath(suite)))
    assert from_relative[-1] == str(suite.parent)
    # after the environment's own setup, as AgentV runs it
    setup = CORPUS / "workspace-setup-script" / "evals" / "suite.yaml"
    loaded = load_eval(setup)
    assert loaded.spec.workspace is not None
    assert [s.argv[0] for s in loaded.spec.workspace.setup] == ["bash", "node"]


def test_agent_rules_only_warn_and_what_cannot_run_makes_cases_errors(tmp_path: Path) -> None:
    loaded = load_eval(CORPUS / "tool-calls-template" / "evals" / "suite.yaml")
    assert any("agentv:agent-rules: no target is told the rule paths" in w for w in loaded.warnings)
    assert loaded.spec.workspace is not None and loaded.spec.workspace.unsupported == []
    (tmp_path / "work").mkdir()
    (tmp_path / "suite.yaml").write_text(
        "extensions:\n"
        "  - file://hook.ts:beforeEach\n"
        "  - {id: 'agentv:agent-rules', skills: [./skills]}\n"
        "environment: {type: host, workdir: ./work}\n"
        "tests:\n  - id: t\n    input: hi\n    assert: [{type: contains, value: hi}]\n"
    )
    loaded = load_eval(tmp_path / "suite.yaml")
    assert loaded.spec.workspace is not None
    assert loaded.spec.workspace.unsupported == [
        "extension hook.ts is not a module Node runs",
        "agentv:agent-rules copies rule files in",
    ]
    assert sum("its cases will be errors" in w for w in loaded.warnings) == 2


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_an_extension_prepares_the_workspace_the_agent_works_in(tmp_path: Path) -> None:
    """A real run: the extension writes into the case's workspace from AgentV's context
    (``workspace_path``, ``eval_dir``, ``hook_name``), the agent reads what it wrote."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "README.md").write_text("template\n")
    (tmp_path / "prepare.mjs").write_text(
        "import { writeFileSync } from 'node:fs';\n"
        "import { join, basename } from 'node:path';\n"
        "export function beforeAll(context) {\n"
        "  const seen = `${context.hook_name} ${basename(context.eval_dir)} ${context.test_id}`;\n"
        "  writeFileSync(join(context.workspace_path, 'prepared.txt'), seen);\n"
        "}\n"
    )
    (tmp_path / "agent.py").write_text(
        "import json, pathlib, sys\nsys.stdin.read()\n"
        "text = pathlib.Path('prepared.txt').read_text()\n"
        "print(json.dumps({'type': 'final', 'text': 'saw: ' + text}))\n"
    )
    (tmp_path / "targets.yaml").write_text(
        "targets:\n  - name: agent\n    kind: cli\n    transcript: jsonl\n"
        f"    command: [{sys.executable}, {tmp_path / 'agent.py'}]\n"
    )
    (tmp_path / "suite.yaml").write_text(
        "extensions: ['file://prepare.mjs:beforeAll']\n"
        "environment: {type: host, workdir: ./work}\n"
        "tests:\n  - id: t1\n    input: go\n"
        f"    assert: [{{type: contains, value: 'saw: beforeAll {tmp_path.name} t1'}}]\n"
    )
    out = tmp_path / "out"
    evalrun.run(tmp_path / "suite.yaml", target="agent", targets=tmp_path / "targets.yaml", out=out)
    [result] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "passed", result
    assert not (tmp_path / "work" / "prepared.txt").exists()  # the template stays as it was
