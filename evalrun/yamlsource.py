"""YAML and JSON loading that remembers where every key was, so errors can name file, line, key.

Shared by eval files, targets.yaml and rubrics."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

import yaml
from yaml.resolver import Resolver

from evalrun.errors import UserError
from evalrun.safetext import repair, repair_json

#: path of keys/indexes -> 1-based line number
LineMap = dict[tuple[Any, ...], int]


class LineLookup(Protocol):
    """Anything :func:`line_for` can read lines from: a :data:`LineMap`, or a map kept in
    another shape (a JSONL tests file's, evalrun.spec.loader.JsonlLines)."""

    def get(self, key: tuple[Any, ...], /) -> int | None: ...


#: Limits that keep a hostile or mistaken file from exhausting memory or time (docs/security.md):
#: YAML (and .json) documents are parsed in pure Python, about a second per 200 KB on a slow
#: machine; big test sets belong in a .jsonl tests file, which has no such limit.
MAX_YAML_BYTES = 4 * 1024 * 1024
#: nodes that aliases may add by repeating an anchor (a "billion laughs" file adds billions)
MAX_ALIAS_NODES = 100_000
MAX_DEPTH = 100


def _is_merge(key: yaml.Node) -> bool:
    """A ``<<`` key: YAML 1.1's merge key, which AgentV's files use (docs/eval-files.md)."""
    return key.tag == "tag:yaml.org,2002:merge" or (
        isinstance(key, yaml.ScalarNode) and key.value == "<<" and key.style is None
    )


class SourceError(UserError):
    """A file that cannot be parsed; the message already names file and line."""


_STR, _NULL, _BOOL, _INT, _FLOAT, _MAP, _SEQ = (
    f"tag:yaml.org,2002:{name}" for name in ("str", "null", "bool", "int", "float", "map", "seq")
)
#: YAML 1.2's core schema (docs/eval-files.md, "YAML values"): the only plain scalars that are
#: not text. No yes/no/on/off, no sexagesimal 1:30, no 0b1 or 1_000, no merge key ``<<``.
_CORE: tuple[tuple[str, str, str], ...] = (
    (_NULL, r"~|null|Null|NULL|", "~nN"),
    (_BOOL, r"true|True|TRUE|false|False|FALSE", "tTfF"),
    (_INT, r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    (
        _FLOAT,
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+.0123456789",
    ),
)
#: the YAML 1.1 reading PyYAML and most tools give a plain scalar, to warn where it differs
_YAML11 = Resolver()
_KIND = {_BOOL: "a boolean", _INT: "a number", _FLOAT: "a number", _NULL: "null"}


class _CoreLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the core schema's implicit types. It notes which scalars were
    plain and untagged, the only ones whose type was guessed from their text."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}

    def compose_scalar_node(self, anchor: Any) -> Any:
        event = self.peek_event()
        node = super().compose_scalar_node(anchor)
        node.guessed = event.tag is None and event.style is None  # type: ignore[attr-defined]
        return node


for _tag, _pattern, _first in _CORE:
    _CoreLoader.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), [*_first])
_CoreLoader.add_implicit_resolver(_NULL, re.compile("^$"), [""])


def _core_value(tag: str, text: str) -> Any:
    """A scalar of a core-schema tag; ValueError when the text is not one (``!!float abc``)."""
    if tag == _NULL:
        return None
    if tag == _BOOL:
        if text.lower() not in ("true", "false"):
            raise ValueError
        return text.lower() == "true"
    if tag == _INT:
        body = text.lstrip("+")
        if body[:2] in ("0o", "0x"):
            return int(body[2:], 8 if body[1] == "o" else 16)
        return int(body)
    special = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}
    return special.get(text.lower()) if text.lower() in special else float(text)


#: (path, line, text, "YAML 1.1 reads it as ...")
Ambiguous = tuple[tuple[Any, ...], int, str, str]


