"""AgentV and evalrun side by side on AgentV's own eval files (docs/eval-files.md, "Side by side
with AgentV").

Both tools run the same files against one loopback model (``bench/agentv_side_model.py``: the
system under test and the judge), and every case's pass/fail and score are compared.

    # with AgentV built from source (bun), record its results as test data:
    python bench/agentv_side_by_side.py record --agentv /work/agentv-build/src [--set SET]
    # evalrun against the recording (what tests/test_agentv_side_by_side.py does):
    python bench/agentv_side_by_side.py compare [--set SET]
    # evalrun's conformance kit over AgentV's TypeScript graders (needs bun and the build):
    python bench/agentv_side_by_side.py grader-check --agentv /work/agentv-build/src

``--set`` picks the recorded set (docs/eval-files.md, "Side by side with AgentV"): ``llm``
(the default: the plain-LLM files), ``workspace`` (the workspace examples on one scripted agent)
or ``agents`` (the agent examples, each on a replay of its recorded runs). ``record`` writes the
set's ``agentv-results.jsonl`` (one line per case AgentV graded) and ``recording.json`` (the
commit, AgentV's version, the command) under ``tests/data/agentv_side/<commit>/``; ``compare``
runs evalrun on the same files of ``tests/data/agentv_corpus/<commit>/`` and prints every case
that differs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import agentv_side_agents  # noqa: E402 (bench/ is not a package)
import agentv_side_model  # noqa: E402
import agentv_side_tools  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COMMIT = "58f316ca2"
FULL_COMMIT = "58f316ca24e3abcdd253efafbc240882f39dc5b0"
CORPUS = ROOT / "tests" / "data" / "agentv_corpus" / COMMIT
RECORDING = ROOT / "tests" / "data" / "agentv_side" / COMMIT
#: The provider labels AgentV's example files name for a plain LLM, all served by the loopback
#: model as the system under test; ``grader`` is the judge.
TARGET_LABELS = ("llm", "gemini-llm", "local-openai", "github-models-contract", "default")
JUDGE_LABEL = "grader"
#: The variables AgentV's own example check sets (its `validate:examples` script) and the one
#: more an example reads, for both tools.
ENV = {
    "EVAL_CRITERIA": "placeholder",
    "CUSTOM_SYSTEM_PROMPT": "placeholder",
    "EXPECTED_GREETING": "Hello!",  # env-interpolation's own example value
}
API_KEY = "side-key"
#: Scores are equal when they differ by no more than this (AgentV rounds nothing; evalrun
#: writes floats as computed).
SCORE_TOLERANCE = 1e-6
#: The share of cases that must agree (issue #34's bar).
BAR = 0.95
#: The scripted agent that runs AgentV's workspace examples in both tools, in place of each
#: file's own agent, and its label.
WORKSPACE_AGENT = Path(__file__).resolve().parent / "agentv_side_workspace_agent.py"
AGENT_LABEL = "agent"
#: AgentV's examples with a workspace (``workspace:`` or ``environment:``) and an agent target,
#: run against the scripted agent (docs/agents.md, "AgentV's workspace examples side by side").
WORKSPACE_FILES = (
    "evals/agentic-engineering/agent-plugin-review.eval.yaml",
    "evals/agentv-self/agentv-self.eval.yaml",
    "evals/agentv-self/pr-workflow-guard.eval.yaml",
    "examples/features/docker-workspace/evals/docker-example.EVAL.yaml",
    "examples/features/file-changes/evals/suite.yaml",
    "examples/features/file-changes-graders/evals/suite.yaml",
    "examples/features/file-changes-with-repos/evals/suite.yaml",
    "examples/features/functional-grading/evals/suite.yaml",
    "examples/features/repo-lifecycle/evals/suite.yaml",
    "examples/features/tool-calls-template/evals/suite.yaml",
    "examples/features/vitest-workspace-grader/evals/suite.yaml",
    "examples/features/workspace-artifact/evals/suite.yaml",
    "examples/features/workspace-multi-repo/evals/suite.yaml",
    "examples/features/workspace-setup-script/evals/dataset-vscode.eval.yaml",
    "examples/features/workspace-setup-script/evals/suite.yaml",
    "examples/features/workspace-shared-config/evals/accuracy/suite.yaml",
    "examples/features/workspace-shared-config/evals/regression/suite.yaml",
    "examples/showcase/bug-fix-benchmark/evals/bug-fixes.eval.yaml",
    "examples/showcase/cross-repo-sync/evals/suite.yaml",
)


@dataclass(frozen=True)
class CaseOutcome:
    """One case as one tool graded it: ``passed`` is the tool's own verdict."""

    file: str
    id: str
    passed: bool
    score: float | None
    detail: str
    #: the script graders' scores by name (AgentV: its ``type: script`` graders; evalrun: every
    #: grader, looked up by AgentV's names)
    scripts: dict[str, float | None] = field(default_factory=dict)
    #: every grader's score by name (AgentV's names; the agent examples compare them all)
    graders: dict[str, float | None] = field(default_factory=dict)

    def key(self) -> tuple[str, str]:
        return (self.file, self.id)


