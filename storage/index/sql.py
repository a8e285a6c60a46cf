"""What a transaction script asks of its database, free of any driver.

Each index operation is written once as a generator (a *script*) that yields `Op`s and is
sent back their results; `sqlite.py` and `postgres.py` are the drivers that run scripts
against a real connection, as `bucketd_client/calls.py` describes each call once for two
HTTP clients. SQL is written with `?` placeholders in the dialect both databases share;
what differs (placeholders, row locks, duplicate-key errors, notifications) is an attribute
of the op, interpreted by the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, ParamSpec, Protocol, TypeVar

from ..faults import Faults

T = TypeVar("T")
P = ParamSpec("P")

Fetch = Literal["one", "all", "value", "count", "lock"]
"""`one`: the first row as a tuple or None; `all`: every row as tuples; `value`: the first
column of the first row or None; `count`: the number of rows the statement changed; `lock`:
lock the row and answer whether other writers may have changed rows meanwhile (False where
the database has a single writer, which skips the statement)."""
Lock = Literal["", "update", "skip"]
"""Row locks where the database has them (PostgreSQL): `FOR UPDATE`, with `SKIP LOCKED`."""


class Query(NamedTuple):
    sql: str
    args: tuple[object, ...]
    fetch: Fetch
    lock: Lock = ""
    unique: bool = False
    """A unique-constraint violation is thrown into the script as `Duplicate` (and leaves the
    transaction usable) instead of failing the transaction."""


@dataclass(frozen=True, slots=True)
class Release:
    """A blob lost its last reference in this transaction; reap it once it commits."""

    blob_id: str
    has_file: bool


@dataclass(frozen=True, slots=True)
class Notify:
    """Tell other processes watching `channel`, once the transaction commits."""

    channel: str
    payload: str


@dataclass(frozen=True, slots=True)
class Fault:
    """A named point for test-only fault injection (`storage/faults.py`)."""

    point: str


Op = Query | Release | Notify | Fault
Script = Generator[Op, Any, T]


class Claim(Protocol):
    """Blob files locked against a new reference being placed (a write of the same content
    waits), while the index is asked whether they are still unreferenced. Asking first and
    locking after would let another process commit a reference and drop its hold on the
    file in between, and the file would go from under that reference."""

    blob_ids: list[str]
    """Those claimed: a blob held by a write, or already gone, is not."""

    def reap(self, blob_ids: list[str]) -> None:
        """Remove the files of these (claimed, and found unreferenced)."""

    def __enter__(self) -> Claim: ...
    def __exit__(self, *exc_info: object) -> None:
        """Let go of every lock."""


class Reaper(Protocol):
    """Removes the files of blobs that lost their last reference, once the commit that
    dropped it is durable."""

    def claim(self, blob_ids: list[str]) -> Claim: ...


@dataclass
class NoFiles:
    """A `Claim` and `Reaper` for backends whose blobs are not files of their own."""

    blob_ids: list[str] = field(default_factory=list)

    def claim(self, blob_ids: list[str]) -> NoFiles:
        return self

    def reap(self, blob_ids: list[str]) -> None:
        """Nothing to remove."""

    def __enter__(self) -> NoFiles:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Nothing held."""


Kind = Literal["point", "read", "write"]
KINDS: dict[Callable[..., Script[Any]], Kind] = {}
"""How each script runs, as its decorator declared: `point` (a read of a row or two by key,
the hot path), `read` (a read that may scan) or `write` (one transaction, durable once it
returns)."""


def _kind(kind: Kind) -> Callable[[Callable[P, Script[T]]], Callable[P, Script[T]]]:
    def declare(script: Callable[P, Script[T]]) -> Callable[P, Script[T]]:
        KINDS[script] = kind
        return script

    return declare


point = _kind("point")
read = _kind("read")
write = _kind("write")


class Duplicate(Exception):
    """Thrown into a script whose `unique` statement hit a unique constraint."""


@dataclass
class Effects:
    """What a transaction does beside its statements, acted on once it commits."""

    released: list[Release] = field(default_factory=list)
    notes: list[Notify] = field(default_factory=list)


def take_effect(op: Op, faults: Faults, effects: Effects | None) -> None:
    """Act on an op that is not a query; a read runs without `effects`: it has none."""
    if isinstance(op, Fault):
        faults.hit(op.point)
    elif effects is None:
        raise TypeError(f"a read script yielded {op!r}")
    elif isinstance(op, Release):
        effects.released.append(op)
    else:
        assert isinstance(op, Notify)
        effects.notes.append(op)


def one(sql: str, *args: object, lock: Lock = "") -> Query:
    return Query(sql, args, "one", lock)


def rows(sql: str, *args: object) -> Query:
    return Query(sql, args, "all")


def value(sql: str, *args: object, lock: Lock = "") -> Query:
    return Query(sql, args, "value", lock)


def run(sql: str, *args: object, unique: bool = False) -> Query:
    return Query(sql, args, "count", unique=unique)


def lock_row(table: str, row_id: str) -> Query:
    """Lock a row by id for the rest of the transaction (see `Fetch`)."""
    return Query(f"SELECT 1 FROM {table} WHERE id = ?", (row_id,), "lock", "update")


def placeholders(count: int) -> str:
    return ", ".join("?" * count)
