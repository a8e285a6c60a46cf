"""The order of an A/B measurement in one process: both modes every round, each first in
every other round, so that the machine's drift within the run falls on both alike."""

from __future__ import annotations

from collections.abc import Iterator


def turns(a: str, b: str, rounds: int) -> Iterator[str]:
    """`a`, `b`, then `b`, `a`, ... for `rounds` rounds."""
    for round_ in range(rounds):
        yield from (a, b) if round_ % 2 == 0 else (b, a)
