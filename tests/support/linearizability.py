"""A linearizability checker for histories of a key-value store (issue 39 point 3).

No maintained Python package does this (Porcupine is Go, Knossos Clojure), so the tests have
their own, after Wing & Gong's search with Lowe's memoization and Porcupine's
P-compositionality: a store of registers is linearizable when each key's sub-history is, so
each key is checked alone against a register model (its value, or missing), by a depth-first
search over which pending operation takes effect next, remembering the (operations done,
value) pairs already explored.

An operation is recorded with its invoke and complete times (one monotonic clock for every
client) and its outcome: `ok`; `failed`, a definite refusal that took no effect (dropped);
or `unknown` (a timeout, a cut connection, a 5xx: it may have taken effect at any time after
its invocation, or never). A read's value names its write: each put writes a value of its
own.

Listings are checked apart, per key under the prefix: a listing must show every key some
acknowledged put left there before the listing began (when no delete could have come
between), and must not show a key no put could have left there while it ran.

On failure the report is a minimal sub-history that is still not linearizable (`minimal`):
usually two to four operations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

Kind = Literal["put", "get", "delete", "list"]
Outcome = Literal["ok", "failed", "unknown"]
MISSING = None
"""A register's value when the key does not exist (a get answered 404)."""


@dataclass(frozen=True)
class Op:
    client: int
    kind: Kind
    key: str
    """The key; a listing's prefix."""
    invoked: float
    completed: float
    """math.inf while unknown: it may take effect at any time after `invoked`."""
    outcome: Outcome = "ok"
    value: str | None = None
    """What a put wrote, what a get read (None: missing)."""
    keys: frozenset[str] = field(default_factory=frozenset)
    """What a listing showed."""

    def __str__(self) -> str:
        end = "…" if self.completed == math.inf else f"{self.completed:.4f}"
        if self.kind == "put":
            call = f"put({self.key!r}, {self.value!r})"
        elif self.kind == "get":
            shown = "missing" if self.value is None else repr(self.value)
            call = f"get({self.key!r}) -> {shown}"
        elif self.kind == "delete":
            call = f"delete({self.key!r})"
        else:
            call = f"list({self.key!r}) -> {sorted(self.keys)}"
        return f"client {self.client} [{self.invoked:.4f}, {end}] {call} {self.outcome}"


def unknown(op: Op) -> Op:
    """`op` as an operation whose effect is not known (its completion time forgotten)."""
    return replace(op, outcome="unknown", completed=math.inf)


@dataclass(frozen=True)
class Anomaly:
    kind: str
    """`not linearizable` (a register), `missing from a listing` or `ghost in a listing`."""
    key: str
    history: tuple[Op, ...]
    """The minimal sub-history that shows it."""

    def __str__(self) -> str:
        lines = "\n".join(f"  {op}" for op in sorted(self.history, key=lambda o: o.invoked))
        return f"{self.kind} on key {self.key!r}; the minimal history:\n{lines}"


class LinearizabilityError(AssertionError):
    def __init__(self, anomalies: list[Anomaly], saved: Path | None = None) -> None:
        self.anomalies = anomalies
        where = [f"the whole history: {saved}"] if saved else []
        super().__init__("\n".join([*map(str, anomalies), *where]))


def _relevant(ops: Iterable[Op]) -> list[Op]:
    """What the search needs: a failed op took no effect; a get that did not answer read
    nothing; an unknown put no get read can only be left out (its value, taken, would be
    what the register holds until the next write, and nobody read it)."""
    kept = [op for op in ops if op.outcome != "failed" and op.kind != "list"]
    read = {op.value for op in kept if op.kind == "get" and op.outcome == "ok"}
    return [
        op
        for op in kept
        if not (op.kind == "get" and op.outcome != "ok")
        and not (op.kind == "put" and op.outcome == "unknown" and op.value not in read)
    ]


def _step(state: str | None, op: Op) -> tuple[bool, str | None]:
    """The register model: (whether `op` may take effect in `state`, the state after)."""
    if op.kind == "put":
        return True, op.value
    if op.kind == "delete":
        return True, MISSING
    return op.value == state, state


def register_linearizable(ops: Sequence[Op], max_steps: int = 2_000_000) -> bool:
    """Whether one key's operations are linearizable against a register that starts
    missing. Unknown operations may be left out; every ok one must take effect between its
    invocation and its completion."""
    history = sorted(_relevant(ops), key=lambda op: op.invoked)
    count = len(history)
    required = 0
    for n, op in enumerate(history):
        if op.outcome == "ok":
            required |= 1 << n
    seen: set[tuple[int, str | None]] = set()
    stack: list[tuple[int, str | None]] = [(0, MISSING)]
    steps = 0
    while stack:
        done, state = stack.pop()
        if done & required == required:
            return True
        if (done, state) in seen:
            continue
        seen.add((done, state))
        steps += 1
        if steps > max_steps:
            raise RuntimeError(f"the search gave up after {max_steps} states ({count} ops)")
        # An op may go next when no op still to go completed before it was invoked.
        horizon = min(
            (history[n].completed for n in range(count) if not done >> n & 1),
            default=math.inf,
        )
        for n in range(count):
            op = history[n]
            if op.invoked > horizon:
                break
            if done >> n & 1:
                continue
            allowed, after = _step(state, op)
            if allowed:
                stack.append((done | 1 << n, after))
    return False


