"""The GET's re-lookup rule (storage/rules/rereads.py), by itself: when to look a key up
again after its content would not open, and when to call the content gone."""

from __future__ import annotations

from typing import Any, cast

import pytest

from storage.models import FileRecord
from storage.rules import rereads


@pytest.fixture
def clock() -> list[float]:
    return [100.0]


@pytest.mark.anyio
async def test_an_open_that_hung_past_the_settling_time_gets_one_more_lookup(
    clock: list[float],
) -> None:
    """A make test run (2026-11-26 20:33Z) read "missing" for a key that held a value: the
    GET's open hung through a one-second stall of the cluster, failed on the object an
    overwrite had replaced meanwhile, and the settling time was over, so the record was
    called gone without looking again; the next lookup would have found the new one."""
    old = cast(FileRecord, cast(Any, "old record"))
    reads = rereads.Rereads(clock=lambda: clock[0])
    assert await reads.raced(old)  # replaced under the first lookup: look again at once
    clock[0] += rereads.SETTLE_SECONDS + 0.5  # the second open hung through a stall
    assert await reads.raced(old)  # one more lookup, made now, decides
    assert not await reads.raced(old)  # the same record again: its content is gone


@pytest.mark.anyio
async def test_a_new_record_is_looked_at_again_at_once(clock: list[float]) -> None:
    first = cast(FileRecord, cast(Any, "first"))
    second = cast(FileRecord, cast(Any, "second"))
    reads = rereads.Rereads(clock=lambda: clock[0])
    assert await reads.raced(first)
    clock[0] += 5
    assert await reads.raced(second)
    assert await reads.raced(second)  # within its own settling time: after a pause


@pytest.mark.anyio
async def test_a_live_writer_is_waited_for_past_the_attempts_and_the_settling_time(
    clock: list[float],
) -> None:
    """A write of the key between its publish and its commit (storage says "writing") is
    waited for as long as it lives: its lease bounds that, not the reader's attempts or its
    second of settling; once it is gone the settling time counts from then."""
    old = cast(FileRecord, cast(Any, "old record"))
    writing = rereads.READ_ATTEMPTS + 10

    async def replaced(record: FileRecord) -> rereads.Replaced:
        nonlocal writing
        writing -= 1
        return "writing" if writing >= 0 else "none"

    async def sleep(seconds: float) -> None:
        clock[0] += seconds

    reads = rereads.Rereads(replaced, clock=lambda: clock[0], sleep=sleep)
    looked = 0
    for _ in reads.attempts():
        looked += 1
        if not await reads.raced(old):
            break
        if writing == 0:
            gone = clock[0]  # the writer's last sign
    else:
        raise AssertionError("the attempts ran out: the waits for the writer were counted")
    assert looked > rereads.READ_ATTEMPTS + 10
    assert abs(clock[0] - gone - rereads.SETTLE_SECONDS) < 0.2


@pytest.mark.anyio
async def test_a_write_settled_by_the_reader_is_looked_at_again_at_once(
    clock: list[float],
) -> None:
    old = cast(FileRecord, cast(Any, "old record"))

    async def settled(record: FileRecord) -> rereads.Replaced:
        return "settled"

    async def sleep(seconds: float) -> None:
        raise AssertionError("a settled write is looked at again without a pause")

    reads = rereads.Rereads(settled, clock=lambda: clock[0], sleep=sleep)
    assert await reads.raced(old)
    clock[0] += rereads.SETTLE_SECONDS * 5  # no settling time applies to a settled write
    assert await reads.raced(old) and await reads.raced(old)
