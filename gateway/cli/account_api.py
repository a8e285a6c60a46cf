"""Organizations and keys through a running server's API, from anywhere: the key's own
organization through /v1/keys (scope keys:manage), any other and every organization
through the operator's /v1/orgs (scope orgs:manage). Nothing is read or made on disk."""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable

import bucketd_client as bc
from bucketd_client.shapes import Key, Organization
from storage.errors import InvalidBucketName
from storage.rules.validation import check_bucket_name

from .errors import UsageError
from .org_names import pick_org
from .remote import async_client_of

OPERATOR = "a key with the orgs:manage scope (the first start's admin key has it)"


async def through_api(
    args: argparse.Namespace, action: Callable[[ApiAccounts], Awaitable[None]]
) -> None:
    async with async_client_of(args) as client:
        await action(ApiAccounts(client))


def _timestamp(moment: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


class ApiAccounts:
    def __init__(self, client: bc.AsyncClient) -> None:
        self._client = client
        self._own: Organization | None = None

    async def _mine(self) -> Organization:
        """The key's own organization."""
        if self._own is None:
            self._own = await self._client.get_organization()
        return self._own

    async def _target(self, given: str) -> tuple[Organization, bool]:
        """The organization `given` names, and whether it is the key's own (reached through
        /v1/keys, so a key without orgs:manage manages its own organization's keys)."""
        own = await self._mine()
        if given == own.id:
            return own, True
        try:
            every = [org async for org in self._client.orgs.iter()]
        except bc.Forbidden:
            if given == own.name:
                return own, True
            raise UsageError(
                f"this key's organization is {own.name!r} ({own.id}); another one takes {OPERATOR}"
            ) from None
        org = pick_org(every, given)
        return org, org.id == own.id

    async def create_org(self, name: str, plan: str) -> Organization:
        return await self._client.orgs.create(name, plan)

    async def orgs(self) -> list[Organization]:
        return [org async for org in self._client.orgs.iter()]

    async def set_plan(self, org: str, plan: str) -> Organization:
        target, _ = await self._target(org)
        return await self._client.orgs.set_plan(target.id, plan)

    async def create_key(
        self,
        org: str,
        name: str,
        scopes: list[str],
        bucket: str | None,
        expires_at: int | None,
        s3: bool,
    ) -> Key:
        target, own = await self._target(org)
        bucket_id = bucket and await self._bucket_id(bucket, own)
        expiry = None if expires_at is None else _timestamp(expires_at)
        if own:
            return await self._client.create_key(
                name, scopes, bucket_id=bucket_id or None, expires_at=expiry, s3=s3
            )
        return await self._client.orgs.create_key(
            target.id, name, scopes, bucket_id=bucket_id or None, expires_at=expiry, s3=s3
        )

    async def _bucket_id(self, given: str, own: bool) -> str:
        """A bucket id from an id, or from the name of one of the key's own buckets (the API
        lists no other organization's buckets)."""
        try:
            name = check_bucket_name(given)
        except InvalidBucketName:
            return given
        if not own:
            raise UsageError(
                f"{given!r} is a bucket name: give the bucket's id, which its organization's "
                "`bucketd buckets list --json` shows (the API finds a bucket by name only "
                "among the key's own)"
            )
        return (await self._client.get_bucket_by_name(name)).id

    async def keys(self, org: str) -> list[Key]:
        target, own = await self._target(org)
        if own:
            return [key async for key in self._client.iter_keys()]
        return [key async for key in self._client.orgs.iter_keys(target.id)]

    async def revoke(self, key: str, org: str | None) -> Key:
        """The key found by id or access key id: in `org`, else in the key's own
        organization, then (for an operator's key) in every other."""
        if org is not None:
            target, own = await self._target(org)
            found = await self._revoke_in(target, own, key)
            if found is None:
                raise UsageError(f"organization {target.name!r} has no key {key!r}")
            return found
        mine = await self._mine()
        found = await self._revoke_in(mine, True, key)
        if found is not None:
            return found
        try:
            every = [other async for other in self._client.orgs.iter()]
        except bc.Forbidden:
            raise UsageError(
                f"no key of organization {mine.name!r} has the id or access key id {key!r}; "
                f"another organization's takes {OPERATOR}"
            ) from None
        for other in every:
            if other.id != mine.id:
                found = await self._revoke_in(other, False, key)
                if found is not None:
                    return found
        raise UsageError(f"no key has the id or access key id {key!r}")

    async def _revoke_in(self, org: Organization, own: bool, given: str) -> Key | None:
        listed = self._client.iter_keys() if own else self._client.orgs.iter_keys(org.id)
        async for key in listed:
            if given in (key.id, key.access_key_id):
                if own:
                    await self._client.revoke_key(key.id)
                else:
                    await self._client.orgs.revoke_key(org.id, key.id)
                return key
        return None
