"""Snapshots: `client.snapshots` of `AsyncClient`. A bucket's snapshots need buckets:read
to list and buckets:write to take, fork or delete (restoring, files:write too); those of
the whole server (`server=True`) are the operator's (orgs:manage). The synchronous twin
(snapshots.py) is generated from this module by `make client`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, TypeVar

from . import snapshot_calls as calls
from .calls import Call
from .models import AsyncPageFetch, Bucket, Page
from .snapshot_shapes import Snapshot

T = TypeVar("T")


class AsyncSender(Protocol):
    """What of its client this needs (the client is one)."""

    async def _call(self, call: Call[T]) -> T: ...

    def _pages(self, fetch: AsyncPageFetch[T]) -> AsyncIterator[T]: ...


class AsyncSnapshots:
    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def create(self, bucket_id: str, name: str | None = None) -> Snapshot:
        """A snapshot of the bucket as it is now: every version, delete marker and
        setting (no content is copied)."""
        return await self._client._call(calls.create_call(bucket_id, name))

    async def create_server(self, name: str | None = None) -> Snapshot:
        """A snapshot of every bucket of the server (the operator's)."""
        return await self._client._call(calls.create_call(None, name))

    async def get(self, snapshot_id: str, *, server: bool = False) -> Snapshot:
        return await self._client._call(calls.get_call(snapshot_id, server))

    async def delete(self, snapshot_id: str, *, server: bool = False) -> None:
        await self._client._call(calls.delete_call(snapshot_id, server))

    async def restore(self, snapshot_id: str) -> Bucket:
        """Put the snapshot's bucket back as the snapshot holds it; the bucket after."""
        return await self._client._call(calls.restore_call(snapshot_id))

    async def restore_server(self, snapshot_id: str, *, drop_locked: bool = False) -> Snapshot:
        """Put every bucket of the server back as the snapshot holds it (`drop_locked`:
        only on a server in test mode)."""
        return await self._client._call(calls.restore_server_call(snapshot_id, drop_locked))

    async def fork(self, snapshot_id: str, name: str, region: str | None = None) -> Bucket:
        """A new bucket `name` holding the snapshot's versions and settings."""
        return await self._client._call(calls.fork_call(snapshot_id, name, region))

    # last: a method named `list` would shadow the type in the annotations after it

    async def list(
        self,
        bucket_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        *,
        server: bool = False,
    ) -> Page[Snapshot]:
        """The bucket's snapshots; without `bucket_id`, the organization's (`server`: the
        server's)."""
        return await self._client._call(calls.list_call(bucket_id, server, limit, cursor))

    def iter(
        self, bucket_id: str | None = None, page_size: int = 100, *, server: bool = False
    ) -> AsyncIterator[Snapshot]:
        """Every snapshot `list` would give, following the cursor page by page."""
        return self._client._pages(
            lambda cursor: self.list(bucket_id, page_size, cursor, server=server)
        )
