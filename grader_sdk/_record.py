"""``Record``: the base of the SDK's value classes (a judge request and reply, the proxy's
info, a verdict, a grader's input and result), and of the built-in graders' own (``graders/``).

They were dataclasses; importing ``dataclasses`` (and ``inspect`` with it) cost 8.7 ms of the
SDK's ~20 ms import, paid by every per-process grader run and every stream-mode worker
(docs/performance.md). A record's fields are the parameters of its ``__init__`` (each stored
under its own name); equality, ``repr`` and ``as_dict`` (what a grader's JSON answer holds for a
record) come from them.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar


class Record:
    _fields: ClassVar[tuple[str, ...]] = ()
    #: fields left out of ``repr``
    _unshown: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__init__.__code__
        cls._fields = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        shown = (f"{n}={getattr(self, n)!r}" for n in self._fields if n not in self._unshown)
        return f"{type(self).__name__}({', '.join(shown)})"

    def as_dict(self) -> dict[str, Any]:
        """The fields, records inside them turned into dicts too."""
        return {name: _plain(getattr(self, name)) for name in self._fields}


R = TypeVar("R", bound=Record)


def replace(record: R, **changes: Any) -> R:
    """A copy of ``record`` with ``changes`` (what ``dataclasses.replace`` gives)."""
    return type(record)(**{**{name: getattr(record, name) for name in record._fields}, **changes})


def _plain(value: Any) -> Any:
    if isinstance(value, Record):
        return value.as_dict()
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