def eval_files() -> list[str]:
    """The corpus files whose one provider is a plain-LLM label, so AgentV can run them
    against the loopback model (agents, CLI mocks and workspaces are left out)."""
    import yaml

    found = []
    for path in sorted(CORPUS.rglob("*.yaml")):
        name = path.name
        if not (name.endswith(".eval.yaml") or name in {"suite.yaml", "EVAL.yaml"}):
            continue
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue
        providers = doc.get("providers") if isinstance(doc, dict) else None
        if isinstance(providers, str):
            providers = [providers]
        if isinstance(providers, list) and len(providers) == 1 and providers[0] in TARGET_LABELS:
            found.append(path.relative_to(CORPUS).as_posix())
    return found


def agentv_providers_yaml(agents: str = "") -> str:
    """AgentV's providers file: ``agents``, the set's agents, then every label on the loopback
    model (AgentV takes the URL and key only as ``{{ env.X }}`` references)."""
    entries = [(label, agentv_side_model.TARGET_MODEL) for label in TARGET_LABELS]
    entries.append((JUDGE_LABEL, agentv_side_model.JUDGE_MODEL))
    return agents + "".join(
        f"- id: openai\n  label: {label}\n  base_url: '{{{{ env.SIDE_BASE_URL }}}}'\n"
        f"  api_key: '{{{{ env.SIDE_API_KEY }}}}'\n  model: {model}\n"
        for label, model in entries
    )


def evalrun_targets_yaml(base_url: str, agents: str = "") -> str:
    """evalrun's targets file: ``agents``, then the same labels on the same loopback model."""
    entries = [(label, agentv_side_model.TARGET_MODEL) for label in TARGET_LABELS]
    entries.append((JUDGE_LABEL, agentv_side_model.JUDGE_MODEL))
    return (
        "targets:\n"
        + agents
        + "".join(
            f"  - name: {label}\n    kind: openai\n    model: {model}\n"
            f"    base_url: {base_url}\n    api_key_env: SIDE_API_KEY\n"
            for label, model in entries
        )
    )


def numbered(scores: Iterable[tuple[str, float | None]]) -> dict[str, float | None]:
    """Graders' scores by name, a name's later graders as ``name#2``, ``name#3`` (in the file's
    order, which both tools keep), so graders of one name are compared one by one."""
    found: dict[str, float | None] = {}
    seen: dict[str, int] = {}
    for name, score in scores:
        seen[name] = seen.get(name, 0) + 1
        found[name if seen[name] == 1 else f"{name}#{seen[name]}"] = score
    return found


def agentv_outcomes(index: Path, file: str) -> Iterator[CaseOutcome]:
    """AgentV's cases from a run's ``index.jsonl``: passed when its status is ``ok``. AgentV
    names a test run once per prompt by the test's id alone, in prompt order (one worker):
    the k-th is ``id#k`` here, as ``case_key`` names evalrun's variant of the k-th prompt."""
    rows = [json.loads(line) for line in index.read_text(encoding="utf-8").splitlines() if line]
    seen: dict[str, int] = {}
    ids = [str(row["test_id"]) for row in rows]
    for row in rows:
        test_id = str(row["test_id"])
        seen[test_id] = seen.get(test_id, 0) + 1
        if ids.count(test_id) > 1:
            test_id = f"{test_id}#{seen[test_id]}"
        status = row.get("execution_status", "")
        graders = ", ".join(f"{s.get('name')}={s.get('score')}" for s in row.get("scores") or [])
        if row.get("error"):
            graders = f"{graders} ({str(row['error'])[:300]})".lstrip()
        yield CaseOutcome(
            file=file,
            id=test_id,
            passed=status == "ok",
            score=float(row["score"]) if row.get("score") is not None else None,
            detail=f"{status}: {graders}",
            scripts={
                str(s["name"]): s.get("score")
                for s in row.get("scores") or []
                if s.get("type") == "script"
            },
            graders=numbered((str(s["name"]), s.get("score")) for s in row.get("scores") or []),
        )


