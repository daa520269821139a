"""YAML and JSON loading that remembers where every key was, so errors can name file, line, key.

Shared by eval files, targets.yaml and rubrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from evalrun.safetext import repair, repair_json

#: path of keys/indexes -> 1-based line number
LineMap = dict[tuple[Any, ...], int]

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


class SourceError(Exception):
    """A file that cannot be parsed; the message already names file and line."""


class _Walk:
    """Turns composed YAML nodes into Python data and the line map, within the limits above.
    Each alias expands its anchor again; those repeated nodes count against MAX_ALIAS_NODES."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: LineMap = {}
        self.seen: set[int] = set()
        self.repeated = 0
        self._loader = yaml.SafeLoader("")
        self._scalars: dict[int, Any] = {}

    def close(self) -> None:
        self._loader.dispose()

    def scalar(self, node: yaml.Node) -> Any:
        """A scalar's value, constructed once per node (an alias repeats it for free)."""
        key = id(node)
        if key not in self._scalars:
            value = self._loader.construct_object(node, deep=True)
            self._scalars[key] = repair(value)[0] if isinstance(value, str) else value
        return self._scalars[key]

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
            out: dict[Any, Any] = {}
            merges = [pair for pair in node.value if _is_merge(pair[0])]
            for key_node, value_node in [*merges, *(p for p in node.value if p not in merges)]:
                key_line = line if repeated else key_node.start_mark.line + 1
                if _is_merge(key_node):
                    self.merge(out, value_node, path, key_line)
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    raise SourceError(f"{self.name}:{key_line}: a key must be a plain value")
                key = self.scalar(key_node)
                out[key] = self.node(value_node, (*path, key), key_line)
                self.lines[(*path, key)] = key_line
            return out
        if isinstance(node, yaml.SequenceNode):
            here = line if repeated else node.start_mark.line + 1
            return [self.node(child, (*path, i), here) for i, child in enumerate(node.value)]
        return self.scalar(node)

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


def parse_yaml_with_lines(text: str, name: str) -> tuple[Any, LineMap]:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise SourceError(
            f"{name}:1: {size} bytes is over the {MAX_YAML_BYTES}-byte limit for YAML and JSON "
            "files; put large test sets in a .jsonl tests file"
        )
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise SourceError(yaml_error_message(name, exc)) from None
    except yaml.YAMLError as exc:
        raise SourceError(f"{name}: invalid YAML: {exc}") from None
    except RecursionError:
        raise SourceError(f"{name}:1: nested too deeply to parse") from None
    walk = _Walk(name)
    if root is None:
        return None, walk.lines
    try:
        return walk.node(root, (), 1), walk.lines
    finally:
        walk.close()


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


def load_yaml_with_lines(path: Path) -> tuple[Any, LineMap]:
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


def line_for(lines: LineMap, loc: tuple[Any, ...]) -> int | None:
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
    """Render a pydantic ValidationError as ``file:line: key: message`` lines; given the
    model, an unknown key gets a "did you mean" naming the closest known one."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return f"{path}: {exc}"
    out = []
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
        out.append(f"{where}: {format_loc(loc)}: {message}")
    return "\n".join(dict.fromkeys(out))


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
