"""AgentV's templates (``{{ var }}``, filters, ``{% if %}``, ``{% for %}``), rendered by one
sandboxed Jinja environment that reads them as Nunjucks, AgentV's engine, does
(docs/eval-files.md, "Templates").

Every template of an eval file is rendered here, when the file is loaded, so ``validate`` has
rendered each one with the vars of each test. What the renderer cannot honour (a syntax error,
an unknown filter or tag, a name no var defines) raises :class:`TemplateProblem`, which the
loader reports at the template's ``file:line``; nothing is dropped or sent as written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from types import TracebackType
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, Undefined, nodes
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import missing

from evalrun.errors import UserError
from evalrun.suggest import did_you_mean
from evalrun.yamlsource import MAX_YAML_BYTES

#: A rendered template is at most as long as an eval file may be (docs/eval-files.md, "Limits"),
#: so a template cannot make ``validate`` build a value that exhausts memory.
MAX_RENDERED = MAX_YAML_BYTES


class TemplateProblem(UserError, ValueError):
    """A template that cannot be rendered as written; the message says why and where.
    ``from_vars``: the problem comes from the vars it was rendered with (another test's vars
    may render it), not from the template's text."""

    def __init__(self, message: str, *, from_vars: bool = False) -> None:
        super().__init__(message)
        self.from_vars = from_vars


def _as_text(value: Any) -> str:
    """What ``{{ value }}`` writes: strings as they are, anything else as JSON."""
    if isinstance(value, Undefined):
        return str(value)  # raises: the name is missing
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # a method, a loop, a circular list: nothing a var holds
        raise TypeError(f"{{{{ }}}} cannot write a {type(value).__name__}") from None


class _Missing(StrictUndefined):
    """Any use of a missing name fails, in an eval file's words rather than Python's."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        if self._undefined_hint:
            return self._undefined_hint
        if self._undefined_obj is missing:
            return f"'{{{{ {self._undefined_name} }}}}' names no var"
        try:
            shown = _as_text(self._undefined_obj)
        except TypeError:  # not a value of the file's: say what it is
            shown = f"the {type(self._undefined_obj).__name__}"
        shown = shown if len(shown) <= 60 else shown[:59] + "…"
        name = self._undefined_name
        return f"{shown} has no {'item' if isinstance(name, int) else 'key'} {name!r}"


def _dump(value: Any, indent: int | str | None = None) -> str:
    """JSON as Nunjucks' ``dump`` writes it (``JSON.stringify``): compact unless indented."""
    if isinstance(value, Undefined):
        value._fail_with_undefined_error()
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators)


