"""The synchronous twin of aio_snapshots.py, generated from it by
contrib/unasync_client.py (`make client`): edit aio_snapshots.py, not this file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar

from . import snapshot_calls as calls
from .calls import Call
from .models import Bucket, Page, PageFetch
from .snapshot_shapes import Snapshot

T = TypeVar("T")


class Sender(Protocol):
    """What of its client this needs (the client is one)."""

    def _call(self, call: Call[T]) -> T: ...

    def _pages(self, fetch: PageFetch[T]) -> Iterator[T]: ...


class Snapshots:
    def __init__(self, client: Sender) -> None:
        self._client = client

    def create(self, bucket_id: str, name: str | None = None) -> Snapshot:
        """A snapshot of the bucket as it is now: every version, delete marker and
        setting (no content is copied)."""
        return self._client._call(calls.create_call(bucket_id, name))

    def create_server(self, name: str | None = None) -> Snapshot:
        """A snapshot of every bucket of the server (the operator's)."""
        return self._client._call(calls.create_call(None, name))

    def get(self, snapshot_id: str, *, server: bool = False) -> Snapshot:
        return self._client._call(calls.get_call(snapshot_id, server))

    def delete(self, snapshot_id: str, *, server: bool = False) -> None:
        self._client._call(calls.delete_call(snapshot_id, server))

    def restore(self, snapshot_id: str) -> Bucket:
        """Put the snapshot's bucket back as the snapshot holds it; the bucket after."""
        return self._client._call(calls.restore_call(snapshot_id))

    def restore_server(self, snapshot_id: str, *, drop_locked: bool = False) -> Snapshot:
        """Put every bucket of the server back as the snapshot holds it (`drop_locked`:
        only on a server in test mode)."""
        return self._client._call(calls.restore_server_call(snapshot_id, drop_locked))

    def fork(self, snapshot_id: str, name: str, region: str | None = None) -> Bucket:
        """A new bucket `name` holding the snapshot's versions and settings."""
        return self._client._call(calls.fork_call(snapshot_id, name, region))

    # last: a method named `list` would shadow the type in the annotations after it

    def list(
        self,
        bucket_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        *,
        server: bool = False,
    ) -> Page[Snapshot]:
        """The bucket's snapshots; without `bucket_id`, the organization's (`server`: the
        server's)."""
        return self._client._call(calls.list_call(bucket_id, server, limit, cursor))

    def iter(
        self, bucket_id: str | None = None, page_size: int = 100, *, server: bool = False
    ) -> Iterator[Snapshot]:
        """Every snapshot `list` would give, following the cursor page by page."""
        return self._client._pages(
            lambda cursor: self.list(bucket_id, page_size, cursor, server=server)
        )