@dataclass(frozen=True)
class Recording:
    """One recorded set of files (``--set``): where AgentV's results, the recording's metadata
    and the TypeScript graders' outputs are kept, and the agents both tools run the files on."""

    name: str
    folder: Path
    #: the set's files (None: every plain-LLM file of the corpus, ``eval_files()``)
    listed: tuple[str, ...] | None = None
    #: the one scripted agent every file runs on instead of its own (the workspace examples)
    agent: str | None = None
    #: an agent of its own for each file (the agent examples)
    examples: tuple[agentv_side_agents.AgentExample, ...] = ()

    @property
    def results(self) -> Path:
        return self.folder / "agentv-results.jsonl"

    @property
    def meta(self) -> Path:
        return self.folder / "recording.json"

    @property
    def bun_outputs(self) -> Path:
        """AgentV's TypeScript graders' outputs under evalrun, kept by the ``bun`` stand-in."""
        return self.folder / "bun-graders.jsonl"

    @property
    def in_checkout(self) -> bool:
        """Whether AgentV runs in a scratch checkout (``scratch_checkout``) and ``uv run`` runs
        Python: the workspace examples' agent edits the checkout, their graders read the edit."""
        return self.agent is not None

    def files(self) -> list[str]:
        return list(self.listed) if self.listed is not None else eval_files()

    def example(self, file: str) -> agentv_side_agents.AgentExample | None:
        return next((e for e in self.examples if e.file == file), None)

    def label(self, file: str) -> str | None:
        """The provider to name on the command line, for a file that names none, or whose own
        agent the set replaces."""
        example = self.example(file)
        return self.agent or (example.label if example and example.named else None)

    def agentv_providers(self, root: Path, bun: str) -> str:
        """The set's agents as AgentV providers: the workspace agent writing AgentV's output
        file, or each example's own agent."""
        if self.agent is not None:
            agent = f"{sys.executable} {WORKSPACE_AGENT}"
            command = f"{agent} --prompt-file {{PROMPT_FILE}} --output-file {{OUTPUT_FILE}}"
            return f"- id: cli\n  label: {self.agent}\n  command: {json.dumps(command)}\n"
        return "".join(e.agentv_entry(root, bun, self.folder) for e in self.examples)

    def evalrun_targets(self, root: Path) -> str:
        """The set's agents as evalrun ``cli`` targets: the workspace agent printing evalrun's
        JSONL, or each example's recorded runs replayed in its agent's stream."""
        if self.agent is not None:
            command = json.dumps([sys.executable, str(WORKSPACE_AGENT)])
            return (
                f"  - name: {self.agent}\n    kind: cli\n    command: {command}\n"
                "    transcript: jsonl\n    max_retries: 0\n"
            )
        return "".join(e.evalrun_entry(root, self.folder) for e in self.examples)

    def agentv_options(self, file: str) -> list[str]:
        """AgentV's options for ``file`` beyond the common ones: its provider (``label``), and
        where to record a live agent's run for evalrun's scripted agent."""
        label = self.label(file)
        options = ["--provider", label] if label else []
        example = self.example(file)
        if example and example.records_replay:
            fixtures = example.replay_file(self.folder)
            fixtures.unlink(missing_ok=True)
            options += ["--record-replay", str(fixtures)]
        return options


