"""The operator's calls: `client.orgs` of `AsyncClient`, for a key with the scope
orgs:manage (the first start's admin key has it). The synchronous twin (orgs.py) is
generated from this module by `make client`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Protocol, TypeVar

from . import org_calls as calls
from .calls import Call
from .models import AsyncPageFetch, Key, Organization, Page

T = TypeVar("T")


class AsyncSender(Protocol):
    """What of its client this needs (the client is one)."""

    async def _call(self, call: Call[T]) -> T: ...

    def _pages(self, fetch: AsyncPageFetch[T]) -> AsyncIterator[T]: ...


class AsyncOrganizations:
    def __init__(self, client: AsyncSender) -> None:
        self._client = client

    async def create(self, name: str, plan: str) -> Organization:
        """A new organization (Conflict when one has the name already)."""
        return await self._client._call(calls.create_call(name, plan))

    async def get(self, org_id: str) -> Organization:
        return await self._client._call(calls.get_call(org_id))

    async def set_plan(self, org_id: str, plan: str) -> Organization:
        """Move the organization to `plan`; the organization after."""
        await self._client._call(calls.update_call(org_id, plan))
        return await self.get(org_id)

    async def list_keys(
        self, org_id: str, limit: int | None = None, cursor: str | None = None
    ) -> Page[Key]:
        return await self._client._call(calls.keys_call(org_id, limit, cursor))

    def iter_keys(self, org_id: str, page_size: int = 100) -> AsyncIterator[Key]:
        return self._client._pages(lambda cursor: self.list_keys(org_id, page_size, cursor))

    async def create_key(
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
        return await self._client._call(call)

    async def revoke_key(self, org_id: str, key_id: str) -> None:
        await self._client._call(calls.revoke_key_call(org_id, key_id))

    # last: a method named `list` would shadow the type in the annotations after it

    async def list(self, limit: int | None = None, cursor: str | None = None) -> Page[Organization]:
        """Every organization of the server, a page at a time, by id."""
        return await self._client._call(calls.list_call(limit, cursor))

    def iter(self, page_size: int = 100) -> AsyncIterator[Organization]:
        """Every organization, following the cursor page by page."""
        return self._client._pages(lambda cursor: self.list(page_size, cursor))
