"""Where streamed tests come from: a ``.jsonl`` file, a ``.csv`` file, a ``datasets`` dataset.

Each source yields ``(position, keys)`` for every test, read again on every pass, so the loader
checks and streams them all alike (docs/performance.md); a position is a line of the file (for
CSV, the line its row starts on) or, for a dataset, the row index (docs/datasets.md).
"""

from __future__ import annotations

import csv
import importlib.util
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin
from urllib.parse import parse_qsl

from evalrun.spec.models import TestCase
from evalrun.suggest import did_you_mean
from evalrun.yamlsource import SourceError, iter_jsonl


def _wants_text(annotation: Any) -> bool:
    """The annotation is ``str`` or a union with ``str`` in it."""
    union = get_origin(annotation) in (Union, UnionType)
    return str in (get_args(annotation) if union else (annotation,))


HF = "hf://"
#: the package the ``[datasets]`` extra installs (pyproject.toml)
EXTRA = "datasets"
#: test keys whose CSV cell is JSON: those whose schema wants only a list or an object
#: (docs/datasets.md, "Cells"); every other key keeps the cell's text as written
JSON_KEYS = frozenset(
    name for name, info in TestCase.model_fields.items() if not _wants_text(info.annotation)
)
_QUERY = ("split", "limit")
_FILE_BUILDERS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}


class MissingExtra(SourceError):
    """An optional extra this source needs is not installed; the command adds the install hint
    (the spec stage may not import ``evalrun.targets``: docs/architecture.md)."""

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


@dataclass
class JsonlRows:
    """A ``.jsonl`` tests file: one test per line."""

    path: Path
    columns: dict[str, str] = field(default_factory=dict)

    def rows(self) -> Iterator[tuple[int, Any]]:
        return iter_jsonl(self.path)

    @property
    def name(self) -> str:
        return str(self.path)

    def at(self, position: int) -> str:
        return f"{self.path}:{position}"

    def place(self, position: int) -> str:
        return f"line {position}"

    def stamp(self) -> object:
        info = self.path.stat()
        return info.st_size, info.st_mtime_ns


@dataclass
class CsvRows(JsonlRows):
    """A ``.csv`` tests file: the header row names the columns, one test per row."""

    #: the header's names, in order
    header: list[str] = field(default_factory=list)

    def rows(self) -> Iterator[tuple[int, Any]]:
        try:
            with open(self.path, encoding="utf-8-sig", newline="") as handle:
                reader = csv.reader(handle)
                next(reader, None)
                start, index = reader.line_num + 1, 0
                for cells in _csv_rows(reader, self.path):
                    line, start = start, reader.line_num + 1
                    if cells:
                        yield line, self._case(cells, line, index)
                        index += 1
        except UnicodeDecodeError:
            raise SourceError(f"{self.path}: not UTF-8 text") from None

    def _case(self, cells: list[str], line: int, index: int) -> dict[str, Any]:
        """A row as test keys: an empty cell is a key not given (docs/datasets.md)."""
        if len(cells) != len(self.header):
            raise SourceError(
                f"{self.path}:{line}: the row has {len(cells)} cells; the header has "
                f"{len(self.header)}"
            )
        row = dict(zip(self.header, cells, strict=True))
        item: dict[str, Any] = {} if "id" in self.columns else {"id": str(index)}
        for key, column in self.columns.items():
            cell = row[column]
            if cell != "":
                item[key] = self._json(cell, line, index, key) if key in JSON_KEYS else cell
        return item

    def _json(self, cell: str, line: int, index: int, key: str) -> Any:
        try:
            return json.loads(cell)
        except json.JSONDecodeError as exc:
            raise SourceError(
                name_columns(
                    f"{self.path}:{line}: tests[{index}].{key}: the cell is not JSON "
                    f"({exc.msg}); a '{key}' cell holds JSON",
                    self.columns,
                    index,
                )
            ) from None


def _csv_rows(reader: Any, path: Path) -> Iterator[list[str]]:
    """The reader's rows, a CSV error named at its line."""
    try:
        yield from reader
    except csv.Error as exc:
        raise SourceError(f"{path}:{reader.line_num}: invalid CSV: {exc}") from None


def name_columns(message: str, columns: dict[str, str], index: int) -> str:
    """A problem with a mapped key also names its column: ``tests[3].input (column 'q')``."""
    for key, column in columns.items():
        if key != column:
            stem = f"tests[{index}].{key}"
            message = message.replace(f": {stem}: ", f": {stem} (column '{column}'): ")
            message = message.replace(f": {stem}[", f": {stem} (column '{column}')[")
            message = message.replace(f": {stem}.", f": {stem} (column '{column}').")
    return message


