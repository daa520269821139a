"""AgentV and evalrun side by side on AgentV's own eval files (docs/eval-files.md, "Side by side
with AgentV").

Both tools run the same files against one loopback model (``bench/agentv_side_model.py``: the
system under test and the judge), and every case's pass/fail and score are compared.

    # with AgentV built from source (bun), record its results as test data:
    python bench/agentv_side_by_side.py record --agentv /work/agentv-build/src
    # evalrun against the recording (what tests/test_agentv_side_by_side.py does):
    python bench/agentv_side_by_side.py compare
    # evalrun's conformance kit over AgentV's TypeScript graders (needs bun and the build):
    python bench/agentv_side_by_side.py grader-check --agentv /work/agentv-build/src

``record`` writes ``tests/data/agentv_side/<commit>/agentv-results.jsonl`` (one line per
case AgentV graded) and ``recording.json`` (the commit, AgentV's version, the command).
``compare`` runs evalrun on the same files of ``tests/data/agentv_corpus/<commit>/`` and prints
every case that differs.
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
#: The agent examples' recording (docs/agents.md, "AgentV's agent examples side by side").
AGENTS_RECORDING = RECORDING / "agents"
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
    """AgentV's providers file: every label on the loopback model (AgentV takes the URL and
    key only as ``{{ env.X }}`` references), then ``agents``, the agent examples' providers."""
    entries = [(label, agentv_side_model.TARGET_MODEL) for label in TARGET_LABELS]
    entries.append((JUDGE_LABEL, agentv_side_model.JUDGE_MODEL))
    return agents + "".join(
        f"- id: openai\n  label: {label}\n  base_url: '{{{{ env.SIDE_BASE_URL }}}}'\n"
        f"  api_key: '{{{{ env.SIDE_API_KEY }}}}'\n  model: {model}\n"
        for label, model in entries
    )


def evalrun_targets_yaml(base_url: str, agents: str = "") -> str:
    """evalrun's targets file: the same labels on the same loopback model, then ``agents``."""
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
    the k-th is ``id#k`` here, as ``case_key`` names evalrun's ``id__prompt_<k-th prompt>``."""
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
    """One set of recorded files: the LLM examples, or the agent examples (``agents``: their
    scripted agents are added to both tools' providers, and every grader is compared)."""

    folder: Path
    agents: bool = False

    @property
    def bun_outputs(self) -> Path:
        """AgentV's TypeScript graders' outputs under evalrun, kept by the ``bun`` stand-in."""
        return self.folder / "bun-graders.jsonl"

    def agentv_providers(self, root: Path, bun: str) -> str:
        if not self.agents:
            return ""
        entries = agentv_side_agents.EXAMPLES
        return "".join(e.agentv_entry(root, bun, self.folder) for e in entries)

    def evalrun_targets(self, root: Path) -> str:
        if not self.agents:
            return ""
        return "".join(e.evalrun_entry(root, self.folder) for e in agentv_side_agents.EXAMPLES)

    def files(self) -> list[str]:
        return [e.file for e in agentv_side_agents.EXAMPLES] if self.agents else eval_files()

    def label(self, file: str) -> str | None:
        """The provider to name on the command line, for a file that names none."""
        example = agentv_side_agents.by_file().get(file) if self.agents else None
        return example.label if example and example.named else None

    def agentv_options(self, file: str) -> list[str]:
        """AgentV's options for ``file`` beyond the common ones: its provider when the file
        names none, and where to record a live agent's run for evalrun's scripted agent."""
        label = self.label(file)
        options = ["--provider", label] if label else []
        example = agentv_side_agents.by_file().get(file) if self.agents else None
        if example and example.records_replay:
            fixtures = example.replay_file(self.folder)
            fixtures.unlink(missing_ok=True)
            options += ["--record-replay", str(fixtures)]
        return options


