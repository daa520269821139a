"""The response cache: one SQLite file (WAL) mapping a request key to the response JSON.

Lookups are a primary-key read on local disk, quick enough to run inline on the event loop;
a lock makes the one connection safe from several threads, and WAL plus a busy timeout lets
parallel ``evalrun`` processes (shards) share a directory.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from evalrun.targets.base import CompletionRequest, CompletionResponse
from evalrun.targets.config import ConfigError, TargetConfig
from evalrun.targets.stores.format import (
    cache_key,
    canonical_json,
    response_from_json,
    response_to_json,
)

FILENAME = "cache.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    created REAL NOT NULL,
    response TEXT NOT NULL
)
"""


#: How long opening the cache waits for other processes that hold it (SQLite's busy timeout).
BUSY_TIMEOUT_S = 10.0


def _open(path: Path) -> sqlite3.Connection:
    """A connection to the cache, in WAL mode with the table made. Processes that open a new
    cache at once (Ray's workers, a sharded run's shards) race to switch it to WAL, and SQLite
    answers the loser "database is locked" at once instead of waiting: retried until the busy
    timeout. A file already in WAL mode needs no switch."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.01
    while True:
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
        )
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(_SCHEMA)
            return db
        except BaseException as exc:
            db.close()
            locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
            if not locked or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class ResponseCache:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / FILENAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db: sqlite3.Connection | None = _open(self.path)
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
