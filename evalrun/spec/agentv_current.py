"""AgentV's current (promptfoo-style) eval format mapped onto evalrun's eval-file keys.

``providers`` -> ``target`` (several: ``targets``, a matrix run); ``defaults.grader`` -> ``judge``; ``prompts`` rendered with each
test's ``vars`` -> ``input``; ``vars.expected_output`` -> ``expected_output``; ``assert`` ->
``graders`` (plain strings become one ``llm-rubric`` grader, as AgentV groups them); the file's
``assert`` and ``default_test`` apply to every test. The mapping runs before validation and keeps
the line map in step, so errors still name the line they come from (docs/eval-files.md).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrun.errors import UserError
from evalrun.spec.agentv import Notes
from evalrun.spec.agentv_names import assertion_name
from evalrun.yamlsource import LineMap

#: Top-level and per-test keys only AgentV's current format has.
CURRENT_FILE_KEYS = ("prompts", "providers", "default_test", "assert", "defaults")
CURRENT_TEST_KEYS = ("vars", "assert")

#: AgentV assertion type -> (evalrun grader type, extra keys); see _map_assertion.
_SAME_TYPES = (
    "contains",
    "icontains",
    "regex",
    "equals",
    "is-json",
    "script",
    "llm-rubric",
    "contains-all",
    "icontains-all",
    "contains-any",
    "icontains-any",
    "starts-with",
    "ends-with",
)
#: An assertion with only these keys names no rubric, prompt or option of its own.
_PLAIN_GRADER_KEYS = {"type", "name", "weight", "threshold", "required"}
_NOTHING_TO_JUDGE = "an llm-rubric with no value has nothing to judge: skipped, as AgentV skips it"
_RENAMED_TYPES = {"llm-grader": "llm-rubric", "llm-judge": "llm-rubric", "code-grader": "script"}


class CurrentFormatError(UserError):
    """Problems found while mapping, each with the path of the key it is about in the file as
    written, and ``lines``, the file's line map as parsed, to find them with (the mapping has
    moved keys, such as a test's, in the map it was given)."""

    def __init__(self, problems: list[tuple[tuple[Any, ...], str]], lines: LineMap) -> None:
        super().__init__("; ".join(message for _, message in problems))
        self.problems = problems
        self.lines = lines


@dataclass
class Prompt:
    id: str
    template: str | list[dict[str, Any]]
    path: tuple[Any, ...]


@dataclass
class _Mapping:
    data: dict[str, Any]
    lines: LineMap
    folder: Path
    problems: list[tuple[tuple[Any, ...], str]] = field(default_factory=list)
    #: what loads but is left out, as AgentV leaves it out (validate and run warn of it)
    skipped: Notes = field(default_factory=list)
    #: The line map as parsed: every copy reads from it, so moves never read moved lines.
    source: LineMap = field(init=False)

    def __post_init__(self) -> None:
        self.source = dict(self.lines)

    def problem(self, path: tuple[Any, ...], message: str) -> None:
        self.problems.append((path, message))

    def copy_lines(self, old: tuple[Any, ...], new: tuple[Any, ...]) -> None:
        """Give ``new`` (and everything under it) the parsed lines of ``old``."""
        for key in [k for k in self.source if k[: len(old)] == old]:
            moved = (*new, *key[len(old) :])
            self.lines[moved] = self.source[key]


def _items(m: _Mapping, value: Any, path: tuple[Any, ...]) -> list[Any]:
    """A list's items; anything else but null is a problem at ``path``."""
    if value is not None and not isinstance(value, list):
        m.problem(path, "must be a list")
    return value if isinstance(value, list) else []


