"""Test mode's journal of requests: what an application sent, as rows a test reads back.

The rows live in a SQLite file of their own beside the index (`<data-dir>/test-journal.db`),
not in the index: the workers of `bucketd serve --workers N` each open it and share it
through SQLite's own file locks, so the journal is whole whichever worker answered; and a
journal write never queues behind the index's single writer nor enters a backup of it.
A row is written on the request's own thread with `synchronous=OFF` (a test's journal
needs no fsync; a crash may lose its last rows, never the index's). It holds at most
`limit` rows: each insert drops the ones `limit` or more behind it, so the newest stay.

This module knows no HTTP: the gateway hands it finished entries (`gateway/http/journal.py`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "test-journal.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    protocol TEXT NOT NULL,
    method TEXT NOT NULL,
    operation TEXT NOT NULL,
    bucket TEXT,
    key TEXT,
    status INTEGER NOT NULL,
    headers TEXT NOT NULL,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    key_id TEXT,
    access_key_id TEXT
)
"""
_COLUMNS = (
    "time, protocol, method, operation, bucket, key, status, headers, bytes_in, bytes_out, "
    "key_id, access_key_id"
)


@dataclass(frozen=True)
class Entry:
    time: float
    protocol: str
    method: str
    operation: str
    bucket: str | None
    key: str | None
    status: int
    headers: dict[str, str]
    bytes_in: int
    bytes_out: int
    key_id: str | None
    access_key_id: str | None


@dataclass(frozen=True)
class Filter:
    protocol: str | None = None
    operation: str | None = None
    bucket: str | None = None
    prefix: str | None = None
    since: float | None = None


class Journal:
    """One process's handle on the shared journal file; opened after the workers fork."""

    def __init__(self, data_dir: Path, limit: int) -> None:
        self.limit = limit
        self._db = sqlite3.connect(
            data_dir / FILE_NAME, timeout=10.0, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(_SCHEMA)

    def record(self, entry: Entry) -> None:
        with self._db:
            cursor = self._db.execute(
                f"INSERT INTO entries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.time,
                    entry.protocol,
                    entry.method,
                    entry.operation,
                    entry.bucket,
                    entry.key,
                    entry.status,
                    json.dumps(entry.headers),
                    entry.bytes_in,
                    entry.bytes_out,
                    entry.key_id,
                    entry.access_key_id,
                ),
            )
            newest = cursor.lastrowid or 0
            if newest > self.limit:
                self._db.execute("DELETE FROM entries WHERE id <= ?", (newest - self.limit,))

    def read(self, where: Filter) -> list[Entry]:
        """Matching entries, oldest first (newest last)."""
        clauses: list[str] = []
        values: list[str | int | float] = []
        for column, value in (
            ("protocol", where.protocol),
            ("operation", where.operation),
            ("bucket", where.bucket),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                values.append(value)
        if where.prefix is not None:
            clauses.append("substr(key, 1, ?) = ?")
            values += [len(where.prefix), where.prefix]
        if where.since is not None:
            clauses.append("time >= ?")
            values.append(where.since)
        condition = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM entries{condition} ORDER BY id", values
        ).fetchall()
        return [
            Entry(
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[6],
                json.loads(row[7]),
                row[8],
                row[9],
                row[10],
                row[11],
            )
            for row in rows
        ]

    def clear(self) -> None:
        self._db.execute("DELETE FROM entries")

    def close(self) -> None:
        self._db.close()
