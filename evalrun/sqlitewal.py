"""SQLite files that several ``evalrun`` processes open at once: the response cache
(``evalrun/targets/stores/cache.py``) and the run index (``evalrun/results/index.py``).

WAL lets readers and one writer work side by side, and a busy timeout makes a writer wait for
another instead of failing (docs/runs.md).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

#: How long opening (and each statement) waits for other processes (SQLite's busy timeout).
BUSY_TIMEOUT_S = 10.0


def open_wal(path: Path, schema: str, *, timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """A connection in WAL mode with ``schema`` run (``CREATE ... IF NOT EXISTS``). Processes that
    open a new file at once race to switch it to WAL, and SQLite answers the loser "database is
    locked" at once instead of waiting: retried until the timeout. A file already in WAL mode
    needs no switch."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        db = sqlite3.connect(path, timeout=timeout_s, check_same_thread=False, isolation_level=None)
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(schema)
            return db
        except BaseException as exc:
            db.close()
            locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
            if not locked or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