class Parsed(NamedTuple):
    """A YAML or JSON document, with what its errors and warnings need."""

    data: Any
    lines: LineMap
    #: path -> (the text written, the value read), for each plain scalar read as a bool or
    #: number, so a field that wants text gets what the user typed (:func:`validate_keeping_text`)
    texts: dict[tuple[Any, ...], tuple[str, Any]]
    #: the same by (line, type, value), for values an AgentV mapping moved ("": two texts)
    texts_by_line: dict[tuple[int, type, Any], str]
    #: plain scalars read as text that YAML 1.1 reads otherwise
    ambiguous: list[Ambiguous]


class _Walk:
    """Turns composed YAML nodes into Python data and the line map, within the limits above.
    Each alias expands its anchor again; those repeated nodes count against MAX_ALIAS_NODES."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: LineMap = {}
        self.seen: set[int] = set()
        self.repeated = 0
        self._scalars: dict[int, Any] = {}
        #: (path, text, value) of each plain, untagged scalar: its type was guessed from its text
        self.guessed: list[tuple[tuple[Any, ...], str, Any]] = []

    def scalar(self, node: yaml.Node, path: tuple[Any, ...], line: int) -> Any:
        """A scalar's value, constructed once per node (an alias repeats it for free)."""
        key = id(node)
        if key not in self._scalars:
            if node.tag == _STR:
                value: Any = repair(node.value)[0]
            elif node.tag in _KIND:
                try:
                    value = _core_value(node.tag, node.value)
                except (ValueError, OverflowError):
                    raise SourceError(
                        f"{self.name}:{line}: {format_loc(path)}: '{_short(node.value)}' cannot "
                        f"be read as !!{node.tag.rsplit(':', 1)[-1]}; quote it to keep it as text"
                    ) from None
            else:
                raise SourceError(self.unsupported(node, path, line))
            self._scalars[key] = value
        value = self._scalars[key]
        if getattr(node, "guessed", False):
            self.guessed.append((path, node.value, value))
        return value

    def results(
        self,
    ) -> tuple[
        dict[tuple[Any, ...], tuple[str, Any]], dict[tuple[int, type, Any], str], list[Ambiguous]
    ]:
        """The texts of plain scalars read as bools or numbers, keyed as :class:`Parsed` says,
        and the plain scalars read as text that YAML 1.1 reads otherwise."""
        texts: dict[tuple[Any, ...], tuple[str, Any]] = {}
        by_line: dict[tuple[int, type, Any], str] = {}
        ambiguous: list[Ambiguous] = []
        for path, text, value in self.guessed:
            line = self.lines[path]
            if not isinstance(value, str):
                texts[path] = (text, value)
                key = (line, type(value), value)
                by_line[key] = text if by_line.get(key, text) == text else ""
                continue
            reading = _YAML11.resolve(yaml.ScalarNode, text, (True, False))
            if reading in _KIND:
                ambiguous.append((path, line, text, f"YAML 1.1 reads it as {_KIND[reading]}"))
        return texts, by_line, ambiguous

    def unsupported(self, node: yaml.Node, path: tuple[Any, ...], line: int) -> str:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        return (
            f"{self.name}:{line}: {format_loc(path)}: the tag {tag} is not supported: values are "
            "text, numbers, true/false, null, lists and mappings"
        )

    def node(self, node: yaml.Node, path: tuple[Any, ...], line: int) -> Any:
        """``line``: where this node is used; inside a repeated anchor, the alias's line."""
        repeated = id(node) in self.seen
        if repeated:
            self.repeated += 1
            if self.repeated > MAX_ALIAS_NODES:
                raise SourceError(
                    f"{self.name}:{line}: YAML aliases expand to more than {MAX_ALIAS_NODES} "
                    "nodes; refused (an alias bomb?)"
                )
        else:
            self.seen.add(id(node))
        if len(path) > MAX_DEPTH:
            raise SourceError(f"{self.name}:{line}: nested more than {MAX_DEPTH} levels deep")
        self.lines[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                raise SourceError(self.unsupported(node, path, line))
            out: dict[str, Any] = {}
            own: set[str] = set()  # keys written here; a merged key may be overridden once
            merges = [pair for pair in node.value if _is_merge(pair[0])]
            for key_node, value_node in [*merges, *(p for p in node.value if p not in merges)]:
                key_line = line if repeated else key_node.start_mark.line + 1
                if _is_merge(key_node):
                    self.merge(out, value_node, path, key_line)
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SourceError(
                        f"{self.name}:{key_line}: {format_loc(path)}: a key must be a plain value, "
                        "not a list or a mapping"
                    )
                if key_node.tag not in (_STR, *_KIND):
                    raise SourceError(self.unsupported(key_node, path, key_line))
                key = repair(key_node.value)[0]  # a key is a name: `1:` and `yes:` are text
                where = (*path, key)  # named: mypy misreads `lines[(*path, key)]` on 3.10
                if key in own:
                    raise SourceError(
                        f"{self.name}:{key_line}: {format_loc(where)}: the key is repeated "
                        f"(first on line {self.lines[where]}); a key may appear once"
                    )
                own.add(key)
                out[key] = self.node(value_node, where, key_line)
                self.lines[where] = key_line
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise SourceError(self.unsupported(node, path, line))
            here = line if repeated else node.start_mark.line + 1
            return [self.node(child, (*path, i), here) for i, child in enumerate(node.value)]
        return self.scalar(node, path, line)

    def merge(self, out: dict[Any, Any], node: yaml.Node, path: tuple[Any, ...], line: int) -> None:
        """A merge key (``<<: *base`` or ``<<: [*a, *b]``): the keys of the mappings it names,
        the first one winning, before the mapping's own keys (which win over all of them)."""
        own_line = self.lines[path]
        value = self.node(node, path, line)
        self.lines[path] = own_line
        for source in value if isinstance(value, list) else [value]:
            if not isinstance(source, dict):
                raise SourceError(f"{self.name}:{line}: '<<' merges mappings only")
            for key, item in source.items():
                out.setdefault(key, item)


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def parse_yaml_with_lines(text: str, name: str) -> Parsed:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise SourceError(
            f"{name}:1: {size} bytes is over the {MAX_YAML_BYTES}-byte limit for YAML and JSON "
            "files; put large test sets in a .jsonl tests file"
        )
    try:
        root = yaml.compose(text, Loader=_CoreLoader)
    except yaml.MarkedYAMLError as exc:
        raise SourceError(yaml_error_message(name, exc)) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"{name}: invalid YAML: {exc}") from None
    except RecursionError:
        raise SourceError(f"{name}:1: nested too deeply to parse") from None
    walk = _Walk(name)
    data = None if root is None else walk.node(root, (), 1)
    return Parsed(data, walk.lines, *walk.results())