class _Environment(SandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """``'ab' * n`` and ``a ** b`` are refused before Python builds a result longer than
        :data:`MAX_RENDERED`."""
        if _size_bound(operator, left, right) > MAX_RENDERED:
            raise SecurityError(
                f"'{operator}' would make a value over the {MAX_RENDERED}-character limit"
            )
        return super().call_binop(context, operator, left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``a.b`` is key ``b`` of a mapping first, as on a JavaScript object: a var
        ``order: {items: [...]}`` gives ``{{ order.items }}`` its list, not ``dict.items``."""
        if isinstance(obj, Mapping) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)


#: Jinja's filters that Nunjucks has with the same meaning; ``dump`` and ``tojson`` are added.
_FILTERS = (
    "upper",
    "lower",
    "capitalize",
    "title",
    "trim",
    "default",
    "d",
    "join",
    "length",
    "first",
    "last",
    "replace",
)
#: statements a template may hold (``{% raw %}`` is the lexer's): Nunjucks' control tags
_STATEMENTS = (nodes.Output, nodes.If, nodes.For, nodes.Assign, nodes.AssignBlock)
_TAG_NAMES = {"CallBlock": "call", "FilterBlock": "filter", "FromImport": "from"}


def _environment() -> _Environment:
    env = _Environment(
        undefined=_Missing,
        autoescape=False,
        keep_trailing_newline=True,  # Nunjucks keeps the text as written
        finalize=_as_text,
    )
    env.filters = {name: env.filters[name] for name in _FILTERS} | {"dump": _dump, "tojson": _dump}
    env.globals = {name: env.globals[name] for name in ("range", "cycler", "joiner")}
    return env


def _size_bound(operator: str, left: Any, right: Any) -> int:
    """An upper bound on the length of ``left <operator> right`` (items, characters or digits)."""
    if operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            return right * abs(left).bit_length() // 3  # a decimal digit holds over 3 bits
        return 0
    for sequence, count in ((left, right), (right, left)):
        if isinstance(sequence, (str, list, tuple)) and isinstance(count, int):
            return len(sequence) * count
    return 0


_ENV = _environment()
#: what starts a tag, an expression or a comment: text without one is no template
_MARKS = re.compile(r"\{[{%#]")
_WHOLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*\}\}")


def render(source: str, vars_: Mapping[str, Any]) -> str:
    """``source`` rendered with ``vars_`` (each by its name and as ``vars.NAME``)."""
    if not _MARKS.search(source):
        return source  # plain text renders to itself: no compile (~1 ms) per var and value
    template = _compiled(source)
    try:
        pieces: list[str] = []
        size = 0
        for piece in template.generate(_context(vars_)):
            size += len(piece)
            if size > MAX_RENDERED:
                raise SecurityError(f"the text is over the {MAX_RENDERED}-character limit")
            pieces.append(piece)
        return "".join(pieces)
    # The template is the eval file's code: whatever it raises is a problem with the file.
    except Exception as exc:
        message = str(exc) if isinstance(exc, UndefinedError) else f"cannot render: {exc}"
        if isinstance(exc, UndefinedError):
            message += f" (vars: {', '.join(sorted(vars_)) or 'none'})"
        line = _template_line(exc.__traceback__)
        raise TemplateProblem(_at(message, line, source), from_vars=True) from None


def value_of(source: str, vars_: Mapping[str, Any]) -> tuple[bool, Any]:
    """A template that is exactly ``{{ name }}`` (or ``{{ a.b.0 }}``) stands for that value as it
    is, so a var holding a message list or a number is not turned into text; else (False, None)."""
    match = _WHOLE.fullmatch(source.strip())
    if match is None:
        return False, None
    expression = _ENV.compile_expression(match.group(1), undefined_to_none=False)
    value = expression(_context(vars_))
    return not isinstance(value, Undefined), value


def _context(vars_: Mapping[str, Any]) -> dict[str, Any]:
    return {**vars_, "vars": vars_}


@lru_cache(maxsize=256)
def _compiled(source: str) -> Template:
    """Parsed, checked against what Nunjucks files use, and compiled once per distinct text."""
    try:
        tree = _ENV.parse(source)
        _check_supported(tree, source)
        return _ENV.from_string(tree)
    except TemplateSyntaxError as exc:
        raise TemplateProblem(_at(f"template error: {exc.message}", exc.lineno, source)) from None


def _check_supported(tree: nodes.Template, source: str) -> None:
    for statement in tree.find_all(nodes.Stmt):
        if not isinstance(statement, _STATEMENTS):
            name = type(statement).__name__
            tag = _TAG_NAMES.get(name, name.lower())
            raise TemplateProblem(
                _at(
                    f"'{{% {tag} %}}' is not supported in templates (if, for, set and raw are)",
                    statement.lineno,
                    source,
                )
            )
    for used in tree.find_all(nodes.Filter):
        if used.name not in _ENV.filters:
            hint = did_you_mean(used.name, _ENV.filters)
            known = ", ".join(sorted(_ENV.filters))
            raise TemplateProblem(
                _at(f"unknown filter '{used.name}'{hint} (filters: {known})", used.lineno, source)
            )


def _template_line(trace: TracebackType | None) -> int | None:
    """The template line an error was raised on (Jinja gives template frames that file name)."""
    line = None
    while trace is not None:
        if trace.tb_frame.f_code.co_filename == "<template>":
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


def _at(message: str, line: int | None, source: str) -> str:
    """A multi-line template's problem says which of its lines it is on."""
    if line is None or "\n" not in source.strip():
        return message
    return f"{message} (line {line} of the template)"
