"""AgentV's run options in an eval file mapped onto evalrun's keys, and the ones a run cannot
apply said as warnings at their line (docs/eval-files.md, "AgentV files"), never dropped.

Three steps, in the loader's order: :func:`take_suite_options` on the file as written (before
the current-format mapping, which refuses keys it does not know), :func:`resolve_graders` once
the graders are under ``graders`` (before ``agentv_extras`` normalizes them), and
:func:`apply_threshold` last, when every grader is a mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.spec.agentv import Notes
from evalrun.spec.agentv_extras import AgentVProblem
from evalrun.spec.kinds import ALIASES, KINDS
from evalrun.yamlsource import LineMap

#: AgentV's custom assertions: ``.agentv/assertions/<type>.<ext>`` in the eval file's folder or
#: any folder above it, run as ``bun run FILE``, a script grader (docs/eval-files.md).
ASSERTION_SUFFIXES = (".ts", ".js", ".mts", ".mjs", ".cts", ".cjs")
#: AgentV's default pass mark, given to a field-accuracy grader that sets none. The same fact
#: as ``evalrun.results.agentv_scoring.AGENTV_THRESHOLD`` (the spec may not import results;
#: tests/test_agentv_scoring.py keeps the two equal).
AGENTV_THRESHOLD = 0.8
#: field-accuracy's ``match`` rules and ``aggregation`` (evalrun/launcher/field_accuracy.py)
FIELD_MATCHES = ("exact", "numeric_tolerance", "date")
FIELD_AGGREGATIONS = ("weighted_average", "all_or_nothing")
#: An ``llm-rubric`` option AgentV reads that evalrun's rubric grader has no use for.
_IGNORED_JUDGE_OPTIONS = {
    "max_steps": "its judge takes no tool steps: it answers each rubric item in one call",
}


@dataclass
class SuiteOptions:
    """What :func:`take_suite_options` took off the file for the later steps."""

    threshold: float | None = None
    notes: Notes = field(default_factory=list)


def take_suite_options(data: Any, lines: LineMap) -> SuiteOptions:
    """Suite keys of AgentV's with an evalrun meaning mapped, in place; the others noted."""
    taken = SuiteOptions()
    if not isinstance(data, dict):
        return taken
    _system_message(data, taken.notes)
    _default_test_options(data, taken.notes)
    default_test = data.get("default_test")
    for owner, at in ((default_test, "threshold"), (data, "threshold")):
        value = owner.get(at) if isinstance(owner, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            assert isinstance(owner, dict)
            owner.pop(at)
            if taken.threshold is None:  # default_test's wins, as in AgentV
                taken.threshold = float(value)
    preprocessors = data.get("preprocessors")
    if isinstance(preprocessors, list):
        data.pop("preprocessors")
        taken.notes.append(
            (
                ("preprocessors",),
                "ignored: evalrun's targets answer in text, so there are no file outputs "
                "to convert before grading",
            )
        )
    target = data.get("target")
    if isinstance(target, dict) and isinstance(target.get("name"), str):
        extra = sorted(set(target) - {"name"})
        data["target"] = target["name"]
        if extra:
            taken.notes.append(
                (("target",), f"only the name is used: {', '.join(extra)} are ignored")
            )
    tags = data.get("tags")
    if isinstance(tags, dict):  # AgentV's `tags: {experiment: x}`: labels, kept as metadata
        metadata = data.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata.setdefault("tags", data.pop("tags"))
    _suite_input_files(data)
    return taken


def _system_message(data: dict[str, Any], notes: Notes) -> None:
    """``defaults.system_message``: AgentV reads only ``defaults.provider`` and
    ``defaults.grader``, so it sends no such message; neither does evalrun, and says so."""
    defaults = data.get("defaults")
    if isinstance(defaults, dict) and "system_message" in defaults:
        defaults.pop("system_message")
        notes.append(
            (
                ("defaults", "system_message"),
                "ignored, as AgentV ignores it: a system message is sent only where a test's "
                "input has one",
            )
        )


def _default_test_options(data: dict[str, Any], notes: Notes) -> None:
    default_test = data.get("default_test")
    if isinstance(default_test, dict) and isinstance(default_test.get("options"), dict):
        options = default_test.pop("options")
        notes.append(
            (
                ("default_test", "options"),
                f"ignored ({', '.join(sorted(options))}): evalrun grades the target's text "
                "answer as it is, with no transform before grading",
            )
        )


def _suite_input_files(data: dict[str, Any]) -> None:
    """Suite ``input_files`` go before each test's own, except where a test skips defaults."""
    files = data.get("input_files")
    tests = data.get("tests")
    if not isinstance(files, list) or not isinstance(tests, list):
        return
    data.pop("input_files")
    for case in tests:
        if not isinstance(case, dict):
            continue
        execution = case.get("execution")
        if isinstance(execution, dict) and execution.get("skip_defaults") is True:
            continue
        own = case.get("input_files", [])
        if isinstance(own, list):
            case["input_files"] = [*files, *own]


def resolve_graders(data: Any, lines: LineMap, folder: Path, notes: Notes) -> None:
    """Every grader of the suite and its tests: a custom assertion becomes its script, and an
    ``llm-rubric``'s judge options are mapped or noted."""
    if not isinstance(data, dict):
        return
    found: dict[str, Path | None] = {}
    places: list[tuple[tuple[Any, ...], Any]] = [(("graders",), data.get("graders"))]
    tests = data.get("tests")
    if isinstance(tests, list):
        places += [
            (("tests", i, "graders"), t.get("graders"))
            for i, t in enumerate(tests)
            if isinstance(t, dict)
        ]
    for path, graders in places:
        for i, grader in enumerate(graders if isinstance(graders, list) else []):
            if isinstance(grader, dict) and isinstance(grader.get("type"), str):
                _custom_assertion(grader, folder, found)
                if grader["type"] == "field-accuracy":
                    problem = field_accuracy_problem(grader)
                    if problem is not None:
                        raise AgentVProblem((*path, i), problem)
                if isinstance(grader.get("id"), str):  # AgentV names an assertion by its id too
                    grader.setdefault("name", grader["id"])
                    grader.pop("id")
                if grader["type"].replace("_", "-") in ("llm-rubric", "llm-grader", "llm-judge"):
                    _judge_options(grader, (*path, i), notes)


def _custom_assertion(grader: dict[str, Any], folder: Path, found: dict[str, Path | None]) -> None:
    kind = grader["type"].replace("_", "-")
    negated = kind.startswith("not-")
    if ALIASES.get(kind, kind) in KINDS or (negated and ALIASES.get(kind[4:], kind[4:]) in KINDS):
        return
    if kind not in found:
        found[kind] = assertion_script(kind, folder)
    script = found[kind]
    if script is None:
        return  # validation names the unknown type, with the known ones
    grader["type"] = "script"
    grader["command"] = ["bun", "run", str(script)]
    grader.setdefault("name", grader.pop("metric", kind))


def field_accuracy_problem(grader: dict[str, Any]) -> str | None:
    """Why a field-accuracy grader's options (its own keys, or in ``config``) cannot be scored,
    or None."""
    config = grader.get("config")
    grader = {**(config if isinstance(config, dict) else {}), **grader}
    fields = grader.get("fields")
    if not isinstance(fields, list) or not fields:
        return "field-accuracy needs 'fields', a list of {path, match}"
    for i, item in enumerate(fields):
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            return f"fields[{i}] needs 'path' (a dotted path such as items[0].name)"
        if item.get("match", "exact") not in FIELD_MATCHES:
            return f"fields[{i}].match must be one of {', '.join(FIELD_MATCHES)}"
    if grader.get("aggregation", "weighted_average") not in FIELD_AGGREGATIONS:
        return f"aggregation must be one of {', '.join(FIELD_AGGREGATIONS)}"
    return None


def assertion_script(kind: str, folder: Path) -> Path | None:
    """AgentV's custom assertion ``kind``: the first ``.agentv/assertions/<kind>.<ext>`` from
    ``folder`` up (AgentV's discovery order), or None."""
    for place in (folder.resolve(), *folder.resolve().parents):
        for suffix in ASSERTION_SUFFIXES:
            script = place / ".agentv" / "assertions" / f"{kind}{suffix}"
            if script.is_file():
                return script
    return None


def _judge_options(grader: dict[str, Any], path: tuple[Any, ...], notes: Notes) -> None:
    """``target: NAME`` is the judge this grader asks (AgentV's per-grader judge);
    ``temperature`` the judge call's; ``prompt: {command: ...}`` (a prompt template program)
    and ``max_steps`` are noted, since evalrun's rubric grader asks its own question."""
    config = grader.setdefault("config", {})
    if not isinstance(config, dict):
        return
    target = grader.get("target")
    if isinstance(target, str):
        grader.pop("target")
        config.setdefault("provider", target)
        grader["target"] = {"allow": [target]}
    temperature = grader.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool):
        config.setdefault("temperature", grader.pop("temperature"))
    for key, why in _IGNORED_JUDGE_OPTIONS.items():
        if key in grader:
            config.setdefault(key, grader.pop(key))
            notes.append(((*path, key), f"ignored: {why}"))
    prompt = grader.get("prompt")
    if isinstance(prompt, dict):
        config.setdefault("prompt_template", grader.pop("prompt"))
        notes.append(
            (
                (*path, "prompt"),
                "ignored: evalrun's llm-rubric asks its own question per rubric item; a "
                "program that writes the judge's prompt is not run",
            )
        )


def apply_threshold(data: Any, threshold: float | None) -> None:
    """AgentV's suite ``threshold`` is the bar a test's score must reach: each grader's
    ``threshold`` where it sets none (as ``tests[].threshold`` maps). A field-accuracy grader
    otherwise passes at AgentV's 0.8."""
    if not isinstance(data, dict):
        return
    suite = data.get("graders")
    graders: list[Any] = list(suite) if isinstance(suite, list) else []
    tests = data.get("tests")
    for case in tests if isinstance(tests, list) else []:
        if isinstance(case, dict) and isinstance(case.get("graders"), list):
            graders += case["graders"]
    for grader in graders:
        if isinstance(grader, dict) and threshold is not None:
            grader.setdefault("threshold", threshold)
        if isinstance(grader, dict) and grader.get("type") == "field-accuracy":
            grader.setdefault("threshold", AGENTV_THRESHOLD)