#: (what PyYAML says, what to do about it); the first matching entry gives the hint.
_YAML_HINTS: tuple[tuple[str, str], ...] = (
    ("'\\t'", "YAML indents with spaces only: replace the tab with spaces"),
    (
        "but got '<stream end>'",
        "{opened}the [ or { that starts here is never closed",
    ),
    (
        "expected ',' or '",
        "inside { } or [ ], quote a value that contains ':', '?', ',' or '#' "
        "(e.g. {a: 'is it?'}), or write the mapping as indented lines",
    ),
    (
        "mapping values are not allowed here",
        "a ': ' inside an unquoted value: quote the value (input: 'Answer: yes'), "
        "or check this line's indentation against the line above",
    ),
    ("mapping keys are not allowed here", "quote a value that contains '? ' ('is it? yes')"),
    ("but found '?'", "a '?' at the start of a value or line makes a complex key: quote the text"),
    (
        "expected <block end>",
        "this line is indented differently from the lines above it: align it with its siblings",
    ),
    ("did not find expected key", "check the indentation, or quote a value with ':' in it"),
    ("did not find expected '-' indicator", "list items need the same indentation and a '- '"),
    ("while scanning an alias", "'*' starts an alias: quote a value that begins with '*'"),
    ("while scanning an anchor", "'&' starts an anchor: quote a value that begins with '&'"),
    ("undefined alias", "'*' starts an alias: quote a value that begins with '*'"),
    ("cannot start any token", "a value cannot begin with this character: quote the value"),
    ("while scanning a quoted scalar", "{opened}the quote that starts here is never closed"),
)