LLM_EXAMPLES = Recording(RECORDING)
AGENT_EXAMPLES = Recording(AGENTS_RECORDING, agents=True)


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
        providers = Path(scratch) / "providers.yaml"
        providers.write_text(providers_yaml, encoding="utf-8")
        server = agentv_side_model.start()
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        # AgentV gets the real bun (it runs on it) and the same failing uv as evalrun
        tools = agentv_side_tools.install(
            Path(scratch) / "tools", "replay", store=recording.bun_outputs
        )
        (tools / "bun").unlink()
        path = f"{tools}{os.pathsep}{Path(bun).parent}{os.pathsep}{os.environ['PATH']}"
        env = {**os.environ, **ENV, "SIDE_BASE_URL": base_url, "SIDE_API_KEY": API_KEY}
        env["PATH"] = path
        try:
            for number, file in enumerate(files):
                out = Path(scratch) / f"run-{number}"
                run_file = agentv_side_agents.agentv_copy(agentv_src, file)
                command = [bun, str(cli), "eval", "run", run_file, "--providers", str(providers)]
                command += ["--grader-provider", JUDGE_LABEL, "--output", str(out)]
                command += ["--workers", "1"]  # index.jsonl in test order (see agentv_outcomes)
                command += recording.agentv_options(file)
                subprocess.run(command, cwd=agentv_src, env=env, capture_output=True, timeout=600)
                if run_file != file:
                    (agentv_src / run_file).unlink()
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
        evalrun_outcomes(
            files, Path(scratch), recording, root=agentv_src, mode="record", real_bun=bun
        )
    lines = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    (recording.folder / "agentv-results.jsonl").write_text(lines, encoding="utf-8")
    meta = {
        "agentv_commit": FULL_COMMIT,
        "agentv_version": version,
        "command": "agentv eval run FILE --providers PROVIDERS --grader-provider grader "
        "--output DIR --workers 1 [--provider LABEL] (cwd: AgentV's checkout; one run per file)",
        "providers_yaml": providers_yaml.replace(str(agentv_src), "AGENTV").replace(bun, "bun"),
        "env": ENV,
        "files": files,
    }
    text = json.dumps(meta, indent=2) + "\n"
    (recording.folder / "recording.json").write_text(text, encoding="utf-8")


def recorded(recording: Recording = LLM_EXAMPLES) -> list[CaseOutcome]:
    """AgentV's recorded cases."""
    path = recording.folder / "agentv-results.jsonl"
    return [
        CaseOutcome(**json.loads(line))
        for line in path.read_text(encoding="utf-8").splitlines()
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
        scratch / "tools", mode, store=recording.bun_outputs, real_bun=real_bun
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
    recording: Recording = LLM_EXAMPLES,
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
            try:
                outcome = evalrun.run(
                    str(root / file),
                    out=str(scratch / f"run-{number}"),
                    targets=str(targets),
                    judge=JUDGE_LABEL,
                    **({"target": label} if (label := recording.label(file)) else {}),
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
                        id=case_key(case.id, prompts),
                        passed=case.status == "passed",
                        score=case.score,
                        detail=f"{case.status}: "
                        + ", ".join(f"{g.name}={g.score}" for g in case.graders),
                        scripts={g.name: g.score for g in case.graders},
                        graders=numbered((g.name, g.score) for g in case.graders),
                    )
                )
    return found


def validations(scratch: Path, recording: Recording) -> dict[str, str | list[str]]:
    """``evalrun validate`` on each of the recording's files, in the setting they run in:
    ``FILE: ok (...)`` or the file's problems."""
    from evalrun.commands.run import _validate_one

    with evalrun_setting(scratch, recording) as targets:
        return {
            file: _validate_one(CORPUS / file, recording.label(file), JUDGE_LABEL, targets)
            for file in recording.files()
        }


def prompt_ids(path: Path) -> list[str]:
    """The ids of a current-format file's prompts, in order (evalrun names each case of a
    prompt ``<test id>__prompt_<prompt id>``: docs/eval-files.md)."""
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


def case_key(case_id: str, prompts: list[str]) -> str:
    """evalrun's ``X__prompt_P`` as AgentV's k-th run of X (``X#k``, P the k-th prompt)."""
    test_id, marker, prompt = case_id.rpartition("__prompt_")
    if marker and prompt in prompts:
        return f"{test_id}#{prompts.index(prompt) + 1}"
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


def run_comparison(scratch: Path, recording: Recording = LLM_EXAMPLES) -> Comparison:
    agentv = recorded(recording)
    files = recording.files() if recording.agents else sorted({case.file for case in agentv})
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
        command.add_argument("--agents", action="store_true", help="the agent examples' set")
    check = commands.add_parser("grader-check", help="evalrun grader check on AgentV's TS graders")
    check.add_argument("--agentv", type=Path, required=True, help="AgentV's built checkout")
    args = parser.parse_args()
    if args.command in ("record", "compare"):
        recording = AGENT_EXAMPLES if args.agents else LLM_EXAMPLES
    if args.command == "record":
        record(args.agentv.resolve(), args.bun, args.files or recording.files(), recording)
        return 0
    if args.command == "grader-check":
        print("\n".join(grader_check(args.agentv.resolve(), eval_files())))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        comparison = run_comparison(Path(scratch), recording)
    print(comparison.report())
    if args.agents:
        print("\n".join(grader_differences(comparison.agentv, comparison.evalrun)))
    return 0 if comparison.meets_bar() else 1


if __name__ == "__main__":
    sys.exit(main())