LLM_SET = Recording("llm", RECORDING)
WORKSPACE_SET = Recording(
    "workspace", RECORDING / "workspace", listed=WORKSPACE_FILES, agent=AGENT_LABEL
)
AGENT_SET = Recording(
    "agents",
    RECORDING / "agents",
    listed=tuple(e.file for e in agentv_side_agents.EXAMPLES),
    examples=agentv_side_agents.EXAMPLES,
)
SETS = {recording.name: recording for recording in (LLM_SET, WORKSPACE_SET, AGENT_SET)}


def scratch_checkout(agentv_src: Path, scratch: Path) -> Path:
    """A checkout of AgentV to run the workspace examples in: AgentV's agent works in a host
    environment's ``workdir`` itself, so the examples are copied (the build stays as built) and
    committed, since some of their hooks look for the repository's root as in AgentV's own
    clone; the rest (the build, its ``node_modules``) is linked."""
    checkout = scratch / "agentv"
    checkout.mkdir()
    for entry in agentv_src.iterdir():
        if entry.name in ("examples", "evals"):
            shutil.copytree(entry, checkout / entry.name, symlinks=True)
        else:
            (checkout / entry.name).symlink_to(entry)
    git = ["git", "-c", "user.name=side", "-c", "user.email=side@localhost"]
    for step in (["init", "-q"], ["add", "examples", "evals"], ["commit", "-qm", "examples"]):
        subprocess.run([*git, *step], cwd=checkout, check=True, capture_output=True)
    return checkout


