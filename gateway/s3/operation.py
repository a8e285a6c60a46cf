"""How an S3 operation is declared (`operations.py` holds the table of them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .call import Handler, Prepare

Target = Literal["service", "bucket", "object"]


@dataclass(frozen=True, kw_only=True)
class S3Operation:
    names: tuple[str, ...]
    """The operation's name in AWS's API reference (two for a handler that serves both)."""
    method: str
    target: Target
    handler: Handler
    scope: str
    flags: tuple[str, ...] = ()
    """Query parameters that must be present."""
    copy: bool = False
    """Only with `x-amz-copy-source` (otherwise only without it, where a copy twin exists)."""
    prepare: Prepare | None = None
    """Runs before the request is authorized: reads credentials the request carries in its
    body (a POST form's signed policy)."""
    action: str
    """What a bucket policy calls it (`s3:GetObject`; the decision names the version form,
    `s3:GetObjectVersion`, where a `versionId` names a version)."""
    touches: frozenset[str] = frozenset()
    """The second resources it reads, each decided as read (`touches.py`)."""
    per_key: bool = False
    """Decided key by key (DeleteObjects): a refusal of one key is that key's error."""
    second_if: tuple[str, str] | None = None
    """The query parameter and its value that make a request the second name's (ListObjectsV2
    is ListObjects with `list-type=2`); the other pairs of names are one request's old and
    new names, which no request tells apart."""

    @property
    def name(self) -> str:
        return self.names[0]

    def called(self, params: dict[str, str]) -> str:
        """The name of this request, as the access log, `/metrics`, test mode's journal and
        its fault rules give it: ListObjectsV2 for a request with `list-type=2`."""
        if self.second_if is not None and params.get(self.second_if[0]) == self.second_if[1]:
            return self.names[1]
        return self.name

    def every_name(self) -> tuple[str, ...]:
        """The names `called` gives."""
        return self.names if self.second_if is not None else (self.name,)


def op(
    names: str,
    method: str,
    target: Target,
    handler: Handler,
    scope: str,
    *flags: str,
    copy: bool = False,
    action: str = "",
    prepare: Prepare | None = None,
    touches: str = "",
    per_key: bool = False,
    second_if: tuple[str, str] | None = None,
) -> S3Operation:
    return S3Operation(
        prepare=prepare,
        touches=frozenset(touches.split()),
        per_key=per_key,
        second_if=second_if,
        action=action or "s3:" + names.split("/")[0],
        names=tuple(names.split("/")),
        method=method,
        target=target,
        handler=handler,
        scope=scope,
        flags=flags,
        copy=copy,
    )
