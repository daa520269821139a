"""The ``json-schema`` check's standard: the ``jsonschema`` package, Draft 2020-12 unless the
schema's ``$schema`` names another draft (docs/eval-files.md, "Deterministic checks").

The eval file's validation checks each schema here (:func:`schema_problem`) and the launcher
checks outputs here (:func:`output_errors`), so both follow one rule. Imported only where a
``json-schema`` grader is met: ``jsonschema`` is slow to import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import specification_with

if TYPE_CHECKING:
    from referencing._core import Resolver

#: how much of an offending value a reason quotes: every error is named, none floods the report
_SHOWN = 200
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KNOWN_DRAFTS = (
    "https://json-schema.org/draft/2020-12/schema, .../draft/2019-09/schema, "
    "or http://json-schema.org/draft-07/schema# (-06, -04, -03)"
)


def schema_problem(schema: dict[str, Any]) -> str | None:
    """What makes ``schema`` unusable, or None: a ``$schema`` that names no draft (it would be
    read as another draft), a keyword its draft does not allow, or a ``$ref`` that resolves to
    nothing in the schema (evalrun fetches no remote schemas)."""
    # Checked once per distinct schema: a tests file may give each of its cases the same one.
    return _problem_of(json.dumps(schema, sort_keys=True, default=str))


@lru_cache(maxsize=256)
def _problem_of(schema_text: str) -> str | None:
    schema = json.loads(schema_text)
    dialect = schema.get("$schema")
    known = isinstance(dialect, str) and validators.validator_for(schema, default=None) is not None  # type: ignore[arg-type]
    if dialect is not None and not known:
        return f"unknown $schema {dialect!r}: name a draft's meta-schema URI ({_KNOWN_DRAFTS})"
    cls = _validator_class(schema)
    specification = specification_with(cls.ID_OF(cls.META_SCHEMA))  # type: ignore[attr-defined]
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = json_path(exc.absolute_path)
        return f"not a valid JSON Schema ({specification.name}): {where}: {exc.message}"
    root = specification.create_resource(schema)
    registry: Registry[Any] = Registry().with_resource(root.id() or "", root).crawl()
    missing = _unresolved_ref(registry.resolver(base_uri=root.id() or ""), root)
    if missing is not None:
        return (
            f"not a usable JSON Schema: $ref {missing!r} points to nothing in the schema "
            "(evalrun fetches no remote schemas: put the definition under '$defs')"
        )
    return None


def _unresolved_ref(resolver: Resolver[Any], resource: Resource[Any]) -> str | None:
    """The first ``$ref`` that cannot be looked up from the scope it is written in (a nested
    ``$id`` moves the scope), or None."""
    resolver = resolver.in_subresource(resource)
    ref = resource.contents.get("$ref") if isinstance(resource.contents, dict) else None
    if isinstance(ref, str):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return ref
    for sub in resource.subresources():
        missing = _unresolved_ref(resolver, sub)
        if missing is not None:
            return missing
    return None


def output_errors(document: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``document`` breaks ``schema``, each as ``$.path: message``, in schema order."""
    return [
        f"{json_path(error.absolute_path)}: {_shorten(error.message)}"
        for error in _validator_class(schema)(schema).iter_errors(document)
    ]


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    """The draft ``$schema`` names, else 2020-12."""
    return validators.validator_for(schema, default=Draft202012Validator)


def json_path(parts: Iterable[str | int]) -> str:
    """``$.items[2].id`` for the path ``items, 2, id`` (``$['a b']`` for other keys)."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


def _shorten(message: str) -> str:
    return message if len(message) <= _SHOWN else message[: _SHOWN - 1] + "…"
