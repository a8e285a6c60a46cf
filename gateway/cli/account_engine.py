"""Organizations and keys on a data dir's engine, for a stopped server or beside a running
one (SQLite's busy timeout): the operator's own way in, needing no key. The records are
handed on as the API's shapes, so `accounts.py` prints them as it prints the API's."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable

from bucketd_client.shapes import Key, Organization
from gateway.api.resources import key_shape, organization_shape
from storage.engine import Engine
from storage.errors import InvalidBucketName, OrganizationExists
from storage.models import Actor
from storage.models import Organization as OrgRecord
from storage.rules.validation import check_bucket_name

from .datadir import settings_of, with_engine
from .errors import UsageError
from .org_names import pick_org


async def on_data_dir(
    args: argparse.Namespace,
    action: Callable[[EngineAccounts], Awaitable[None]],
    initialises: bool,
) -> None:
    """Run `action` on the data dir's accounts (a data dir that exists: `datadir.existing`)."""
    await with_engine(settings_of(args), lambda engine: action(EngineAccounts(engine)), initialises)


async def org_id(engine: Engine, given: str) -> str:
    """An organization id from an id, or from a name only one organization has."""
    if given.startswith(engine.config.id_prefix):
        return given
    return pick_org(await engine.orgs.all(), given).id


async def bucket_id(engine: Engine, org: str, given: str) -> str:
    """A bucket id from an id or the name of one of the organization's buckets: a bucket
    name never holds the capitals and underscore of an id."""
    try:
        name = check_bucket_name(given)
    except InvalidBucketName:
        return given
    return (await engine.buckets.get_by_name(Actor(org_id=org), name)).id


class EngineAccounts:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _shape(self, org: OrgRecord) -> Organization:
        return organization_shape(org, self._engine.orgs.plan(org))

    async def create_org(self, name: str, plan: str) -> Organization:
        try:
            org = await self._engine.orgs.create(name, plan, unique=True)
        except OrganizationExists as exc:  # a usage error here, as it always was
            raise UsageError(exc.message) from None
        return self._shape(org)

    async def orgs(self) -> list[Organization]:
        return [self._shape(org) for org in await self._engine.orgs.all()]

    async def set_plan(self, org: str, plan: str) -> Organization:
        return self._shape(await self._engine.orgs.set_plan(await org_id(self._engine, org), plan))

    async def create_key(
        self,
        org: str,
        name: str,
        scopes: list[str],
        bucket: str | None,
        expires_at: int | None,
        s3: bool,
    ) -> Key:
        owner = await org_id(self._engine, org)
        restricted = bucket and await bucket_id(self._engine, owner, bucket)
        key, secret = await self._engine.keys.create(
            owner, name, scopes, restricted or None, expires_at, s3=s3
        )
        return key_shape(key, secret)

    async def keys(self, org: str) -> list[Key]:
        actor = Actor(org_id=await org_id(self._engine, org))
        found: list[Key] = []
        after = None
        while True:
            page = await self._engine.keys.list(actor, after, 100)
            found += [key_shape(key) for key in page.items]
            if not page.has_more or not page.items:
                return found
            after = page.items[-1].id

    async def revoke(self, key: str, org: str | None) -> Key:
        if key.startswith(self._engine.config.id_prefix):
            record = await self._engine.keys.by_id(key)
        else:
            found = await self._engine.keys.find_s3(key)
            if found is None:
                raise UsageError(f"no key has the id or access key id {key!r}")
            record = found[0]
        if org is not None and record.org_id != await org_id(self._engine, org):
            raise UsageError(f"key {key!r} is not of organization {org!r}")
        revoked = await self._engine.keys.revoke(Actor(org_id=record.org_id), record.id)
        return key_shape(revoked)
