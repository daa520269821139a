"""The response cache: one SQLite file (WAL) mapping a request key to the response JSON.

Lookups are a primary-key read on local disk, quick enough to run inline on the event loop;
a lock makes the one connection safe from several threads, and WAL plus a busy timeout
(``evalrun/sqlitewal.py``) lets parallel ``evalrun`` processes (shards) share a directory.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from evalrun.errors import ConfigError
from evalrun.sqlitewal import open_wal
from evalrun.targets.base import CompletionRequest, CompletionResponse
from evalrun.targets.config import TargetConfig
from evalrun.targets.stores.format import (
    cache_key,
    canonical_json,
    response_from_json,
    response_to_json,
)

FILENAME = "cache.sqlite3"
#: What SQLite keeps beside the database in WAL mode (evalrun/sqlitewal.py)
COMPANIONS = ("-wal", "-shm", "-journal")


def clear(directory: Path) -> list[Path]:
    """Delete the response cache in ``directory`` (its database and SQLite's files beside it,
    nothing else, so a mistaken folder loses nothing of its own); the files removed."""
    removed = []
    for name in (FILENAME, *(FILENAME + suffix for suffix in COMPANIONS)):
        path = Path(directory) / name
        if path.is_file():
            path.unlink()
            removed.append(path)
    return removed


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    created REAL NOT NULL,
    response TEXT NOT NULL
)
"""


class ResponseCache:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILENAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db: sqlite3.Connection | None = open_wal(self.path, _SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the response cache at {self.path}: {exc}") from None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the response cache is closed")
        return self._db

    def get(self, config: TargetConfig, request: CompletionRequest) -> CompletionResponse | None:
        key = cache_key(config, request)
        with self._lock:
            row = (
                self._conn()
                .execute("SELECT response FROM responses WHERE key = ?", (key,))
                .fetchone()
            )
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        try:
            return response_from_json(json.loads(row[0]))
        except (ValueError, TypeError, AttributeError):
            return None

    def put(
        self, config: TargetConfig, request: CompletionRequest, response: CompletionResponse
    ) -> None:
        row = (
            cache_key(config, request),
            config.name,
            time.time(),
            canonical_json(response_to_json(response)),
        )
        with self._lock:
            self._conn().execute(
                "INSERT OR REPLACE INTO responses (key, target, created, response) "
                "VALUES (?, ?, ?, ?)",
                row,
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
