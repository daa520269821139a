"""AgentV's trajectory assertions over an agent's run: ``trajectory:tool-used``,
``trajectory:tool-sequence``, ``trajectory:tool-args-match`` and ``trajectory:step-count``
(docs/agents.md, "AgentV's trajectory assertions").

Each passes or fails. A tool is matched by a glob (``*``, ``?``, whole name, ignoring case),
given as a string or as ``name`` / ``pattern``. Shell calls that carry a command
(``exec_command``, ``local_shell``, ``shell``) are commands, not tools, and are not matched by
the tool assertions. ``step-count`` counts every kind of step: messages, tools, commands, and
tool results (AgentV's ``span`` steps).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from evalrun.transcripts.model import Transcript

_COMMAND_TOOLS = frozenset(("exec_command", "local_shell", "shell"))


StepKind = Literal["tool", "command", "message", "span"]
STEP_KINDS: tuple[str, ...] = ("tool", "command", "message", "reasoning", "search", "span")


@dataclass(frozen=True)
class TrajectoryStep:
    """One step as AgentV's trajectory assertions see it; ``aliases``: the names a pattern may
    match (a command's text, its tool and its program; a message's name and kind)."""

    kind: StepKind
    name: str
    args: Any = None  # None: the call carried no arguments
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class AssertionVerdict:
    passed: bool
    reason: str


def trajectory_steps(transcript: Transcript) -> list[TrajectoryStep]:
    """The run's steps in order, as AgentV builds them from the messages of a run: each message,
    then each of its tool calls (arguments given as JSON text read as JSON) and, when the call
    came back, its result; last the final answer (``final_response``)."""
    steps: list[TrajectoryStep] = []
    for message in transcript.messages():
        steps.append(TrajectoryStep("message", "message", aliases=("message",)))
        for call in message.get("tool_calls", ()):
            name, args = str(call["tool"]), _structured(call["input"])
            command = _command(args) if name.lower() in _COMMAND_TOOLS else None
            if command:
                aliases = tuple(dict.fromkeys((command, name, command.split()[0])))
                steps.append(TrajectoryStep("command", command, args, aliases))
            else:
                steps.append(TrajectoryStep("tool", name, args, (name,)))
            if call["output"] is not None:
                steps.append(TrajectoryStep("span", "tool_result", aliases=("tool_result", "span")))
    steps.append(TrajectoryStep("message", "final_response", aliases=("final_response", "message")))
    return steps


def _tools(steps: list[TrajectoryStep]) -> list[TrajectoryStep]:
    return [step for step in steps if step.kind == "tool"]


def _structured(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _command(args: Any) -> str | None:
    if not isinstance(args, dict):
        return None
    command = next(
        (args[k] for k in ("cmd", "command", "commands") if args.get(k) is not None), None
    )
    if isinstance(command, str):
        return command.strip() or None
    if isinstance(command, list):
        return " ".join(str(part).strip() for part in command if str(part).strip()) or None
    return None


def glob_fits(value: str, pattern: str) -> bool:
    """``pattern`` (``*``, ``?``) over the whole of ``value``, ignoring case."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.IGNORECASE | re.DOTALL) is not None


def _label(matcher: Any) -> str:
    if isinstance(matcher, str):
        return matcher
    return str(matcher.get("pattern") or matcher.get("name") or "*")


def _fits(step: TrajectoryStep, matcher: Any) -> bool:
    if isinstance(matcher, dict):
        kinds = matcher.get("type")
        if kinds is not None and step.kind not in (kinds if isinstance(kinds, list) else [kinds]):
            return False
    label = matcher if isinstance(matcher, str) else matcher.get("pattern") or matcher.get("name")
    names = step.aliases or (step.name,)
    return not label or any(glob_fits(name, str(label)) for name in names)


def _named(matcher: Any, what: str) -> Any:
    if isinstance(matcher, str) or (
        isinstance(matcher, dict) and (matcher.get("pattern") or matcher.get("name"))
    ):
        return matcher
    raise ValueError(f"{what} must be a tool name or an object with name or pattern")


def _names(steps: list[TrajectoryStep]) -> str:
    return ", ".join(s.name for s in steps) or "none"


