"""The synchronous twin of aio_orgs.py, generated from it by
contrib/unasync_client.py (`make client`): edit aio_orgs.py, not this file."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Protocol, TypeVar

from . import org_calls as calls
from .calls import Call
from .models import Key, Organization, Page, PageFetch

T = TypeVar("T")


class Sender(Protocol):
    """What of its client this needs (the client is one)."""

    def _call(self, call: Call[T]) -> T: ...

    def _pages(self, fetch: PageFetch[T]) -> Iterator[T]: ...


class Organizations:
    def __init__(self, client: Sender) -> None:
        self._client = client

    def create(self, name: str, plan: str) -> Organization:
        """A new organization (Conflict when one has the name already)."""
        return self._client._call(calls.create_call(name, plan))

    def get(self, org_id: str) -> Organization:
        return self._client._call(calls.get_call(org_id))

    def set_plan(self, org_id: str, plan: str) -> Organization:
        """Move the organization to `plan`; the organization after."""
        self._client._call(calls.update_call(org_id, plan))
        return self.get(org_id)

    def list_keys(
        self, org_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page[Key]:
        return self._client._call(calls.keys_call(org_id, limit, cursor))

    def iter_keys(self, org_id: str, page_size: int = 100) -> Iterator[Key]:
        return self._client._pages(lambda cursor: self.list_keys(org_id, page_size, cursor))

    def create_key(
        self,
        org_id: str,
        name: str,
        scopes: list[str],
        *,
        bucket_id: str | None = None,
        expires_at: datetime | str | None = None,
        s3: bool = False,
    ) -> Key:
        """A new key of the organization, with at most the caller's scopes (`s3`: S3
        credentials); its `secret` is set on this object only."""
        call = calls.create_key_call(org_id, name, scopes, bucket_id, expires_at, s3)
        return self._client._call(call)

    def revoke_key(self, org_id: str, key_id: str) -> None:
        self._client._call(calls.revoke_key_call(org_id, key_id))

    # last: a method named `list` would shadow the type in the annotations after it

    def list(self, limit: int | None = None, cursor: str | None = None) -> Page[Organization]:
        """Every organization of the server, a page at a time, by id."""
        return self._client._call(calls.list_call(limit, cursor))

    def iter(self, page_size: int = 100) -> Iterator[Organization]:
        """Every organization, following the cursor page by page."""
        return self._client._pages(lambda cursor: self.list(page_size, cursor))
