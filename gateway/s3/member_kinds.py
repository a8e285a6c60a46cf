"""How an S3 input is classified (`members.py` holds the table of every one): honoured,
refused with 501 `NotImplemented`, or ignored by design, with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["honoured", "refused", "ignored"]


@dataclass(frozen=True)
class How:
    kind: Kind
    why: str = ""
    values: tuple[str, ...] = ()
    """For an honoured member: the only values taken (compared case-insensitively); any
    other is refused with 501."""
    known: tuple[str, ...] = ()
    """With `values`: the other values S3 itself takes, which bucketd does not (501). When
    given, a value in neither is not S3's at all: 400 InvalidArgument, as AWS answers it."""
    vendor: str = ""
    """Not in AWS's model: whose extension it is (MinIO's, say)."""


HONOURED = How("honoured")


def only(*values: str, why: str = "", known: tuple[str, ...] = ()) -> How:
    return How("honoured", why, values, known=known)


def refused(why: str, vendor: str = "") -> How:
    return How("refused", why, vendor=vendor)


def ignored(why: str) -> How:
    return How("ignored", why)


Table = dict[str, How]