def record(agentv_src: Path, bun: str, files: list[str], recording: Recording) -> None:
    """Run AgentV on each file and write its per-case results as test data."""
    cli = agentv_src / "apps" / "cli" / "dist" / "cli.js"
    version = subprocess.run(
        [bun, str(cli), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    rows: list[dict[str, Any]] = []
    recording.folder.mkdir(parents=True, exist_ok=True)
    providers_yaml = agentv_providers_yaml(recording.agentv_providers(agentv_src, bun))
    with tempfile.TemporaryDirectory() as scratch:
        where = scratch_checkout(agentv_src, Path(scratch)) if recording.in_checkout else agentv_src
        providers = Path(scratch) / "providers.yaml"
        providers.write_text(providers_yaml, encoding="utf-8")
        server = agentv_side_model.start()
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        # AgentV gets the real bun (it runs on it) and the same failing uv as evalrun
        tools = agentv_side_tools.install(
            Path(scratch) / "tools",
            "replay",
            store=recording.bun_outputs,
            uv_runs_python=recording.in_checkout,
        )
        (tools / "bun").unlink()
        path = f"{tools}{os.pathsep}{Path(bun).parent}{os.pathsep}{os.environ['PATH']}"
        env = {**os.environ, **ENV, "SIDE_BASE_URL": base_url, "SIDE_API_KEY": API_KEY}
        env["PATH"] = path
        try:
            for number, file in enumerate(files):
                out = Path(scratch) / f"run-{number}"
                example = recording.example(file)
                run_file = example.dropped_copy(where) if example else file
                command = [bun, str(cli), "eval", "run", run_file, "--providers", str(providers)]
                command += ["--grader-provider", JUDGE_LABEL, "--output", str(out)]
                command += ["--workers", "1"]  # index.jsonl in test order (see agentv_outcomes)
                command += recording.agentv_options(file)
                subprocess.run(command, cwd=where, env=env, capture_output=True, timeout=600)
                if run_file != file:
                    (where / run_file).unlink()
                index = out / ".internal" / "index.jsonl"
                found = list(agentv_outcomes(index, file)) if index.exists() else []
                print(f"{file}: {len(found)} cases", file=sys.stderr)
                rows += [case.__dict__ for case in found]
        finally:
            server.shutdown()
    # evalrun on AgentV's own checkout (where the TypeScript graders find AgentV's built SDK),
    # the bun stand-in keeping what each grader printed, for the replay in CI
    recording.bun_outputs.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        where = scratch_checkout(agentv_src, Path(scratch)) if recording.in_checkout else agentv_src
        evalrun_outcomes(files, Path(scratch), recording, root=where, mode="record", real_bun=bun)
    lines = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    recording.results.write_text(lines, encoding="utf-8")
    places = {str(agentv_src): "AGENTV", str(ROOT): "EVALRUN", sys.executable: "python", bun: "bun"}
    for place, name in places.items():
        providers_yaml = providers_yaml.replace(place, name)
    meta = {
        "agentv_commit": FULL_COMMIT,
        "agentv_version": version,
        "command": "agentv eval run FILE --providers PROVIDERS --grader-provider grader "
        "--output DIR --workers 1 [--provider LABEL] (cwd: AgentV's checkout; one run per file)",
        "providers_yaml": providers_yaml,
        "env": ENV,
        "files": files,
    }
    recording.meta.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def recorded(recording: Recording = LLM_SET) -> list[CaseOutcome]:
    """AgentV's recorded cases."""
    return [
        CaseOutcome(**json.loads(line))
        for line in recording.results.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


@contextlib.contextmanager
def evalrun_setting(
    scratch: Path,
    recording: Recording,
    *,
    root: Path = CORPUS,
    mode: str = "replay",
    real_bun: str | None = None,
) -> Iterator[Path]:
    """What evalrun runs the files in: the loopback model, the targets file (yielded), and the
    ``uv`` and ``bun`` stand-ins first on PATH (``mode``: record or replay bun)."""
    server = agentv_side_model.start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    targets = scratch / "targets.yaml"
    targets.write_text(
        evalrun_targets_yaml(base_url, recording.evalrun_targets(root)), encoding="utf-8"
    )
    tools = agentv_side_tools.install(
        scratch / "tools",
        mode,
        store=recording.bun_outputs,
        real_bun=real_bun,
        uv_runs_python=recording.in_checkout,
    )
    saved = {name: os.environ.get(name) for name in [*ENV, "SIDE_API_KEY", "PATH"]}
    os.environ.update({**ENV, "SIDE_API_KEY": API_KEY})
    os.environ["PATH"] = f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"
    try:
        yield targets
    finally:
        server.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def evalrun_outcomes(
    files: list[str],
    scratch: Path,
    recording: Recording = LLM_SET,
    *,
    root: Path = CORPUS,
    mode: str = "replay",
    real_bun: str | None = None,
) -> list[CaseOutcome]:
    """Run evalrun (its Python API, one run per file) on ``root``'s copies of ``files``."""
    import evalrun
    from evalrun.errors import UserError

    found: list[CaseOutcome] = []
    with evalrun_setting(scratch, recording, root=root, mode=mode, real_bun=real_bun) as targets:
        for number, file in enumerate(files):
            example = recording.example(file)
            copies = scratch / f"copy-{number}"
            path = example.scratch_copy(root, copies) if example else root / file
            try:
                outcome = evalrun.run(
                    str(path),
                    out=str(scratch / f"run-{number}"),
                    targets=str(targets),
                    target=recording.label(file),
                    judge=JUDGE_LABEL,
                    no_cache=True,
                    quiet=True,
                )
            except UserError as refused:
                found.append(CaseOutcome(file, "*", False, None, f"refused: {refused}"))
                continue
            prompts = prompt_ids(root / file)
            for case in outcome.cases:
                found.append(
                    CaseOutcome(
                        file=file,
                        id=case_key(case.id, case.prompt, prompts),
                        passed=case.status == "passed",
                        score=case.score,
                        detail=f"{case.status}: "
                        + ", ".join(f"{g.name}={g.score}" for g in case.graders)
                        + (f" ({case.error[:300]})" if case.error else ""),
                        scripts={g.name: g.score for g in case.graders},
                        graders=numbered((g.name, g.score) for g in case.graders),
                    )
                )
    return found


def validations(scratch: Path, recording: Recording) -> dict[str, str | list[str]]:
    """``evalrun validate`` on each of the set's files, in the setting they run in:
    ``FILE: ok (...)`` or the file's problems."""
    from evalrun.commands.run import _validate_one

    with evalrun_setting(scratch, recording) as targets:
        return {
            file: _validate_one(CORPUS / file, recording.label(file), JUDGE_LABEL, targets)
            for file in recording.files()
        }


def prompt_ids(path: Path) -> list[str]:
    """The ids of a current-format file's prompts, in order (evalrun's result of a prompt
    variant names it in ``prompt``: docs/eval-files.md)."""
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    prompts = doc.get("prompts") if isinstance(doc, dict) else None
    if not isinstance(prompts, list):
        return []
    ids = []
    for i, prompt in enumerate(prompts):
        named = prompt.get("id") or prompt.get("label") if isinstance(prompt, dict) else None
        ids.append(str(named or f"prompt-{i + 1}"))
    return ids


def case_key(case_id: str, prompt: str | None, prompts: list[str]) -> str:
    """evalrun's result of test X's variant P as AgentV's k-th run of X (``X#k``, P the k-th
    prompt)."""
    if prompt is not None and prompt in prompts:
        return f"{case_id}#{prompts.index(prompt) + 1}"
    return case_id


@dataclass(frozen=True)
class Difference:
    agentv: CaseOutcome
    evalrun: CaseOutcome | None


def compare(agentv: list[CaseOutcome], ours: list[CaseOutcome]) -> list[Difference]:
    """Every AgentV case whose pass/fail or score evalrun does not match (a case evalrun lost
    or a file it refused counts as a difference)."""
    by_key = {case.key(): case for case in ours}
    differences = []
    for theirs in agentv:
        mine = by_key.get(theirs.key())
        if mine is None or not same(theirs, mine):
            differences.append(Difference(theirs, mine))
    return differences


def same(theirs: CaseOutcome, mine: CaseOutcome) -> bool:
    """Equal pass/fail and score. A case neither tool could run agrees: AgentV records it as an
    ``execution_error`` with score 0, evalrun as an ``error`` with no score (docs/eval-files.md,
    "Side by side with AgentV")."""
    if theirs.detail.startswith("execution_error") and mine.detail.startswith("error"):
        return not theirs.passed and not mine.passed
    if theirs.passed != mine.passed:
        return False
    if theirs.score is None or mine.score is None:
        return theirs.score is mine.score
    return abs(theirs.score - mine.score) <= SCORE_TOLERANCE


def script_grader_differences(
    agentv: list[CaseOutcome], ours: list[CaseOutcome]
) -> tuple[int, list[str]]:
    """AgentV's script graders (Python, TypeScript) scored again by evalrun: how many were
    compared, and each whose score differs."""
    by_key = {case.key(): case for case in ours}
    compared, differing = 0, []
    for theirs in agentv:
        mine = by_key.get(theirs.key())
        for name, score in theirs.scripts.items():
            compared += 1
            got = None if mine is None else mine.scripts.get(name, "missing")
            if not (
                isinstance(got, float) and score is not None and abs(got - score) <= SCORE_TOLERANCE
            ):
                differing.append(f"{theirs.file} {theirs.id} {name}: agentv {score} evalrun {got}")
    return compared, differing


@dataclass(frozen=True)
class Comparison:
    agentv: list[CaseOutcome]
    evalrun: list[CaseOutcome]
    differences: list[Difference]

    @property
    def agree(self) -> int:
        return len(self.agentv) - len(self.differences)

    def meets_bar(self) -> bool:
        return self.agree >= BAR * len(self.agentv)

    def table(self) -> str:
        """Every case, AgentV's verdict and score beside evalrun's, as a Markdown table."""
        by_key = {case.key(): case for case in self.evalrun}
        lines = ["| file | test | AgentV | evalrun |", "|---|---|---|---|"]
        for theirs in self.agentv:
            mine = by_key.get(theirs.key())
            ours = "no result" if mine is None else verdict(mine)
            lines.append(f"| `{theirs.file}` | `{theirs.id}` | {verdict(theirs)} | {ours} |")
        return "\n".join(lines)

    def report(self) -> str:
        share = self.agree / max(len(self.agentv), 1)
        lines = [f"{self.agree} of {len(self.agentv)} cases agree ({share:.1%})"]
        for difference in self.differences:
            theirs, mine = difference.agentv, difference.evalrun
            ours = "no result" if mine is None else f"{mine.passed} {mine.score} ({mine.detail})"
            lines.append(
                f"{theirs.file} {theirs.id}: agentv {theirs.passed} {theirs.score} "
                f"({theirs.detail}) | evalrun {ours}"
            )
        compared, differing = script_grader_differences(self.agentv, self.evalrun)
        lines.append(f"script graders: {compared - len(differing)} of {compared} score as AgentV")
        lines += differing
        return "\n".join(lines)


def verdict(case: CaseOutcome) -> str:
    """A case as the tables show it: ``pass 1.0``, ``fail 0.5``, or the error it ended in."""
    if case.detail.startswith(("execution_error", "error")):
        return "error"
    score = "no score" if case.score is None else f"{case.score:.3g}"
    return f"{'pass' if case.passed else 'fail'} {score}"


def run_comparison(scratch: Path, recording: Recording = LLM_SET) -> Comparison:
    """evalrun on the set's files (the LLM set: those AgentV graded a case of) against AgentV's
    recorded cases."""
    agentv = recorded(recording)
    listed = recording.listed
    files = list(listed) if listed is not None else sorted({case.file for case in agentv})
    ours = evalrun_outcomes(files, scratch, recording)
    return Comparison(agentv, ours, compare(agentv, ours))


def grader_differences(agentv: list[CaseOutcome], ours: list[CaseOutcome]) -> list[str]:
    """Every grader of AgentV's cases whose score evalrun does not match, by AgentV's name (the
    agent examples' comparison, grader by grader)."""
    by_key = {case.key(): case for case in ours}
    differing = []
    for theirs in agentv:
        mine = by_key.get(theirs.key())
        for name, score in theirs.graders.items():
            got = None if mine is None else mine.graders.get(name, "missing")
            if not (
                isinstance(got, float) and score is not None and abs(got - score) <= SCORE_TOLERANCE
            ):
                differing.append(f"{theirs.file} {theirs.id} {name}: agentv {score} evalrun {got}")
    return differing


def grader_check(agentv_src: Path, files: list[str]) -> list[str]:
    """``evalrun grader check --wire agentv`` over every TypeScript grader (``bun ...``) the
    files name, run where its eval file is, with the real bun: one line per grader."""
    from evalrun.errors import EvalrunError
    from evalrun.spec.loader import load_eval

    commands: dict[tuple[str, ...], Path] = {}
    for file in files:
        try:
            loaded = load_eval(agentv_src / file)
        except EvalrunError:
            continue
        cases = loaded.spec.tests if isinstance(loaded.spec.tests, list) else []
        for grader in [*loaded.spec.graders, *(g for case in cases for g in case.graders)]:
            if grader.command and grader.argv[0] == "bun":
                commands.setdefault(tuple(grader.argv), (agentv_src / file).parent)
    lines = []
    for argv, folder in sorted(commands.items()):
        check = [sys.executable, "-m", "evalrun", "grader", "check", "--wire", "agentv"]
        done = subprocess.run(
            [*check, "--mode", "process", "--", *argv],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
        last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
        where = folder.relative_to(agentv_src)
        lines.append(f"{where}: {' '.join(argv)}: exit {done.returncode}: {last}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="run AgentV and record its results")
    rec.add_argument("--agentv", type=Path, required=True, help="AgentV's built checkout")
    rec.add_argument("--bun", default=shutil.which("bun") or "bun")
    rec.add_argument("files", nargs="*", help="corpus-relative eval files (default: all)")
    cmp = commands.add_parser("compare", help="run evalrun and compare with the recording")
    for command in (rec, cmp):
        command.add_argument(
            "--set",
            dest="recording",
            choices=sorted(SETS),
            default=LLM_SET.name,
            help="llm: the plain-LLM files; workspace: the workspace examples on one scripted "
            "agent; agents: the agent examples on their recorded runs",
        )
    check = commands.add_parser("grader-check", help="evalrun grader check on AgentV's TS graders")
    check.add_argument("--agentv", type=Path, required=True, help="AgentV's built checkout")
    args = parser.parse_args()
    if args.command == "grader-check":
        print("\n".join(grader_check(args.agentv.resolve(), eval_files())))
        return 0
    recording = SETS[args.recording]
    if args.command == "record":
        record(args.agentv.resolve(), args.bun, args.files or recording.files(), recording)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        comparison = run_comparison(Path(scratch), recording)
    if recording.listed is not None:
        print(comparison.table())
    print(comparison.report())
    if recording.examples:
        print("\n".join(grader_differences(comparison.agentv, comparison.evalrun)))
    return 0 if comparison.meets_bar() else 1


if __name__ == "__main__":
    sys.exit(main())