def open_csv(path: Path, columns: dict[str, str] | None, where: Callable[[str], str]) -> CsvRows:
    """The CSV source, its header checked: every column a test key (no ``columns:``), or every
    column ``columns:`` names present (``where(key)``: the eval file's ``file:line: key``)."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            header = next(_csv_rows(csv.reader(handle), path), None)
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not UTF-8 text") from None
    if not header:
        raise SourceError(f"{path}:1: no header row (the first row names the columns)")
    return CsvRows(path, _columns(header, columns, f"{path}:1", where), header)


def _columns(
    header: list[str], columns: dict[str, str] | None, at: str, where: Callable[[str], str]
) -> dict[str, str]:
    """Test key -> the column it is read from, checked against the header (all problems at
    once): each column is the key of its name, or ``columns:`` names columns the header has."""
    problems = []
    if columns is None:
        known = list(TestCase.model_fields)
        for name in header:
            if name not in known:
                problems.append(
                    f"{at}: {name}: unknown column: not a test key{did_you_mean(name, known)} "
                    "(rename it, or pick the columns to read with 'columns:')"
                )
        columns = {name: name for name in header}
    else:
        for key, column in columns.items():
            if column not in header:
                problems.append(
                    f"{where(key)}: no column '{column}'{did_you_mean(column, header)} "
                    f"(columns: {', '.join(header)})"
                )
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        problems.append(f"{at}: the header names {', '.join(repeated)} more than once")
    if problems:
        raise SourceError("\n".join(problems))
    return columns


@dataclass
class DatasetRows:
    """A dataset of the ``datasets`` package: rows read from its Arrow files as they go."""

    ref: str
    dataset: Any
    columns: dict[str, str]
    limit: int | None

    def rows(self) -> Iterator[tuple[int, Any]]:
        for index, row in enumerate(islice(self.dataset, self.limit)):
            item = {key: row[column] for key, column in self.columns.items()}
            item = {key: value for key, value in item.items() if value is not None}
            yield index, item if "id" in self.columns else {"id": str(index), **item}

    @property
    def name(self) -> str:
        return self.ref

    def at(self, position: int) -> str:
        return f"{self.ref}: {self.place(position)}"

    def place(self, position: int) -> str:
        return f"row {position}"

    def stamp(self) -> object:
        return self.dataset._fingerprint


def open_dataset(
    ref: str, folder: Path, columns: dict[str, str] | None, where: Callable[[str], str]
) -> DatasetRows:
    """``hf://NAME[/CONFIG]?split=...&limit=...`` from the hub (its cache), or ``hf://`` and a
    path (``./``, ``../`` or ``/``) to a folder ``save_to_disk`` wrote, or to a CSV, JSON,
    JSONL or Parquet file (docs/datasets.md). ``where("")`` is the eval file's ``tests`` key."""
    at = where("")
    name, _, query = ref.removeprefix(HF).partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    for key in options:
        if key not in _QUERY:
            raise SourceError(
                f"{at}: {ref}: unknown option '{key}'{did_you_mean(key, _QUERY)} "
                f"(options: {', '.join(_QUERY)})"
            )
    limit = options.get("limit")
    if limit is not None and not (limit.isdigit() and int(limit) > 0):
        raise SourceError(f"{at}: {ref}: limit must be a whole number above 0, not '{limit}'")
    if importlib.util.find_spec(EXTRA) is None:
        raise MissingExtra(
            f"{at}: {ref} needs the [{EXTRA}] extra, which is not installed (missing: {EXTRA})",
            EXTRA,
        )
    dataset = _load(name, options.get("split"), folder, f"{at}: {ref}")
    mapping = _columns(list(dataset.column_names), columns, f"{at}: {ref}", where)
    return DatasetRows(ref, dataset, mapping, int(limit) if limit else None)


def _load(name: str, split: str | None, folder: Path, at: str) -> Any:
    """One split of the dataset, or a clear error: the package's own message, first line."""
    import datasets  # the [datasets] extra: imported only for a dataset source

    try:
        if name.startswith(("/", "./", "../")):
            path = folder / name
            if path.is_dir():
                found = datasets.load_from_disk(str(path))
                if isinstance(found, datasets.DatasetDict):
                    return _split(found, split or "train", at)
                if split is not None:
                    raise SourceError(f"{at}: the folder holds one dataset, not splits: drop split")
                return found
            if not path.is_file():
                raise SourceError(f"{at}: no such folder or file: {path}")
            if path.suffix not in _FILE_BUILDERS:
                raise SourceError(f"{at}: a file must end {', '.join(_FILE_BUILDERS)}")
            builder = _FILE_BUILDERS[path.suffix]
            return datasets.load_dataset(builder, data_files=str(path), split=split or "train")
        parts = name.split("/")  # NAME, OWNER/NAME or OWNER/NAME/CONFIG
        config = parts.pop() if len(parts) == 3 else None
        return datasets.load_dataset("/".join(parts), config, split=split or "train")
    except SourceError:
        raise
    except Exception as exc:  # the package raises many kinds; each is a config error here
        text = str(exc).strip().splitlines()
        raise SourceError(f"{at}: cannot load: {text[0] if text else type(exc).__name__}") from None


def _split(found: Any, split: str, at: str) -> Any:
    if split not in found:
        splits = ", ".join(found)
        raise SourceError(f"{at}: no split '{split}'{did_you_mean(split, found)} ({splits})")
    return found[split]
