"""AgentV's agent examples in the side-by-side check (docs/agents.md, "AgentV's agent examples
side by side"): for each eval file, the provider AgentV runs it with and the ``cli`` target
evalrun runs it with, both replaying the same recorded run.

AgentV gets its examples' own scripted agents (its ``replay`` provider over the example's
recording, or the example's ``cli`` agent); evalrun gets ``agentv_side_replay_agent.py``
printing the same recording in an agent's stream format, read by that agent's transcript reader.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

AGENT = Path(__file__).resolve().parent / "agentv_side_replay_agent.py"


@dataclass(frozen=True)
class AgentExample:
    file: str
    #: the provider label the file names (or the one passed with ``--provider``)
    label: str
    #: AgentV's provider entry, without its label; ``{dir}`` is the example's folder,
    #: ``{recording}`` the recording's and ``{bun}`` bun's path (AgentV's ``cli`` provider runs
    #: a login shell, which resets PATH)
    agentv_provider: dict[str, object]
    #: what the scripted agent replays: ``kind:path`` (path below the example's folder, or
    #: below the recording's when it starts with ``{recording}/``: runs written for this check);
    #: ``recorded`` for an example whose agent AgentV runs live: its ``--record-replay`` fixtures
    source: str
    emit: str
    #: pass the label on the command line (the file names no provider)
    named: bool = False
    #: suite keys both tools run the file without, each with the reason (docs/agents.md)
    drops: tuple[str, ...] = ()

    def folder(self, root: Path) -> Path:
        """The example's folder (its eval file sits in it or in its ``evals/``)."""
        place = (root / self.file).parent
        return place.parent if place.name == "evals" else place

    def agentv_entry(self, root: Path, bun: str, recording: Path) -> str:
        places = {"{dir}": str(self.folder(root)), "{recording}": str(recording), "{bun}": bun}
        entry = {}
        for key, value in self.agentv_provider.items():
            text = str(value)
            for name, place in places.items():
                text = text.replace(name, place)
            entry[key] = text
        return "".join(
            f"{'- ' if i == 0 else '  '}{key}: {json.dumps(value)}\n"
            for i, (key, value) in enumerate({**entry, "label": self.label}.items())
        )

    @property
    def records_replay(self) -> bool:
        return self.source == "recorded"

    def replay_file(self, recording: Path) -> Path:
        """Where AgentV's run of a live agent is recorded for evalrun's scripted agent."""
        return recording / f"replay-{self.label}.jsonl"

    def evalrun_entry(self, root: Path, recording: Path) -> str:
        if self.records_replay:
            source = f"fixtures:{self.replay_file(recording)}"
        else:
            kind, _, where = self.source.partition(":")
            place = where.replace("{recording}", str(recording))
            source = f"{kind}:{self.folder(root) / place}"
        command = [sys.executable, str(AGENT), "--eval", str(root / self.file)]
        command += ["--source", source, "--emit", self.emit]
        command += ["--prompt", "{prompt}"]
        return (
            f"  - name: {self.label}\n    kind: cli\n    command: {json.dumps(command)}\n"
            f"    transcript: {self.emit}\n    max_retries: 0\n"
        )

    def dropped_copy(self, root: Path) -> str:
        """The file to run, relative to ``root``: the example's file itself, or a copy beside it
        without its ``drops`` (beside it, so its relative paths still resolve)."""
        import yaml

        if not self.drops:
            return self.file
        source = root / self.file
        document = yaml.safe_load(source.read_text(encoding="utf-8"))
        for key in self.drops:
            document.pop(key, None)
        copy = source.with_name(f"side-{source.name}")
        copy.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return copy.relative_to(root).as_posix()

    def scratch_copy(self, root: Path, scratch: Path) -> Path:
        """The file evalrun runs: ``root``'s own, or the dropped copy in a copy of the example's
        folder under ``scratch``, so ``root`` (the corpus) is left as it is."""
        if not self.drops:
            return root / self.file
        folder = self.folder(root)
        shutil.copytree(folder, scratch / folder.relative_to(root), symlinks=True)
        return scratch / self.dropped_copy(scratch)


