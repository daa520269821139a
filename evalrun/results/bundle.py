"""The run bundle on disk: results streamed to ``results.jsonl`` as cases finish, a summary,
and the judge-call log. Reporters read bundles, never the runner's memory."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import IO, Any, Literal

from evalrun.errors import EvalrunError, UserError
from evalrun.judgecall import JudgeCall
from evalrun.results.models import CaseResult

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
JUDGE_CALLS = "judge-calls.jsonl"


#: how many ``-2``, ``-3``, ... suffixes a default bundle name may get before giving up
MAX_SUFFIX = 1000


class BundleError(UserError):
    """The bundle folder cannot be used: not empty, not a folder, or in use by another run."""


class BundleWriteError(EvalrunError):
    """Writing to the bundle failed; the run must fail loudly (docs/results.md)."""


def claim_folder(path: Path, *, unique: bool) -> tuple[Path, bool]:
    """A run's bundle folder, owned by this run alone (docs/results.md).

    ``unique`` (the default ``.evalrun/runs/<time>-<eval>``): created exclusively, with a
    ``-2``, ``-3``, ... suffix when the name is taken. Otherwise (``--out``): a new or empty
    folder; a non-empty one is refused. Returns the folder and whether this call created it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if unique:
        for n in range(1, MAX_SUFFIX + 1):
            candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
            with contextlib.suppress(FileExistsError):
                candidate.mkdir()
                return candidate, True
        raise BundleError(f"{path}: {MAX_SUFFIX} run bundles of this name exist already")
    try:
        path.mkdir()
        return path, True
    except FileExistsError:
        if not path.is_dir():
            raise BundleError(f"--out {path}: exists and is not a folder") from None
        if any(path.iterdir()):
            raise BundleError(
                f"--out {path}: the folder is not empty; pass --resume {path} to continue that "
                "run, or choose a new or empty folder"
            ) from None
    return path, False


def _lock(handle: IO[str], directory: Path) -> None:
    """Hold an exclusive lock on the results file for the life of the run (POSIX only)."""
    try:
        import fcntl
    except ImportError:
        return
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise BundleError(f"{directory}: another evalrun is writing this run bundle") from None


WriteMode = Literal["new", "resume", "overwrite"]
#: A line a :class:`BundleWriter` wrote: its byte offset in the file, and its bytes.
WrittenLine = tuple[int, bytes]


def _end_torn_line(handle: IO[str]) -> None:
    """End a last line that a crash left without its newline, so what comes next starts a line
    of its own (the torn one is skipped by the reader, docs/results.md)."""
    path = Path(handle.name)
    if path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b"\n":
            handle.write("\n")
            handle.flush()


class BundleWriter:
    """Appends each case the moment it finishes and flushes, so a crash loses nothing.

    ``mode``: ``new``, ``results.jsonl`` must not exist yet (a run's own fresh folder), so two
    runs can never write one bundle; ``resume``, both files are appended to and nothing written
    before is touched (a line a crash tore is ended, so it stays one skipped line); ``overwrite``
    (merge ``--force``), both files start empty. The results file stays locked until
    :meth:`close`.
    """

    def __init__(self, directory: Path, *, mode: WriteMode) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        try:
            results = open(directory / RESULTS, "x" if mode == "new" else "a", encoding="utf-8")  # noqa: SIM115
        except FileExistsError:
            raise BundleError(f"{directory}: another run has started writing here") from None
        _lock(results, directory)
        self._results: IO[str] = results
        self.mode = mode
        self.failed = False
        self._calls: IO[str] = open(directory / JUDGE_CALLS, "a", encoding="utf-8")  # noqa: SIM115
        for handle in (self._results, self._calls):
            if mode == "overwrite":
                handle.truncate(0)
            elif mode == "resume":
                _end_torn_line(handle)
        #: Each file's size, so each line written is known by its offset as readers know it.
        self._ends = {h.name: os.fstat(h.fileno()).st_size for h in (self._results, self._calls)}

    def add_case(self, case: CaseResult) -> WrittenLine:
        return self._write(self._results, [case.to_dict()])[0]

    def add_judge_calls(self, calls: list[JudgeCall]) -> list[WrittenLine]:
        return self._write(self._calls, [call.to_dict() for call in calls]) if calls else []

    def _write(self, handle: IO[str], records: list[dict[str, Any]]) -> list[WrittenLine]:
        """Whole lines only: everything is serialized and encoded before one write."""
        try:
            lines = [
                (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
                for record in records
            ]
            handle.buffer.write(b"".join(lines))  # type: ignore[attr-defined]
            handle.flush()
        except (OSError, ValueError) as exc:
            self.failed = True
            raise BundleWriteError(f"cannot write {Path(handle.name).name}: {exc}") from exc
        written = []
        for line in lines:
            written.append((self._ends[handle.name], line))
            self._ends[handle.name] += len(line)
        return written

    def write_summary(self, summary: dict[str, Any]) -> None:
        tmp = self.directory / (SUMMARY + ".tmp")
        try:
            text = json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n"
            tmp.write_bytes(text.encode("utf-8"))
            tmp.replace(self.directory / SUMMARY)
        except (OSError, ValueError) as exc:
            raise BundleWriteError(f"cannot write {SUMMARY}: {exc}") from exc

    def discard(self, *, remove_folder: bool) -> None:
        """Close, and remove what this writer created in a fresh folder (the run never
        started); the folder too when the run created it."""
        self.close()
        if self.mode == "new":
            for name in (RESULTS, JUDGE_CALLS):
                (self.directory / name).unlink(missing_ok=True)
            if remove_folder:
                with contextlib.suppress(OSError):
                    self.directory.rmdir()

    def close(self) -> None:
        """Close both files; bytes a failed write left buffered are dropped, not retried."""
        problems = []
        for handle in (self._results, self._calls):
            try:
                handle.close()
            except (OSError, ValueError) as exc:
                problems.append(f"cannot write {Path(handle.name).name}: {exc}")
                with contextlib.suppress(OSError, ValueError):
                    handle.buffer.raw.close()  # type: ignore[attr-defined]
        if problems and not self.failed:
            raise BundleWriteError("; ".join(problems))
