"""The linearizability checker itself (tests/support/linearizability.py): histories known to
be linearizable pass, known anomalies (a stale read, a lost write, a read of a value never
written, a listing that misses or invents a key) fail with their minimal history, and any
history a register produces, however its clients overlap, passes."""

from __future__ import annotations

import math
import socket
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.histories import Clients
from tests.support.linearizability import (
    LinearizabilityError,
    Op,
    anomalies,
    check,
    register_linearizable,
)
from tests.support.profiles import budget


def put(client: int, start: float, end: float, value: str, key: str = "k", **kw: object) -> Op:
    return Op(client, "put", key, start, end, value=value, **kw)  # type: ignore[arg-type]


def get(client: int, start: float, end: float, value: str | None, key: str = "k") -> Op:
    return Op(client, "get", key, start, end, value=value)


def delete(client: int, start: float, end: float, key: str = "k", **kw: object) -> Op:
    return Op(client, "delete", key, start, end, **kw)  # type: ignore[arg-type]


def listing(client: int, start: float, end: float, keys: set[str], prefix: str = "") -> Op:
    return Op(client, "list", prefix, start, end, keys=frozenset(keys))


def test_concurrent_reads_may_see_either_side_of_a_write() -> None:
    """Porcupine's example: a get overlapping put('100') may read it or the value before."""
    check(
        [
            put(0, 0, 10, "100"),
            get(1, 1, 5, "100"),
            get(2, 2, 3, None),
        ]
    )


def test_a_read_that_sees_the_new_value_then_one_that_sees_the_old_is_not_linearizable() -> None:
    """Both reads overlap the write, but the first finished before the second began: once a
    read has seen '100' every later read must."""
    history = [put(0, 0, 10, "100"), get(1, 1, 2, "100"), get(2, 3, 4, None)]
    assert not register_linearizable(history)
    with pytest.raises(LinearizabilityError) as raised:
        check(history)
    assert len(raised.value.anomalies[0].history) == 3


def test_a_stale_read_fails_with_the_three_operations_that_show_it() -> None:
    history = [
        put(0, 0, 1, "a"),
        put(1, 2, 3, "b"),
        get(2, 2.5, 2.6, "a"),  # concurrent with b: may still see a
        get(0, 4, 5, "a"),  # began after b was acknowledged: stale
        get(1, 4, 6, "b"),
        put(2, 7, 8, "c"),
        get(0, 9, 10, "c"),
    ]
    found = anomalies(history)
    assert [a.kind for a in found] == ["not linearizable"]
    assert set(found[0].history) == {history[0], history[1], history[3]}


def test_a_lost_write_fails_with_the_write_and_the_read_that_missed_it() -> None:
    history = [
        put(0, 0, 1, "a"),
        get(1, 2, 3, "a"),
        put(1, 4, 5, "b"),
        get(0, 6, 7, "a"),  # b was acknowledged and nothing overwrote it
    ]
    found = anomalies(history)
    assert len(found) == 1
    assert set(found[0].history) == {history[0], history[2], history[3]}  # a, b, the read of a


def test_an_acknowledged_write_missing_after_it_completed_is_lost() -> None:
    history = [put(0, 0, 1, "a"), get(1, 2, 3, None)]
    assert not register_linearizable(history)
    assert anomalies(history)[0].history == tuple(history)


def test_a_read_of_a_value_never_written_fails() -> None:
    assert not register_linearizable([put(0, 0, 1, "a"), get(1, 2, 3, "zzz")])


def test_a_failed_write_takes_no_effect_and_an_unknown_one_may_take_it_late() -> None:
    failed = put(0, 0, 1, "a", outcome="failed")
    assert not register_linearizable([failed, get(1, 2, 3, "a")])
    late = put(0, 0, math.inf, "a", outcome="unknown")
    assert register_linearizable([late, get(1, 2, 3, None), get(1, 100, 101, "a")])
    assert register_linearizable([late, get(1, 2, 3, None)])  # or never
    assert not register_linearizable([late, get(1, 2, 3, "a"), get(1, 4, 5, None)])


def test_an_unknown_write_cannot_take_effect_before_it_was_sent() -> None:
    history = [get(1, 0, 1, "a"), put(0, 2, math.inf, "a", outcome="unknown")]
    assert not register_linearizable(history)


def test_deletes_and_unknown_deletes() -> None:
    assert register_linearizable(
        [put(0, 0, 1, "a"), delete(1, 2, 3), get(0, 4, 5, None), put(1, 6, 7, "b")]
    )
    assert not register_linearizable([put(0, 0, 1, "a"), delete(1, 2, 3), get(0, 4, 5, "a")])
    maybe = delete(1, 2, math.inf, outcome="unknown")
    assert register_linearizable([put(0, 0, 1, "a"), maybe, get(0, 4, 5, "a"), get(0, 6, 7, None)])
    assert not register_linearizable(
        [put(0, 0, 1, "a"), maybe, get(0, 4, 5, None), get(0, 6, 7, "a")]
    )


def test_the_delete_that_a_minimal_history_needs_is_kept() -> None:
    """A key deleted, read as missing, then read with its old value again: the report keeps
    the delete (without it the last read would not be an anomaly of its own)."""
    history = [put(0, 0, 1, "a"), delete(1, 2, 3), get(0, 4, 5, None), get(1, 6, 7, "a")]
    found = anomalies(history)
    assert set(found[0].history) == {history[0], history[1], history[3]}