def _listing_anomalies(ops: Sequence[Op], listing: Op) -> list[Anomaly]:
    """The keys `listing` (ok) should have shown and did not, and those it showed that no
    put could have left there while it ran."""
    start, end = listing.invoked, listing.completed
    writes = [op for op in ops if op.kind in ("put", "delete") and op.outcome != "failed"]
    keys = {op.key for op in writes if op.key.startswith(listing.key)} | set(listing.keys)
    found = []
    for key in sorted(keys):
        puts = [op for op in writes if op.key == key and op.kind == "put"]
        deletes = [op for op in writes if op.key == key and op.kind == "delete"]
        if key not in listing.keys:
            for put in puts:
                if put.outcome != "ok" or put.completed >= start:
                    continue
                between = [d for d in deletes if d.completed >= put.invoked and d.invoked <= end]
                if not between:
                    found.append(Anomaly("missing from a listing", key, (put, listing)))
                    break
            continue
        could_put = [p for p in puts if p.invoked <= end]
        if not could_put:
            found.append(Anomaly("ghost in a listing", key, (listing,)))
            continue
        for delete in deletes:
            if delete.outcome != "ok" or delete.completed >= start:
                continue
            if all(p.completed < delete.invoked for p in could_put):
                shown = (*could_put, delete, listing)
                found.append(Anomaly("ghost in a listing", key, shown))
                break
    return found


def minimal(ops: Sequence[Op]) -> tuple[Op, ...]:
    """A small sub-history of one key's non-linearizable `ops` that is itself not
    linearizable, and whose anomaly is the history's, not one made by the cut: taking a
    write out can make a history fail (the delete that explained a read of missing), so
    only reads are taken out freely (a read only constrains: the writes and fewer reads
    still fail), by delta debugging, chunks of halving size out while it fails. Then only
    the writes that cannot change what those reads may see go: one sent after the last
    read answered, and one acknowledged before another write was sent that was itself
    acknowledged before the first read began (put back in any linearization just after the
    last op it must follow, it is overwritten before any read)."""
    reads = [op for op in ops if op.kind == "get"]
    writes = [op for op in ops if op.kind != "get"]
    chunk = max(1, len(reads) // 2)
    while True:
        n, removed = 0, False
        while n < len(reads):
            trial = reads[:n] + reads[n + chunk :]
            if not register_linearizable(writes + trial):
                reads, removed = trial, True
            else:
                n += chunk
        if chunk == 1 and not removed:
            break
        chunk = max(1, chunk // 2)
    first = min(op.invoked for op in reads)
    last = max(op.completed for op in reads)
    read = {op.value for op in reads}
    barrier = max(
        (w.invoked for w in writes if w.outcome == "ok" and w.completed < first),
        default=-math.inf,
    )
    kept = [
        w
        for w in writes
        if (w.kind == "put" and w.value in read) or (w.invoked <= last and w.completed >= barrier)
    ]
    return tuple(kept + reads)


def anomalies(ops: Iterable[Op]) -> list[Anomaly]:
    """Every key that is not linearizable (with its minimal history) and every listing's
    missing or ghost key."""
    history = list(ops)
    by_key: dict[str, list[Op]] = {}
    for op in history:
        if op.kind != "list":
            by_key.setdefault(op.key, []).append(op)
    found = []
    for key, key_ops in sorted(by_key.items()):
        if not register_linearizable(key_ops):
            shown = minimal(_relevant(key_ops))
            found.append(Anomaly("not linearizable", key, shown))
    for listing in history:
        if listing.kind == "list" and listing.outcome == "ok":
            found += _listing_anomalies(history, listing)
    return found


def check(ops: Iterable[Op], save_to: Path | None = None) -> None:
    """Raise LinearizabilityError with every anomaly of the history, if any, having written
    the whole history to `save_to` (one op a line, by invocation) to be looked at."""
    history = list(ops)
    found = anomalies(history)
    if found:
        if save_to is not None:
            lines = [str(op) for op in sorted(history, key=lambda op: op.invoked)]
            save_to.write_text("\n".join(lines) + "\n")
        raise LinearizabilityError(found, save_to)
