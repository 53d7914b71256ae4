"""Results already computed, keyed by what produced them, so that a rerun skips them.

Long runs over many texts (embeddings, groundedness checks) write each finished batch here;
when a run is interrupted, what was finished stays, and the next run asks only for the rest.
The store lives in memory, or in a SQLite file (``ResultStore("results.sqlite")``) that
outlives the process. A key hashes the operation, the model name and the inputs; a file is
meant for one service configuration (profile), since the model name does not say which.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping

Value = bytes | str


def result_key(*parts: str) -> str:
    """A stable key for the parts (operation, model, inputs): their SHA-256 in hex."""
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


class ResultStore:
    """A key-value store of finished results (``bytes`` or ``str``).

    Args:
        path: a SQLite file to keep results in (created when missing); None keeps them in
            memory, for as long as this object lives.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._memory: dict[str, Value] = {}
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self._db = sqlite3.connect(self.path)
            with self._db:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value BLOB)"
                )

    def get_many(self, keys: Iterable[str]) -> dict[str, Value]:
        """The stored values of those ``keys`` that have one."""
        keys = list(keys)
        if self._db is None:
            return {key: self._memory[key] for key in keys if key in self._memory}
        found: dict[str, Value] = {}
        for start in range(0, len(keys), 500):  # SQLite caps the parameters of one query
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(f"SELECT key, value FROM results WHERE key IN ({marks})", chunk)
            found.update(rows)
        return found

    def put_many(self, values: Mapping[str, Value]) -> None:
        """Store ``values`` together: all of them or, if interrupted, none."""
        if self._db is None:
            self._memory.update(values)
            return
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO results (key, value) VALUES (?, ?)", values.items()
            )

    def __len__(self) -> int:
        if self._db is None:
            return len(self._memory)
        return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def clear(self) -> None:
        """Forget every result."""
        self._memory.clear()
        if self._db is not None:
            with self._db:
                self._db.execute("DELETE FROM results")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