def live_cli(file: str, label: str, script: str) -> AgentExample:
    """An example whose own TypeScript agent AgentV runs live (AgentV's ``cli`` output file),
    its run recorded for evalrun's scripted agent."""
    command = f"{{bun}} run ./{script} --prompt {{PROMPT}} --output {{OUTPUT_FILE}}"
    return AgentExample(
        file=file,
        label=label,
        agentv_provider={"id": "cli", "command": command, "cwd": "{dir}"},
        source="recorded",
        emit="claude-code",
    )


def written(file: str, label: str, runs: str) -> AgentExample:
    """An example that ships no run: both tools replay runs written for this check."""
    path = f"{{recording}}/transcripts/{runs}.jsonl"
    return AgentExample(
        file=file,
        label=label,
        agentv_provider={"id": "replay", "transcripts": path, "source_target": "scripted-agent"},
        source=f"transcripts:{path}",
        emit="claude-code",
        named=True,
    )


EXAMPLES = (
    AgentExample(
        file="examples/features/trajectory-assertions-advanced/evals/trace-file-demo.eval.yaml",
        label="static_trace",
        agentv_provider={
            "id": "cli",
            "command": "{bun} run ./cat-trace.ts --trace ./static-trace.json --prompt {PROMPT} "
            "--output {OUTPUT_FILE}",
            "cwd": "{dir}",
        },
        source="trace:static-trace.json",
        emit="claude-code",
    ),
    AgentExample(
        file="examples/features/copilot-transcript-replay/evals/skill-use.EVAL.yaml",
        label="copilot-transcript-replay",
        agentv_provider={
            "id": "replay",
            "transcripts": "{dir}/fixtures/copilot-transcript.jsonl",
            "source_target": "copilot-cli",
        },
        source="transcripts:fixtures/copilot-transcript.jsonl",
        emit="copilot",
        # its beforeAll extension installs plug-ins with `npx allagents`, which the npm
        # registry here does not have; the graders read only the transcript
        drops=("extensions",),
    ),
    AgentExample(
        file="examples/showcase/trace-evaluation/evals/coding-agent-replay.eval.yaml",
        label="replay_coding_agent",
        agentv_provider={
            "id": "replay",
            "fixtures": "{dir}/fixtures/replay-target-output.jsonl",
            "suite": "trace-evaluation-showcase",
            "source_target": "live_coding_agent",
        },
        source="fixtures:fixtures/replay-target-output.jsonl",
        emit="claude-code",
    ),
    AgentExample(
        file="examples/showcase/trace-evaluation/evals/transcript-import.eval.yaml",
        label="replay_imported_codex_transcript",
        agentv_provider={
            "id": "replay",
            "transcripts": "{dir}/fixtures/imported-codex-transcript.jsonl",
            "source_target": "codex",
        },
        source="transcripts:fixtures/imported-codex-transcript.jsonl",
        emit="claude-code",
        named=True,
    ),
    *(
        live_cli(file, label, script)
        for file, label, script in (
            (
                "examples/showcase/tool-evaluation-plugins/tool-eval-demo.eval.yaml",
                "mock_agent",
                "mock-tool-agent.ts",
            ),
            (
                "examples/features/latency-assertions/evals/suite.yaml",
                "mock_latency_agent",
                "mock-latency-agent.ts",
            ),
        )
    ),
    *(
        written(f"examples/features/agent-skills-evals/{name}", label, "agent-skills-evals")
        for name, label in (
            ("csv-analyzer.EVAL.yaml", "skills_agent_csv"),
            ("multi-provider-skill-use.EVAL.yaml", "skills_agent_deploy"),
        )
    ),
    *(
        written(
            f"evals/agentv-dev/skills/{name}.eval.yaml",
            f"agentv_dev_{name.replace('-', '_')}",
            "agentv-dev-skills",
        )
        for name in ("output-correctness", "skill-invocation", "skill-selection")
    ),
)
