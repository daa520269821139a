"""Which skills an agent used, read from its tool calls, and AgentV's ``skill-used`` verdict on
them (docs/agents.md, "skill-used and skill-trigger").

A skill counts as used when the agent called a ``Skill`` tool with its name, or when a
``SKILL.md`` under a ``skills/<name>/`` folder shows up in a ``Read`` call's path, a ``Bash``
command or any call's result. Failed calls do not count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evalrun.transcripts.model import ToolCall, Transcript

_NAME = re.compile(r"[A-Za-z0-9._:-]+")
_PATH_END = re.compile(r"(?:^|/)(?:\.agents/)?skills/([^/\s]+)/SKILL\.md$")
_IN_TEXT = re.compile(r"(?:^|[/\"'\s])(?:\.agents/)?skills/([^/\"'\s]+)/SKILL\.md(?:$|[)\"'\s,;:])")
_PATH_IN_MATCH = re.compile(r"(?:\.agents/)?skills/([^/\"'\s]+)/SKILL\.md")
_TOKEN_HEAD = re.compile(r"^[`\"'(\[{<]+")
_TOKEN_TAIL = re.compile(r"[`\"',;:)\]}>]+$")


@dataclass(frozen=True)
class SkillUse:
    """``source``: ``tool`` (a Skill call) or ``path`` (a SKILL.md seen in a call)."""

    name: str
    source: str
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.name} ({self.source}{', ' + self.path if self.path else ''})"


def skill_uses(transcript: Transcript) -> list[SkillUse]:
    """Every skill use in the order the calls were made; a path seen twice counts once."""
    uses: list[SkillUse] = []
    for call in transcript.tool_calls:
        if call.is_error:
            continue
        for use in _uses_in(call):
            if use.source == "tool" or use not in uses:
                uses.append(use)
    return uses


def _uses_in(call: ToolCall) -> Iterator[SkillUse]:
    name = call.name.lower()
    args = call.arguments if isinstance(call.arguments, dict) else {}
    if name == "skill":
        skill = _text(args.get("skill")) or _text(args.get("name"))
        if skill:
            yield SkillUse(skill, "tool")
        return
    if name == "read":
        path = _text(args.get("file_path")) or _text(args.get("path"))
        path = path or _text(args.get("filePath"))
        found = _PATH_END.search(path.replace("\\", "/")) if path else None
        if path and found and _NAME.fullmatch(found.group(1)):
            yield SkillUse(found.group(1), "path", path)
        return
    if name == "bash":
        command = _text(args.get("command"))
        if command:
            yield from _paths_in(command)
    if call.result is not None:
        result = call.result
        text = result if isinstance(result, str) else json.dumps(result, separators=(",", ":"))
        yield from _paths_in(text)


def _paths_in(text: str) -> Iterator[SkillUse]:
    """SKILL.md paths in free text: whole words first, then paths inside longer words."""
    found: dict[str, str] = {}
    for word in re.split(r"\s+", text):
        token = _TOKEN_TAIL.sub("", _TOKEN_HEAD.sub("", word)).replace("\\", "/")
        match = _PATH_END.search(token)
        if match and _NAME.fullmatch(match.group(1)):
            found[token] = match.group(1)
    for match in _IN_TEXT.finditer(text.replace("\\", "/")):
        inner = _PATH_IN_MATCH.search(match.group(0))
        if inner and _NAME.fullmatch(inner.group(1)):
            found[inner.group(0)] = inner.group(1)
    for path, name in found.items():
        yield SkillUse(name, "path", path)


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


@dataclass(frozen=True)
class SkillVerdict:
    passed: bool
    reason: str


def read_expectation(value: Any) -> list[str] | dict[str, Any]:
    """A ``skill-used`` value: a name or list of names (each must be used), or one
    ``{name?, pattern?, min?, max?}`` (how many uses match); ValueError otherwise."""
    if isinstance(value, str) and value.strip():
        return [value.strip()]
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return [v.strip() for v in value]
    if isinstance(value, dict):
        if not (_text(value.get("name")) or _text(value.get("pattern"))):
            raise ValueError("skill-used: an object value needs a name or a pattern")
        for bound in ("min", "max"):
            count = value.get(bound)
            if bound in value and (
                isinstance(count, bool) or not isinstance(count, int) or count < 0
            ):
                raise ValueError(f"skill-used: {bound} must be a whole number >= 0, got {count!r}")
        if "min" in value and "max" in value and value["max"] < value["min"]:
            raise ValueError("skill-used: max must not be less than min")
        return value
    raise ValueError(
        "skill-used: value must be a skill name, a list of names or {name?, pattern?, min?, max?}"
    )


def read_trigger(config: dict[str, Any], negate: bool) -> tuple[str, bool]:
    """AgentV 4.x's ``skill-trigger`` (``skill``, ``should_trigger``, default true) as the
    ``skill-used`` it became: (the name, whether it is forbidden)."""
    should = config.get("should_trigger", True)
    if not _text(config.get("skill")) or not isinstance(should, bool):
        raise ValueError("skill-trigger: needs skill (a name) and should_trigger true/false")
    return str(config["skill"]).strip(), negate != (not should)


def judge_skills(
    expected: list[str] | dict[str, Any], uses: list[SkillUse], *, forbidden: bool
) -> SkillVerdict:
    """``forbidden`` (``not-skill-used``): a list passes when none of its skills was used, an
    object only when nothing matches it (it takes no bounds but ``max: 0``)."""
    seen = ", ".join(map(str, uses)) or "none"
    if isinstance(expected, list):
        used = [name for name in expected if any(u.name == name for u in uses)]
        if forbidden:
            if used:
                return SkillVerdict(False, f"used {', '.join(used)}; skills used: {seen}")
            return SkillVerdict(True, f"did not use {', '.join(expected)}; skills used: {seen}")
        missing = [name for name in expected if name not in used]
        if missing:
            return SkillVerdict(False, f"did not use {', '.join(missing)}; skills used: {seen}")
        return SkillVerdict(True, f"used {', '.join(expected)}; skills used: {seen}")
    name, pattern = _text(expected.get("name")), _text(expected.get("pattern"))
    matching = [u for u in uses if _fits(u.name, name, pattern)]
    label = pattern or name
    if forbidden:
        if "min" in expected or expected.get("max", 0) != 0:
            raise ValueError("not-skill-used: an object value takes no bounds but max: 0")
        if matching:
            return SkillVerdict(False, f"used {label} {len(matching)} time(s): {seen}")
        return SkillVerdict(True, f"did not use {label}; skills used: {seen}")
    low = expected.get("min", 0 if "max" in expected else 1)
    high = expected.get("max")
    ok = len(matching) >= low and (high is None or len(matching) <= high)
    wanted = f"at least {low}" if high is None else f"{low} to {high}"
    return SkillVerdict(ok, f"used {label} {len(matching)} time(s), wanted {wanted}; {seen}")


def _fits(skill: str, name: str | None, pattern: str | None) -> bool:
    """``name`` equal (case counts); ``pattern`` a glob (``*``, ``?``) over the whole name,
    ignoring case."""
    if name and skill != name:
        return False
    if pattern:
        glob = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
        return re.fullmatch(glob, skill, re.IGNORECASE) is not None
    return True