def yaml_error_message(name: str, exc: yaml.MarkedYAMLError) -> str:
    """``file:line:column: invalid YAML: <problem>; <hint>`` (docs/eval-files.md)."""
    problem = exc.problem or str(exc)
    text = f"{problem} ({exc.context})" if exc.context else problem
    hint = next((hint for needle, hint in _YAML_HINTS if needle in text), None)
    mark = exc.problem_mark or exc.context_mark
    if hint and hint.startswith("{opened}") and exc.context_mark is not None:
        mark = exc.context_mark  # an unclosed bracket or quote: point at where it opened
        hint = hint.removeprefix("{opened}")
    where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
    return f"{where}: invalid YAML: {problem}" + (
        f"; {hint.removeprefix('{opened}')}" if hint else ""
    )


def load_yaml_with_lines(path: Path) -> Parsed:
    """Load YAML or JSON (JSON is YAML) from ``path`` with a line map."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not UTF-8 text") from None
    if path.suffix == ".json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    return parse_yaml_with_lines(text, str(path))


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-empty line, read as it goes (files of any size)."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        try:
            for lineno, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    value = repair_json(json.loads(raw))[0]
                except json.JSONDecodeError as exc:
                    raise SourceError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
                except RecursionError:
                    raise SourceError(f"{path}:{lineno}: nested too deeply to parse") from None
                yield lineno, value
        except UnicodeDecodeError:
            raise SourceError(f"{path}: not UTF-8 text") from None


M = TypeVar("M")
_MISSING = object()


def validate_keeping_text(
    model: type[M],
    data: Any,
    parsed: Parsed,
    name: Path | str,
    at: tuple[Any, ...] = (),
    shown: tuple[Any, ...] = (),
) -> tuple[M, list[str]]:
    """``model.model_validate(data)`` (``data`` is ``parsed.data`` at path ``at``) where a field
    that wants text gets the text written: a plain ``001``, ``1e3`` or ``true`` that YAML read as
    a number or boolean is put back as written and ``data`` validated again (docs/eval-files.md,
    "YAML values"). Returns the model and ``file:line: key: message`` warnings for each such
    value, and for each plain ``yes``/``on``/``1_000`` kept as text that YAML 1.1 reads
    otherwise; a key is shown as ``shown`` + its path under ``at``. Raises pydantic's
    ValidationError; ``data`` is changed in place."""
    from pydantic import ValidationError

    kept: list[tuple[tuple[Any, ...], str, str]] = []
    while True:
        try:
            instance = model.model_validate(data)  # type: ignore[attr-defined]
            break
        except ValidationError as exc:
            found = _keep_text(exc, data, parsed, at)
            if not found:
                raise
            kept += found
    warnings = [
        (line, path, text, reading)
        for path, line, text, reading in parsed.ambiguous
        if path[: len(at)] == at and _is_text(_value_at(instance, path[len(at) :]))
    ]
    for path, text, reading in kept:
        warnings.append((parsed.lines.get(path, 0), path, text, reading))
    warnings.sort(key=lambda item: item[0])
    return instance, [
        f"{name}:{line}: {format_loc((*shown, *path[len(at) :]))}: the unquoted {_short(text)} "
        f"is kept as the text '{_short(text)}', though {reading}: quote it to be sure"
        for line, path, text, reading in dict.fromkeys(warnings)
    ]


def _keep_text(
    exc: Any, data: Any, parsed: Parsed, at: tuple[Any, ...]
) -> list[tuple[tuple[Any, ...], str, str]]:
    """Put back the written text of each bool or number a text field refused (pydantic's
    ``string_type``); returns (path, text, reading) of each."""
    kept = []
    for err in exc.errors():
        if err["type"] != "string_type":
            continue
        holder: Any = None
        key: Any = None
        path = at
        value = data
        for part in err["loc"]:
            if (
                isinstance(value, dict)
                and part in value
                or (isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value))
            ):
                holder, key, path, value = value, part, (*path, part), value[part]
        if holder is None or not isinstance(value, (bool, int, float)):
            continue
        written, read = parsed.texts.get(path, ("", None))
        text: str | None = written if type(read) is type(value) and read == value else ""
        text = text or parsed.texts_by_line.get((parsed.lines.get(path, 0), type(value), value))
        if not text and type(value) is int:  # JSON, or a value an AgentV mapping cannot say
            text = str(value)
        if text:
            holder[key] = text
            reading = "a boolean" if isinstance(value, bool) else "a number"
            kept.append((path, text, f"YAML reads it as {reading}"))
    return kept


def _value_at(instance: Any, path: tuple[Any, ...]) -> Any:
    """What a validated model holds at a key path of its source, or _MISSING."""
    value = instance
    for part in path:
        fields = getattr(type(value), "model_fields", None)
        if fields is not None:
            name = next((n for n, f in fields.items() if (f.alias or n) == part), None)
            value = getattr(value, name) if name else _MISSING
        elif isinstance(value, dict):
            value = value.get(part, _MISSING)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return _MISSING
    return value


def _is_text(value: Any) -> bool:
    """A value the model keeps as text, or one whose place it cannot say (an AgentV rename)."""
    return value is _MISSING or isinstance(value, str)


def line_for(lines: LineLookup, loc: tuple[Any, ...]) -> int | None:
    """The line of the deepest known prefix of ``loc``."""
    for end in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:end]))
        if line is not None:
            return line
    return None


def format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def validation_error_message(
    path: Path | str, exc: Exception, lines: LineMap, model: Any = None
) -> str:
    """Render a pydantic ValidationError as ``file:line: key: message`` lines, in line order;
    given the model, an unknown key gets a "did you mean" naming the closest known one."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return f"{path}: {exc}"
    out: list[tuple[int, str]] = []
    all_errors = errors()
    for err in all_errors:
        if len(all_errors) > 1 and "str" in err["loc"] and err["type"] == "string_type":
            continue  # the other branch of a `str | list[...]` union explains the problem better
        loc = tuple(p for p in err["loc"] if not _is_union_tag(p))
        line = line_for(lines, loc)
        where = f"{path}:{line}" if line else str(path)
        message = err["msg"]
        if err["type"] == "extra_forbidden" and loc:
            message += f": unknown key '{loc[-1]}'"
            if model is not None:
                message += _suggest_key(model, loc)
        out.append((line or 0, f"{where}: {format_loc(loc)}: {message}"))
    out.sort(key=lambda item: item[0])
    return "\n".join(dict.fromkeys(text for _, text in out))


def _suggest_key(model: Any, loc: tuple[Any, ...]) -> str:
    """Walk the model along ``loc`` to the mapping that holds the unknown key."""
    import typing

    from pydantic import BaseModel

    from evalrun.suggest import did_you_mean

    current = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return ""
        candidates = [field.annotation]
        current = None
        while candidates:
            annotation = candidates.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                current = annotation
                break
            candidates += list(typing.get_args(annotation))
        if current is None:
            return ""
    fields = getattr(current, "model_fields", {})
    names = [field.alias or name for name, field in fields.items()]
    return did_you_mean(str(loc[-1]), names)


def _is_union_tag(part: Any) -> bool:
    """pydantic puts union member names (``str``, ``list[Message]``) into error locations."""
    return isinstance(part, str) and (
        part in {"str", "int", "float", "bool", "dict", "list", "none"}
        or "[" in part
        or part.startswith("function-")
        or part[:1].isupper()
    )