def tool_used(value: Any, steps: list[TrajectoryStep], *, inverse: bool) -> AssertionVerdict:
    """A name or list of names: each was called (``inverse``: none was). An object
    ``{name|pattern, min?, max?}``: the calls that fit number from ``min`` (default 1) to
    ``max`` (``inverse``: they do not)."""
    steps = _tools(steps)
    seen = _names(steps)
    if isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    ):
        wanted = [value] if isinstance(value, str) else value
        if not wanted:
            raise ValueError("trajectory:tool-used: name at least one tool")
        used = [m for m in wanted if any(_fits(s, m) for s in steps)]
        if inverse:
            ok = not used
            verb = "did not call" if ok else "called"
            return AssertionVerdict(ok, f"{verb} {', '.join(used or wanted)}; tools called: {seen}")
        missing = [m for m in wanted if m not in used]
        text = f"did not call {', '.join(missing)}" if missing else f"called {', '.join(wanted)}"
        return AssertionVerdict(not missing, f"{text}; tools called: {seen}")
    if not isinstance(value, dict):
        raise ValueError("trajectory:tool-used: value must be a tool name, a list or an object")
    _named(value, "trajectory:tool-used: an object value")
    low = value["min"] if isinstance(value.get("min"), (int, float)) else 1
    high = value["max"] if isinstance(value.get("max"), (int, float)) else None
    count = sum(_fits(s, value) for s in steps)
    within = count >= low and (high is None or count <= high)
    bounds = f"at least {low:g}" if high is None else f"{low:g} to {high:g}"
    reason = f"called {_label(value)} {count} time(s), wanted {bounds}; tools called: {seen}"
    return AssertionVerdict(within != inverse, ("not: " if inverse else "") + reason)


def tool_sequence(value: Any, steps: list[TrajectoryStep], *, inverse: bool) -> AssertionVerdict:
    """``{mode: in_order (default) | exact, steps: [...]}`` or a bare list (in order)."""
    steps = _tools(steps)
    given: list[Any]
    if isinstance(value, list):
        mode, given = "in_order", value
    elif isinstance(value, dict):
        mode = "exact" if value.get("mode") == "exact" else "in_order"
        steps_value = value.get("steps")
        given = steps_value if isinstance(steps_value, list) else []
    else:
        raise ValueError("trajectory:tool-sequence: value must be a list or {mode, steps}")
    wanted = [_named(m, f"trajectory:tool-sequence: step {i + 1}") for i, m in enumerate(given)]
    if not wanted:
        raise ValueError("trajectory:tool-sequence: name at least one step")
    seen = _names(steps)
    if mode == "exact":
        ok = len(steps) == len(wanted) and all(map(_fits, steps, wanted))
        reason = f"exact sequence {', '.join(map(_label, wanted))}; tools called: {seen}"
    else:
        found = 0
        for step in steps:
            if found < len(wanted) and _fits(step, wanted[found]):
                found += 1
        ok = found == len(wanted)
        reason = (
            f"called {', '.join(map(_label, wanted))} in order; tools called: {seen}"
            if ok
            else f"{_label(wanted[found])} not called in order; tools called: {seen}"
        )
    return AssertionVerdict(ok != inverse, ("not: " if inverse else "") + reason)