def test_the_whole_history_is_saved_when_asked(tmp_path: Path) -> None:
    saved = tmp_path / "history.txt"
    with pytest.raises(LinearizabilityError, match="the whole history"):
        check([put(0, 0, 1, "a"), get(1, 2, 3, None)], saved)
    assert saved.read_text().splitlines()[1] == "client 1 [2.0000, 3.0000] get('k') -> missing ok"


def test_keys_are_checked_apart_and_each_anomaly_is_named() -> None:
    history = [
        put(0, 0, 1, "a", key="x"),
        get(1, 2, 3, "a", key="x"),
        put(0, 0, 1, "b", key="y"),
        get(1, 2, 3, None, key="y"),
    ]
    found = anomalies(history)
    assert [(a.kind, a.key) for a in found] == [("not linearizable", "y")]
    assert "get('y') -> missing" in str(found[0])


def test_a_listing_must_show_every_acknowledged_key_not_deleted_since() -> None:
    writes = [put(0, 0, 1, "a", key="p/a"), put(0, 0, 1, "b", key="p/b")]
    check([*writes, listing(1, 2, 3, {"p/a", "p/b"}, "p/")])
    check([*writes, listing(1, 0.5, 3, {"p/a"}, "p/")])  # b may not have landed yet
    check([*writes, delete(2, 1.5, 2.5, key="p/b"), listing(1, 2, 3, {"p/a"}, "p/")])
    found = anomalies([*writes, listing(1, 2, 3, {"p/a"}, "p/")])
    assert [(a.kind, a.key) for a in found] == [("missing from a listing", "p/b")]
    assert found[0].history == (writes[1], Op(1, "list", "p/", 2, 3, keys=frozenset({"p/a"})))


def test_a_listing_must_not_show_a_key_deleted_before_it_began_or_never_written() -> None:
    writes = [put(0, 0, 1, "a", key="p/a"), delete(0, 2, 3, key="p/a")]
    check([*writes, listing(1, 2.5, 4, {"p/a"}, "p/")])  # concurrent with the delete
    check([*writes, put(2, 3.5, 6, "c", key="p/a"), listing(1, 4, 5, {"p/a"}, "p/")])
    found = anomalies([*writes, listing(1, 4, 5, {"p/a"}, "p/")])
    assert [(a.kind, a.key) for a in found] == [("ghost in a listing", "p/a")]
    never = anomalies([listing(1, 4, 5, {"p/zz"}, "p/")])
    assert [(a.kind, a.key) for a in never] == [("ghost in a listing", "p/zz")]


def test_the_minimal_history_of_a_long_run_is_short() -> None:
    """A stale read buried in a hundred linearizable operations: the report is the three."""
    history = []
    for n in range(50):
        history.append(put(n % 3, 2 * n, 2 * n + 1, f"v{n}"))
        history.append(get((n + 1) % 3, 2 * n + 1.5, 2 * n + 1.9, f"v{n}"))
    stale = get(4, 200, 201, "v10")
    found = anomalies([*history, stale])
    assert len(found) == 1
    assert set(found[0].history) == {history[20], history[98], stale}  # v10, v49, the read


@st.composite
def register_histories(draw: st.DrawFn) -> list[Op]:
    """What clients of a real register record: each op takes effect at one instant between
    its invocation and its completion, in the order of those instants; some are cut off
    (unknown: taken effect or not, their completion never seen) and some refused."""
    count = draw(st.integers(1, 14))
    spans = []
    for n in range(count):
        start = draw(st.floats(0, 20))
        point = start + draw(st.floats(0, 5))
        end = point + draw(st.floats(0, 5))
        kind = draw(st.sampled_from(["put", "put", "get", "get", "delete"]))
        fate = draw(st.sampled_from(["ok", "ok", "ok", "failed", "unknown"]))
        spans.append((point, n, start, end, kind, fate))
    state: str | None = None
    history = []
    for _point, n, start, end, kind, fate in sorted(spans):
        took_effect = fate == "ok" or (fate == "unknown" and draw(st.booleans()))
        completed = math.inf if fate == "unknown" else end
        value = None
        if kind == "put":
            value = f"v{n}"
            if took_effect:
                state = value
        elif kind == "delete":
            if took_effect:
                state = None
        else:
            value = state
        history.append(Op(n % 4, kind, "k", start, completed, fate, value))  # type: ignore[arg-type]
    return history


@settings(max_examples=budget(300))
@given(register_histories())
def test_every_history_of_a_register_is_accepted(history: list[Op]) -> None:
    assert register_linearizable(history), "\n".join(map(str, history))


def test_a_listing_whose_body_never_came_is_recorded_as_unknown() -> None:
    """A server killed between its answer's head and its body (the kill-and-restart
    histories) leaves a 200 with a Content-Length and nothing after it. botocore parses
    that as an answer with no element at all; the history recorded it as a crash of the
    client's thread (KeyError 'IsTruncated'), where what the listing saw is unknown."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def answer_the_head_only() -> None:
            connection, _ = listener.accept()
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
                    b"Content-Length: 400\r\n\r\n"
                )

        server = threading.Thread(target=answer_the_head_only)
        server.start()
        endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
        clients = Clients(endpoint, ("key", "secret"), "bucket", ["k"], count=1)
        try:
            clients.operate(0, "list", "", "")
        finally:
            clients.close()
            server.join(10)
    [op] = clients.recording.ops
    assert (op.kind, op.outcome) == ("list", "unknown")
    assert clients.recording.errors == ["list : IncompleteReadError"]
