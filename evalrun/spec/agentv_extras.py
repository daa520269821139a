"""AgentV's spellings that both of its generations share, mapped onto evalrun's keys before
validation (docs/eval-files.md, "AgentV files"). Runs after ``agentv_current`` and ``agentv``,
so it sees ``tests`` and ``graders`` whatever the file called them.

Plain strings among a test's graders become one ``llm-rubric`` grader (as AgentV groups them);
``rubrics`` becomes ``llm-rubric``; ``not-<type>`` a negated grader; ``required`` AgentV's gate;
a suite-level ``input`` is put before every test's input; ``conversation_id`` goes to the
test's metadata; a test whose ``input_files`` name a ``PROMPT.md`` and that has no ``input``
takes that file as its input; in an AgentV file, a test with ``criteria`` and no graders gets an
``llm-rubric`` grader on them (AgentV skips grading it); the keys of the graders that cannot run in evalrun (kinds.py,
``unsupported``) go to their ``config``, so they load and validate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalrun.errors import UserError
from evalrun.spec.agentv import Notes, rename_key
from evalrun.spec.agentv_files import join_content_parts
from evalrun.spec.kinds import ALIASES, CONFIG_OPTIONS, KINDS
from evalrun.spec.models import GraderSpec
from evalrun.yamlsource import LineMap


class AgentVProblem(UserError, ValueError):
    """A value AgentV accepts that evalrun cannot map, at the key path it is about."""

    def __init__(self, path: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


#: Top-level keys only AgentV files have (evalrun keeps them: models.py, EvalFile). Both
#: spell ``workspace``: AgentV's spelling is told apart by agentv_workspace.py.
AGENTV_SUITE_KEYS = (
    "name",
    "version",
    "tags",
    "governance",
    "environment",
    "extensions",
    "evaluate_options",
    "input",
)
#: GraderSpec's own keys (``schema`` by its alias): any other key of an ``unsupported`` grader
#: is AgentV's own option, kept in ``config``.
_GRADER_KEYS = {field.alias or name for name, field in GraderSpec.model_fields.items()}
_RUBRIC_TYPES = ("rubrics", "rubric")
_REGEX_FLAGS = set("imsx")


#: ``{{ env.NAME }}`` or ``{{ env.NAME | default("text") }}``, rendered when AgentV loads a file.
_ENV = re.compile(
    r"\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*"
    r"(?:\|\s*default\(\s*(?:\"([^\"]*)\"|'([^']*)')\s*\)\s*)?\}\}"
)


_SHOWN_ONLY = ("name", "description", "metadata", "tags", "governance", "version")


def interpolate_env(
    value: Any, env: Mapping[str, str], path: tuple[Any, ...] = ()
) -> tuple[Any, list[tuple[tuple[Any, ...], str]]]:
    """Every string with ``{{ env.NAME }}`` filled from ``env`` (AgentV does this before reading
    anything else). An unset variable with no ``default(...)`` renders as an empty string, as in
    AgentV, only in keys that are shown and not run (``_SHOWN_ONLY``); anywhere else (what a
    case sends or checks) it is a problem at its key, never a silent empty string."""
    problems: list[tuple[tuple[Any, ...], str]] = []

    def walk(item: Any, where: tuple[Any, ...]) -> Any:
        if isinstance(item, str) and "{{" in item:
            return _ENV.sub(lambda m: fill(m, where), item)
        if isinstance(item, list):
            return [walk(v, (*where, i)) for i, v in enumerate(item)]
        if isinstance(item, dict):
            return {k: walk(v, (*where, k)) for k, v in item.items()}
        return item

    def fill(match: re.Match[str], where: tuple[Any, ...]) -> str:
        name, default = match.group(1), match.group(2) or match.group(3)
        if name in env:
            return env[name]
        if default is not None:
            return default
        if where[:1] and where[0] in _SHOWN_ONLY:
            return ""
        problems.append((where, f"environment variable {name} is not set ({match.group(0)})"))
        return match.group(0)

    return walk(value, path), problems


def normalize_suite(
    data: Any, lines: LineMap, folder: Path, *, agentv: bool = False, notes: Notes | None = None
) -> Any:
    """Rewrite an eval file's AgentV spellings, in place. ``agentv``: the loader saw AgentV's
    spellings already (AgentV's own keys below say so too); ``notes`` gets the warnings."""
    if not isinstance(data, dict):
        return data
    agentv = agentv or any(key in data for key in AGENTV_SUITE_KEYS)
    suite_input = data.get("input")
    if isinstance(suite_input, (str, list)):
        del data["input"]  # any other value stays, for validation to name
    else:
        suite_input = None
    graders = data.get("graders")
    if isinstance(graders, list):
        data["graders"] = normalize_graders(graders, ("graders",), lines, agentv=agentv)
    tests = data.get("tests")
    if isinstance(tests, list):
        skips = [_skips_defaults(case) for case in tests]
        if any(skips):
            _give_each_test_the_suite_graders(data, tests, skips, lines)
        for i, case in enumerate(tests):
            normalize_test(case, ("tests", i), lines, folder, agentv=agentv, notes=notes)
            if suite_input is not None and isinstance(case, dict) and not skips[i]:
                _prepend_input(case, suite_input)
            if not data.get("graders"):
                _judge_criteria(case)
    elif suite_input is not None:
        data["input"] = suite_input  # a tests file: validation names the key it cannot place
    _read_rubric_files(data.get("graders"), ("graders",), folder)
    return data


def _skips_defaults(case: Any) -> bool:
    """``execution: {skip_defaults: true}``: AgentV gives this test neither the suite's graders
    nor its ``input``. The key is taken only when that is all it says."""
    if not isinstance(case, dict) or not isinstance(case.get("execution"), dict):
        return False
    if set(case["execution"]) != {"skip_defaults"} or not isinstance(
        case["execution"]["skip_defaults"], bool
    ):
        return False
    return case.pop("execution")["skip_defaults"]


def _give_each_test_the_suite_graders(
    data: dict[str, Any], tests: list[Any], skips: list[bool], lines: LineMap
) -> None:
    """evalrun's suite graders apply to every test, so with a test that skips them they move
    into each other test, first, keeping their lines."""
    suite = data.get("graders")
    if not isinstance(suite, list) or not suite:
        return
    data["graders"] = []
    for i, case in enumerate(tests):
        if skips[i] or not isinstance(case, dict):
            continue
        own = case.get("graders", [])
        if not isinstance(own, list):
            continue
        for j in range(len(own) - 1, -1, -1):  # shift the test's own graders' lines
            _move(lines, ("tests", i, "graders", j), ("tests", i, "graders", j + len(suite)))
        for j in range(len(suite)):
            _copy(lines, ("graders", j), ("tests", i, "graders", j))
        case["graders"] = [*(dict(g) if isinstance(g, dict) else g for g in suite), *own]


def _move(lines: LineMap, old: tuple[Any, ...], new: tuple[Any, ...]) -> None:
    moved = {k: v for k, v in lines.items() if k[: len(old)] == old}
    for key in moved:
        del lines[key]
    for key, line in moved.items():
        lines[new + tuple(key[len(old) :])] = line


def _prepend_input(case: dict[str, Any], suite_input: Any) -> None:
    """AgentV puts the suite's ``input`` messages before each test's own."""
    before = _as_messages(suite_input)
    own = case.get("input")
    case["input"] = before + (_as_messages(own) if own is not None else [])


def _as_messages(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else [value]  # validation names what is wrong


def _judge_criteria(case: Any) -> None:
    """AgentV passes a test that declares no graders without grading it; evalrun never passes
    what it did not check, so the test's ``criteria`` are judged (docs/eval-files.md). A
    multi-turn test whose turns carry graders is graded by them (docs/agents.md)."""
    if isinstance(case, dict) and isinstance(case.get("criteria"), str) and not case.get("graders"):
        turns = case.get("turns")
        if isinstance(turns, list) and any(isinstance(t, dict) and t.get("graders") for t in turns):
            return
        case["graders"] = [{"type": "llm-rubric", "name": "criteria"}]


def _normalize_turns(
    case: dict[str, Any], path: tuple[Any, ...], lines: LineMap, folder: Path, *, agentv: bool
) -> None:
    """AgentV's ``mode: conversation`` (which its ``turns`` require) is implied by ``turns`` in
    evalrun; each turn's ``assert``/``assertions`` are its ``graders``, plain strings grouped
    into one ``llm-rubric`` of weight 1, as AgentV groups a turn's (docs/agents.md)."""
    turns = case.get("turns")
    if case.get("mode") == "conversation":
        if not isinstance(turns, list) or not turns:
            raise AgentVProblem((*path, "mode"), "mode: conversation needs a non-empty 'turns'")
        del case["mode"]
    elif agentv and isinstance(turns, list):
        raise AgentVProblem((*path, "turns"), "'turns' needs mode: conversation (as in AgentV)")
    if not isinstance(turns, list):
        return
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            continue
        where = (*path, "turns", i)
        if agentv and isinstance(turn.get("input"), (list, dict)):  # one user message's content
            turn["input"] = [{"role": "user", "content": turn["input"]}]
        for key in ("assert", "assertions"):
            if rename_key(turn, key, "graders", where, lines):
                break
        expected = turn.get("expected_output")
        if isinstance(expected, dict):  # a message, as AgentV reads a turn's; else its JSON
            message = "content" in expected and {"role": "assistant", **expected}
            turn["expected_output"] = [message] if message else json.dumps(expected)
        graders = turn.get("graders")
        if isinstance(graders, list):
            grouped = any(isinstance(g, str) for g in graders)
            turn["graders"] = normalize_graders(graders, (*where, "graders"), lines, agentv=agentv)
            if grouped:  # the one llm-rubric the strings became
                next(g for g in turn["graders"] if g.get("type") == "llm-rubric")["weight"] = 1.0
            _read_rubric_files(turn["graders"], (*where, "graders"), folder)


def normalize_test(
    case: Any,
    path: tuple[Any, ...],
    lines: LineMap,
    folder: Path,
    *,
    agentv: bool = False,
    notes: Notes | None = None,
) -> Any:
    """Rewrite one test's AgentV spellings, in place; ``notes`` gets the warnings about it."""
    if not isinstance(case, dict):
        return case
    metadata = case.get("metadata")
    if "conversation_id" in case and (metadata is None or isinstance(metadata, dict)):
        case["metadata"] = {**(metadata or {}), "conversation_id": case.pop("conversation_id")}
        _copy(lines, (*path, "conversation_id"), (*path, "metadata", "conversation_id"))
    _normalize_turns(case, path, lines, folder, agentv=agentv)
    if isinstance(case.get("expected_output"), dict):
        # AgentV's structured expected answer: graders read it as the JSON it stands for.
        case["expected_output"] = json.dumps(case["expected_output"], ensure_ascii=False)
    if "input" not in case and isinstance(case.get("input_files"), list):
        _prompt_from_files(case, folder)
    if agentv:
        join_content_parts(case, folder, [] if notes is None else notes, path)
    if "input" not in case and isinstance(case.get("turns"), list):
        case["input"] = []  # the turns carry it
    graders = case.get("graders")
    if isinstance(graders, list):
        case["graders"] = normalize_graders(graders, (*path, "graders"), lines, agentv=agentv)
        _read_rubric_files(case["graders"], (*path, "graders"), folder)
    return case


def _read_rubric_files(graders: Any, path: tuple[Any, ...], folder: Path) -> None:
    """An ``llm-rubric`` item that is ``file://PATH`` (AgentV's ``prompt: file://...``) is the
    text of that file, relative to the eval file; one that cannot be read is an error."""
    for i, grader in enumerate(graders if isinstance(graders, list) else []):
        if not isinstance(grader, dict):
            continue
        _read_rubric_files(grader.get("graders"), (*path, i, "graders"), folder)
        config = grader.get("config")
        rubric = config.get("rubric") if isinstance(config, dict) else None
        if grader.get("type") != "llm-rubric" or not isinstance(rubric, list):
            continue
        for j, item in enumerate(rubric):
            if isinstance(item, str) and item.startswith("file://"):
                name = item.removeprefix("file://")
                try:
                    rubric[j] = (folder / name).read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError) as exc:
                    reason = getattr(exc, "strerror", None) or "not UTF-8 text"
                    raise AgentVProblem((*path, i), f"rubric file {name}: {reason}") from None


def _prompt_from_files(case: dict[str, Any], folder: Path) -> None:
    """AgentV's shorthand: with no ``input``, a ``PROMPT.md`` among ``input_files`` is the
    input (and no longer an attachment). Unreadable, it stays an attachment and the missing
    ``input`` is the error validation reports."""
    files = case["input_files"]
    prompt = next((f for f in files if isinstance(f, str) and Path(f).name == "PROMPT.md"), None)
    if prompt is None:
        return
    try:
        case["input"] = (folder / prompt).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    case["input_files"] = [f for f in files if f is not prompt]


def normalize_graders(
    items: list[Any],
    path: tuple[Any, ...],
    lines: LineMap,
    *,
    agentv: bool = False,
    in_set: bool = False,
) -> list[Any]:
    """Plain strings become one ``llm-rubric`` grader at the first one's place, weighted by how
    many there are; every mapping is normalized."""
    out: list[Any] = []
    strings: list[str] = []
    rubric_at: int | None = None
    moved: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for i, item in enumerate(items):
        if isinstance(item, str):
            if item.strip():
                strings.append(item.strip())
            if rubric_at is None:
                rubric_at = len(out)
                out.append(None)
                moved[path + (i,)] = (*path, rubric_at)
            continue
        moved[path + (i,)] = (*path, len(out))
        out.append(item)
    if rubric_at is not None:
        out[rubric_at] = {"type": "llm-rubric", "config": {"rubric": strings}}
        out[rubric_at]["weight"] = float(len(strings) or 1)
    if any(old != new for old, new in moved.items()):
        source = {k: v for k, v in lines.items() if k[: len(path)] == path and len(k) > len(path)}
        for key in source:
            del lines[key]
        for old, new in moved.items():
            for key, line in source.items():
                if key[: len(old)] == old:
                    lines[new + tuple(key[len(old) :])] = line
    for i, grader in enumerate(out):
        normalize_grader(grader, (*path, i), lines, agentv=agentv, in_set=in_set)
    return out


def normalize_grader(
    grader: Any,
    path: tuple[Any, ...],
    lines: LineMap,
    *,
    agentv: bool = False,
    in_set: bool = False,
) -> None:
    """``agentv``: the file is AgentV's, so a script grader's unknown keys are its ``config``
    (as AgentV passes them); ``in_set``: inside an ``assert-set``, which does not run, so every
    AgentV option is kept in ``config``."""
    if not isinstance(grader, dict) or not isinstance(grader.get("type"), str):
        return
    if in_set and "metric" in grader:
        grader.setdefault("name", grader.pop("metric"))
    kind = grader["type"].replace("_", "-")
    if kind in ("llm-grader", "llm-judge"):
        grader["type"] = kind = "llm-rubric"
    if kind.startswith("not-") and _known(kind[4:]):
        grader["type"] = kind = kind[4:]
        grader["negate"] = not grader.get("negate", False)
    if kind in _RUBRIC_TYPES:
        _rubrics(grader, path, lines)
    elif kind == "llm-rubric" and not in_set:
        _rubric_text_key(grader, path, lines)
    required = grader.pop("required", None)
    if isinstance(required, (int, float)) and not isinstance(required, bool):
        grader.setdefault("threshold", required)  # ``required: 0.8``: must score 0.8
        required = True
    if required is True:  # AgentV's gate (docs/eval-files.md, "AgentV's scoring rule")
        grader["required"] = True
    if kind == "regex" and isinstance(grader.get("flags"), str):
        _regex_flags(grader)
    if _known(kind) and KINDS[ALIASES.get(kind, kind)].type == "assert-set":
        for key in ("assert", "assertions"):
            if rename_key(grader, key, "graders", path, lines):
                break
        children = grader.get("graders")
        if isinstance(children, list):
            grader["graders"] = normalize_graders(
                children, (*path, "graders"), lines, agentv=agentv, in_set=True
            )
    runs = KINDS[ALIASES.get(kind, kind)].runs if _known(kind) else None
    # AgentV's own options of a grader evalrun cannot run, or reads from its config
    if runs == "unsupported" or in_set or (agentv and runs == "command") or kind in CONFIG_OPTIONS:
        _options_to_config(grader, path, lines, keep_target=not in_set)
    if agentv and kind.startswith("trajectory:") and isinstance(grader.get("config"), dict):
        grader["config"].setdefault("no_transcript", "fail")  # AgentV scores 0 (docs/agents.md)
    if agentv and kind == "tool-trajectory" and isinstance(grader.get("config"), dict):
        grader["config"].setdefault("rules", "agentv")  # AgentV's scoring (docs/agents.md)


def _known(kind: str) -> bool:
    return ALIASES.get(kind, kind) in KINDS


def _rubrics(grader: dict[str, Any], path: tuple[Any, ...], lines: LineMap) -> None:
    """``type: rubrics`` with ``criteria:`` items (strings or ``{outcome}`` / ``{description}``
    mappings) is AgentV's older ``llm-rubric``; the items are its rubric."""
    key = "criteria" if "criteria" in grader else "value"
    criteria = grader.get(key)
    items = criteria if isinstance(criteria, list) else [criteria] if criteria else []
    rubric = [_rubric_text(item) for item in items]
    config = grader.get("config", {})
    for i, (item, text) in enumerate(zip(items, rubric, strict=True)):
        if not text:
            banded = isinstance(item, dict) and "score_ranges" in item
            raise AgentVProblem(
                (*path, key, i) if isinstance(criteria, list) else (*path, key),
                "a rubric item scored in score_ranges bands is not supported by evalrun"
                if banded
                else "a rubric item needs its text (a string, or 'outcome')",
            )
    if not rubric or not isinstance(config, dict):
        return  # left as written: validation names the key it cannot read
    grader["type"] = "llm-rubric"
    grader.pop(key)
    grader["config"] = {**config, "rubric": config.get("rubric", rubric)}
    _copy(lines, (*path, key), (*path, "config", "rubric"))


def _rubric_text_key(grader: dict[str, Any], path: tuple[Any, ...], lines: LineMap) -> None:
    """AgentV's ``llm-rubric`` takes its one item as ``prompt``, ``criteria`` or ``value``."""
    config = grader.get("config", {})
    for key in ("prompt", "criteria", "value"):
        if isinstance(grader.get(key), str) and isinstance(config, dict):
            if "rubric" not in config:
                grader["config"] = {**config, "rubric": [grader.pop(key)]}
                _copy(lines, (*path, key), (*path, "config", "rubric"))
            return


def _rubric_text(item: Any) -> str:
    """An item's text, or "" when it has none."""
    if isinstance(item, dict):
        for key in ("outcome", "description", "criteria", "text"):
            if isinstance(item.get(key), str):
                return item[key]
        return ""
    return item if isinstance(item, str) else ""


def _regex_flags(grader: dict[str, Any]) -> None:
    """``flags: i`` (JavaScript's RegExp flags) as an inline group on the pattern."""
    flags = grader["flags"]
    if set(flags) <= _REGEX_FLAGS and isinstance(grader.get("value"), str):
        grader.pop("flags")
        if flags:
            grader["value"] = f"(?{''.join(sorted(set(flags)))}){grader['value']}"


def _options_to_config(
    grader: dict[str, Any], path: tuple[Any, ...], lines: LineMap, *, keep_target: bool = True
) -> None:
    """AgentV's own options of a grader are kept in its ``config``; ``mode`` is evalrun's only
    when it says ``process`` or ``serve``, ``target`` only where the grader can run, ``value``
    only when it is text (a trajectory grader's ``value`` is a mapping of its own options)."""
    config = grader.get("config", {})
    if not isinstance(config, dict):
        return
    for key in list(grader):
        own = key in _GRADER_KEYS and not (
            (key == "mode" and grader[key] not in ("process", "serve"))
            or (key == "target" and not keep_target)
            or (key == "value" and not _is_text(grader[key]))
        )
        if own:
            continue
        config.setdefault(key, grader.pop(key))
        _copy(lines, (*path, key), (*path, "config", key))
    grader["config"] = config


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    )


def _copy(lines: LineMap, old: tuple[Any, ...], new: tuple[Any, ...]) -> None:
    for key in [k for k in lines if k[: len(old)] == old]:
        lines[new + tuple(key[len(old) :])] = lines[key]