def tool_args_match(value: Any, steps: list[TrajectoryStep], *, inverse: bool) -> AssertionVerdict:
    """``{name|pattern, args, mode: partial (default) | exact, ignore?, defaults?}``: some call
    that fits had these arguments (``inverse``: none had)."""
    steps = _tools(steps)
    if not isinstance(value, dict):
        raise ValueError("trajectory:tool-args-match: value must be an object")
    _named(value, "trajectory:tool-args-match: value")
    expected = value["args"] if "args" in value else value.get("arguments")
    if expected is None:
        raise ValueError("trajectory:tool-args-match: value needs args")
    mode = value.get("mode", "partial")
    if mode not in ("partial", "exact"):
        raise ValueError("trajectory:tool-args-match: mode must be partial or exact")
    defaults = value.get("defaults")
    if defaults is not None and not isinstance(defaults, dict):
        raise ValueError("trajectory:tool-args-match: defaults must be a mapping")
    ignore = value.get("ignore", [])
    ignore = [ignore] if isinstance(ignore, str) else ignore
    if not isinstance(ignore, list) or not all(isinstance(i, str) and i.strip() for i in ignore):
        raise ValueError("trajectory:tool-args-match: ignore must be a name or a list of names")

    def cleaned(args: Any, drop: Callable[[str, Any], bool]) -> Any:
        return {k: v for k, v in args.items() if not drop(k, v)} if isinstance(args, dict) else args

    def ignored(key: str, _: Any) -> bool:
        return any(glob_fits(key, i) if re.search(r"[*?]", i) else key == i for i in ignore)

    def default(key: str, item: Any) -> bool:
        return defaults is not None and key in defaults and same(item, defaults[key])

    want = cleaned(expected, ignored)
    fitting = [s for s in steps if _fits(s, value) and s.args is not None]
    compare = same if mode == "exact" else _partial
    hit = next(
        (s for s in fitting if compare(cleaned(cleaned(s.args, ignored), default), want)), None
    )
    label = _label(value)
    if hit is not None:
        reason = f"{label} called with the expected arguments ({mode}): {json.dumps(hit.args)}"
    elif not fitting:
        reason = f"no call to {label} with arguments; tools called: {_names(steps)}"
    else:
        observed = ", ".join(json.dumps(s.args) for s in fitting)
        reason = f"no call to {label} had the arguments {json.dumps(expected)} ({mode}): {observed}"
    return AssertionVerdict((hit is not None) != inverse, ("not: " if inverse else "") + reason)


def step_count(value: Any, steps: list[TrajectoryStep], *, inverse: bool) -> AssertionVerdict:
    """``{type?, name|pattern?, min?, max?}``: the steps that fit (of these kinds, with a name
    the glob matches) number from ``min`` to ``max`` (``inverse``: they do not)."""
    if not isinstance(value, dict):
        raise ValueError("trajectory:step-count: value must be {type?, name?, min?, max?}")
    bounds = {k: value.get(k) for k in ("min", "max") if value.get(k) is not None}
    if not bounds:
        raise ValueError("trajectory:step-count: give min or max")
    for key, bound in bounds.items():
        if not isinstance(bound, (int, float)) or isinstance(bound, bool) or bound < 0:
            raise ValueError(f"trajectory:step-count: {key} must be a number >= 0, got {bound!r}")
    kinds = value.get("type")
    listed = kinds if isinstance(kinds, list) else [] if kinds is None else [kinds]
    unknown = [k for k in listed if k not in STEP_KINDS]
    if unknown:
        raise ValueError(
            f"trajectory:step-count: type must be one of {', '.join(STEP_KINDS)}, got {unknown[0]!r}"
        )
    count = sum(_fits(step, value) for step in steps)
    low, high = bounds.get("min"), bounds.get("max")
    within = (low is None or count >= low) and (high is None or count <= high)
    wanted = (
        f"{low:g} to {high:g}"
        if low is not None and high is not None
        else f"at least {low:g}"
        if low is not None
        else f"at most {high:g}"
    )
    what = ", ".join(
        part
        for part in (
            f"type={'|'.join(map(str, listed))}" if listed else "",
            f"pattern={value.get('pattern') or value.get('name')}"
            if value.get("pattern") or value.get("name")
            else "",
        )
        if part
    )
    reason = f"{count} step(s){' for ' + what if what else ''}, wanted {wanted}"
    return AssertionVerdict(within != inverse, ("not: " if inverse else "") + reason)


def same(a: Any, b: Any) -> bool:
    """Deep equality as JSON sees it: ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return bool(a == b)


def _partial(actual: Any, expected: Any) -> bool:
    """Every expected key present with a fitting value; lists item by item, of equal length."""
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(map(_partial, actual, expected))
        )
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _partial(actual[k], v) for k, v in expected.items()
        )
    return same(actual, expected)


ASSERTIONS = {
    "trajectory:tool-used": tool_used,
    "trajectory:tool-sequence": tool_sequence,
    "trajectory:tool-args-match": tool_args_match,
    "trajectory:step-count": step_count,
}