def is_current_format(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if any(key in data for key in CURRENT_FILE_KEYS):
        return True
    tests = data.get("tests")
    return isinstance(tests, list) and any(
        isinstance(t, dict) and any(k in t for k in CURRENT_TEST_KEYS) for t in tests
    )


def map_current_format(
    data: dict[str, Any], lines: LineMap, folder: Path, skipped: Notes | None = None
) -> dict[str, Any]:
    """Rewrite ``data`` (a current-format eval file) into evalrun's keys, in place; what it
    leaves out as AgentV does is added to ``skipped``."""
    m = _Mapping(data, lines, folder, skipped=skipped if skipped is not None else [])
    _map_providers(m)
    _map_defaults(m)
    prompts = _prompts(m)
    default_test = data.pop("default_test", None)
    default_vars: dict[str, Any] = {}
    suite_asserts: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(default_test, dict):
        vars_ = default_test.get("vars")
        if isinstance(vars_, dict):
            default_vars = vars_
        for i, item in enumerate(_items(m, default_test.get("assert"), ("default_test", "assert"))):
            suite_asserts.append((("default_test", "assert", i), item))
        if isinstance(default_test.get("metadata"), dict):
            metadata = data.setdefault("metadata", {})
            if isinstance(metadata, dict):
                metadata.update(default_test["metadata"])
            else:
                m.problem(("metadata",), "metadata must be a mapping")
        for key in sorted(set(default_test) - {"vars", "assert", "metadata"}):
            m.problem(("default_test", key), f"default_test.{key} is not supported by evalrun")
    elif default_test is not None:
        m.problem(
            ("default_test",),
            "default_test must be a mapping (file:// references are not supported)",
        )
    for i, item in enumerate(_items(m, data.pop("assert", None), ("assert",))):
        suite_asserts.append((("assert", i), item))
    if suite_asserts:
        graders = data.setdefault("graders", [])
        if not isinstance(graders, list):
            m.problem(("graders",), "graders must be a list")
        else:
            graders.extend(_map_assertions(m, suite_asserts, ("graders", len(graders)), {}))
    tests = data.get("tests")
    if isinstance(tests, str):
        data["tests"] = tests.removeprefix("file://")
    elif isinstance(tests, list):
        data["tests"] = _map_tests(m, tests, prompts, default_vars)
    if m.problems:
        raise CurrentFormatError(m.problems, m.source)
    return data


# --- providers, defaults, prompts ----------------------------------------------------------------


def _provider_name(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("label"), str):
            return value["label"]
        if isinstance(value.get("id"), str):
            return value["id"]
        if len(value) == 1:  # a provider map: {"openai:gpt-4": {label: ...}}
            key, options = next(iter(value.items()))
            if isinstance(options, dict) and isinstance(options.get("label"), str):
                return options["label"]
            return str(key)
    return None


def _map_providers(m: _Mapping) -> None:
    if "providers" not in m.data:
        return
    providers = m.data.pop("providers")
    listed = providers if isinstance(providers, list) else [providers]
    names = [_provider_name(p) for p in listed]
    if not names or any(n is None for n in names):
        m.problem(("providers",), "providers: each entry needs a name (a string, label or id)")
        return
    if "target" in m.data or "targets" in m.data:
        m.problem(("target",), "give 'providers' or 'target', not both")
        return
    if len(names) > 1:  # a matrix: one column per provider (docs/results.md, "A matrix run")
        m.data["targets"] = names
        m.copy_lines(("providers",), ("targets",))
        return
    m.data["target"] = names[0]
    m.copy_lines(("providers", 0) if isinstance(providers, list) else ("providers",), ("target",))


def _map_defaults(m: _Mapping) -> None:
    defaults = m.data.pop("defaults", None)
    if defaults is None:
        return
    if not isinstance(defaults, dict):
        m.problem(("defaults",), "defaults must be a mapping")
        return
    for key, value in defaults.items():
        if key == "grader" and isinstance(value, str):
            if "judge" not in m.data:
                m.data["judge"] = value
                m.copy_lines(("defaults", "grader"), ("judge",))
        elif key == "provider" and isinstance(value, str):
            if "target" not in m.data:
                m.data["target"] = value
                m.copy_lines(("defaults", "provider"), ("target",))
        elif key == "target":
            m.problem(
                ("defaults", "target"), "defaults.target has been removed: use defaults.provider"
            )
        else:
            m.problem(("defaults", key), f"defaults.{key} is not supported by evalrun")


def _prompts(m: _Mapping) -> list[Prompt]:
    if "prompts" not in m.data:
        return []
    raw = m.data.pop("prompts")
    listed = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(listed):
        path = ("prompts", i) if isinstance(raw, list) else ("prompts",)
        prompt = _prompt(m, item, path, i)
        if prompt is not None:
            out.append(prompt)
    return out


def _prompt(m: _Mapping, item: Any, path: tuple[Any, ...], index: int) -> Prompt | None:
    default_id = f"prompt-{index + 1}"
    if isinstance(item, str):
        if item.startswith("file://"):
            return _prompt_file(m, item.removeprefix("file://"), default_id, path)
        return Prompt(default_id, item, path)
    if isinstance(item, list):
        return Prompt(default_id, item, path)
    if not isinstance(item, dict):
        m.problem(path, "a prompt is a string, a list of messages or a mapping")
        return None
    prompt_id = str(item.get("id") or item.get("label") or default_id)
    for key in ("raw", "prompt"):
        if isinstance(item.get(key), (str, list)):
            return Prompt(prompt_id, item[key], path)
    for key in ("file", "path"):
        if isinstance(item.get(key), str):
            return _prompt_file(m, item[key].removeprefix("file://"), prompt_id, path)
    m.problem(path, "a prompt mapping needs 'raw', 'prompt' or 'file'")
    return None


def _prompt_file(m: _Mapping, name: str, prompt_id: str, path: tuple[Any, ...]) -> Prompt | None:
    file = (m.folder / name).resolve()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        m.problem(path, f"prompt file {name}: {exc.strerror or exc}")
        return None
    if file.suffix == ".json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            m.problem(path, f"prompt file {name}: not JSON ({exc})")
            return None
        if isinstance(value, (str, list)):
            return Prompt(prompt_id, value, path)
        m.problem(path, f"prompt file {name}: expected a string or a list of messages")
        return None
    return Prompt(prompt_id, text, path)


# --- tests ---------------------------------------------------------------------------------------


def _map_tests(
    m: _Mapping, tests: list[Any], prompts: list[Prompt], default_vars: dict[str, Any]
) -> list[Any]:
    for key in [k for k in m.lines if len(k) > 1 and k[0] == "tests"]:
        del m.lines[key]  # rebuilt below: a test's index changes when prompts expand it
    out: list[Any] = []
    for i, test in enumerate(tests):
        path = ("tests", i)
        if not isinstance(test, dict) or not any(k in test for k in CURRENT_TEST_KEYS):
            m.copy_lines(path, ("tests", len(out)))
            out.append(test)
            continue
        vars_ = _test_vars(m, test, default_vars, path)
        if not prompts and "input" not in test and "input" not in vars_:
            m.problem(path, "no input: give top-level 'prompts' (e.g. '{{ input }}') or vars.input")
        uses = prompts or ([] if "input" in test else [Prompt("input", "{{ input }}", path)])
        choices: list[Prompt | None] = [*uses] if uses else [None]
        for prompt in choices:
            new_path = ("tests", len(out))
            case = _map_test(m, test, vars_, prompt, path, new_path, many=len(uses) > 1)
            out.append(case)
    return out


def _test_vars(
    m: _Mapping, test: dict[str, Any], default_vars: dict[str, Any], path: tuple[Any, ...]
) -> dict[str, Any]:
    own = test.get("vars", {})
    if not isinstance(own, dict):
        m.problem((*path, "vars"), "vars must be a mapping")
        own = {}
    merged = {**default_vars, **own}
    # Var values may refer to other vars ({{ vars.person.name }}); one pass, as AgentV does.
    return {
        key: _render_value(m, value, merged, (*path, "vars", key)) for key, value in merged.items()
    }


def _map_test(
    m: _Mapping,
    test: dict[str, Any],
    vars_: dict[str, Any],
    prompt: Prompt | None,
    old: tuple[Any, ...],
    new: tuple[Any, ...],
    *,
    many: bool,
) -> dict[str, Any]:
    m.copy_lines(old, new)
    handled = {"id", "vars", "assert", "metadata", "description", "threshold"}
    # evalrun's own keys (input_files, output, criteria, ...) pass; unknown ones fail validation.
    case: dict[str, Any] = {k: v for k, v in test.items() if k not in handled}
    written = test.get("id")
    base_id = str(written or f"test-{old[1] + 1}")
    # the id as read, so a plain `id: 001` is put back as written when the case is validated
    # (docs/eval-files.md, "YAML values"); several prompts: each is a variant of the test, a
    # matrix column (docs/eval-files.md, "Prompt variants")
    case["id"] = written or base_id
    if many and prompt is not None:
        case["prompt"] = prompt.id
        m.copy_lines(prompt.path, (*new, "prompt"))
    if prompt is not None and "input" not in case:
        case["input"] = _render_prompt(m, prompt, vars_, prompt.path, base_id)
        m.copy_lines(
            (*old, "vars", "input") if "input" in vars_ else (*old, "vars"), (*new, "input")
        )
    if "expected_output" in vars_ and "expected_output" not in case:
        case["expected_output"] = vars_["expected_output"]
        m.copy_lines((*old, "vars", "expected_output"), (*new, "expected_output"))
    asserts = _items(m, test.get("assert"), (*old, "assert"))
    strings = [item for item in asserts if isinstance(item, str)]
    rendered = [_render(m, s, vars_, (*old, "assert")) for s in strings]
    if rendered:
        case.setdefault("criteria", "\n".join(rendered))
    items = [((*old, "assert", j), item) for j, item in enumerate(asserts)]
    given = case.get("graders")
    own = given if isinstance(given, list) else []
    graders = _map_assertions(m, items, (*new, "graders", len(own)), vars_)
    if graders:
        case["graders"] = [*own, *graders]
    metadata = test.get("metadata") or {}
    if not isinstance(metadata, dict):
        m.problem((*old, "metadata"), "metadata must be a mapping")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    if isinstance(test.get("description"), str):
        metadata.setdefault("description", test["description"])
    shown = {k: v for k, v in vars_.items() if k not in ("input", "expected_output")}
    if shown:
        metadata.setdefault("vars", shown)  # input and expected_output are in the case already
    if metadata:
        case["metadata"] = metadata
    threshold = test.get("threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        for grader in case.get("graders", []):
            grader.setdefault("threshold", threshold)
    return case


def _map_assertions(
    m: _Mapping,
    items: list[tuple[tuple[Any, ...], Any]],
    first: tuple[Any, ...],
    vars_: dict[str, Any],
) -> list[dict[str, Any]]:
    """AgentV's assertions as grader dicts; plain strings become one ``llm-rubric`` grader at the
    first string's place, weighted by how many there are (as AgentV does)."""
    out: list[dict[str, Any]] = []
    strings: list[str] = []
    rubric_at: int | None = None
    base = first[:-1]
    for path, item in items:
        if isinstance(item, str):
            strings.append(_render(m, item, vars_, path))
            if rubric_at is None:
                rubric_at = len(out)
                out.append({})
                m.copy_lines(path, (*base, first[-1] + rubric_at))
            continue
        grader = _map_assertion(m, item, path, vars_)
        if grader is not None:
            m.copy_lines(path, (*base, first[-1] + len(out)))
            out.append(grader)
    if rubric_at is not None:
        out[rubric_at] = {
            "name": "llm-rubric",
            "type": "llm-rubric",
            "config": {"rubric": strings},
            "weight": float(len(strings)),
        }
    return out


def _map_assertion(
    m: _Mapping, item: Any, path: tuple[Any, ...], vars_: dict[str, Any]
) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        m.problem(path, "an assertion is a string or a mapping with 'type'")
        return None
    grader = dict(item)
    kind = str(grader.get("type", "")).replace("_", "-")
    if kind in _RENAMED_TYPES:
        grader["type"] = kind = _RENAMED_TYPES[kind]
    negate = kind.startswith("not-")
    base_kind = kind[4:] if negate else kind
    if "metric" in grader:
        grader["name"] = grader.pop("metric")
    elif kind:
        grader.setdefault("name", assertion_name(kind, grader.get("value")))
    if "min_score" in grader:
        grader.setdefault("threshold", grader.pop("min_score"))
    if "value" in grader and base_kind not in ("regex", "llm-rubric"):
        # Text to look for is rendered once, before starts-with & co. escape it into a regex; a
        # regex is no template and llm-rubric renders its own (docs/eval-files.md, "Templates").
        grader["value"] = _render_value(m, grader["value"], vars_, (*path, "value"))
    if negate and base_kind in _SAME_TYPES:
        grader["type"] = base_kind
        grader["negate"] = True
    # any other not-<type> is turned by agentv_extras (negating here too would undo it)
    if grader.get("type") == "llm-rubric":
        if set(grader) <= _PLAIN_GRADER_KEYS:
            # nothing to judge: AgentV skips it with a warning (docs/eval-files.md, "AgentV's
            # current format"); one with other keys is left for validation to name them
            m.skipped.append((path, _NOTHING_TO_JUDGE))
            return None
        _llm_rubric(m, grader, path, vars_)
    elif grader.get("type") == "script":
        _script(m, grader, path)
    return grader


def _llm_rubric(
    m: _Mapping, grader: dict[str, Any], path: tuple[Any, ...], vars_: dict[str, Any]
) -> None:
    config = grader.get("config") or {}
    if not isinstance(config, dict):
        m.problem((*path, "config"), "config must be a mapping")
        config = {}
    config = dict(config)
    value = grader.pop("value", None)
    for key in ("criteria", "prompt"):  # AgentV 4.x llm-grader spellings
        if value is None and isinstance(grader.get(key), str):
            value = grader.pop(key)
    if isinstance(value, str):
        config["rubric"] = [_render(m, value, vars_, (*path, "value"))]
    elif isinstance(value, list):
        config["rubric"] = [
            _render(m, v if isinstance(v, str) else str(v.get("outcome", "")), vars_, path)
            for v in value
            if isinstance(v, (str, dict))
        ]
    provider = grader.pop("provider", None)
    if isinstance(provider, str):
        config["provider"] = provider
        grader.setdefault("target", {"max_calls": 50, "allow": [provider]})
    grader["config"] = config
    grader.setdefault("name", "llm-rubric")


def _script(m: _Mapping, grader: dict[str, Any], path: tuple[Any, ...]) -> None:
    if "provider" in grader:
        provider = grader.pop("provider")
        if "target" in grader:
            m.problem((*path, "provider"), "give 'provider' or 'target', not both")
        else:
            grader["target"] = provider
            m.copy_lines((*path, "provider"), (*path, "target"))
    if "timeout_ms" in grader and "timeout" not in grader:
        value = grader.pop("timeout_ms")
        grader["timeout"] = value / 1000 if isinstance(value, (int, float)) else value


# --- templating: every template goes through evalrun/spec/templates.py ------------------------


def _render(
    m: _Mapping,
    template: str,
    vars_: dict[str, Any],
    path: tuple[Any, ...],
    test_id: str | None = None,
) -> str:
    """``template`` rendered with the test's vars; a problem is reported at ``path``, naming
    ``test_id`` when that test's vars cause it (a prompt is shared by every test), and the text
    is kept, so the mapping goes on to find the file's other problems."""
    from evalrun.spec import templates  # Jinja: imported only for files in this format

    try:
        return templates.render(template, vars_)
    except templates.TemplateProblem as exc:
        named = test_id is not None and exc.from_vars
        m.problem(path, f"{exc} (test '{test_id}')" if named else str(exc))
        return template


def _render_value(
    m: _Mapping,
    value: Any,
    vars_: dict[str, Any],
    path: tuple[Any, ...],
    test_id: str | None = None,
) -> Any:
    if isinstance(value, str):
        from evalrun.spec import templates

        whole, inner = templates.value_of(value, vars_)
        if whole and not isinstance(inner, str):
            return inner
        return _render(m, value, vars_, path, test_id)
    if isinstance(value, list):
        return [_render_value(m, v, vars_, path, test_id) for v in value]
    if isinstance(value, dict):
        return {k: _render_value(m, v, vars_, path, test_id) for k, v in value.items()}
    return value


def _render_prompt(
    m: _Mapping, prompt: Prompt, vars_: dict[str, Any], path: tuple[Any, ...], test_id: str
) -> Any:
    """A prompt that is exactly ``{{ x }}`` takes ``x`` as it is (a message list stays a list);
    a chat prompt renders each message's content; any other prompt renders to one user message."""
    template = prompt.template
    if isinstance(template, str):
        stripped = template.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            with contextlib.suppress(json.JSONDecodeError):
                template = json.loads(stripped)
    if isinstance(template, list):
        return [_render_value(m, message, vars_, path, test_id) for message in template]
    return _render_value(m, template, vars_, path, test_id)
