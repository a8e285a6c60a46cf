"""API keys and S3 credentials: made, found by their secret, listed, revoked."""

from __future__ import annotations

from collections.abc import Callable

from storage.config import EngineConfig
from storage.errors import InvalidInput, InvalidScopes, KeyNotFound
from storage.index import Index, accounts
from storage.models import ORGS_MANAGE, SCOPES, Actor, ApiKey, Page
from storage.rules import ids
from storage.rules.clock import Clock
from storage.rules.validation import check_name, check_s3_credentials
from storage.sealing import Sealer
from storage.services.buckets import Buckets
from storage.services.organizations import Organizations
from storage.tasks import Tasks


class Keys:
    def __init__(
        self,
        index: Index,
        config: EngineConfig,
        orgs: Organizations,
        buckets: Buckets,
        tasks: Tasks,
        clock: Clock,
    ) -> None:
        self._index = index
        self._clock = clock
        self._config = config
        self._orgs = orgs
        self._buckets = buckets
        self._tasks = tasks
        self._sealer_instance: Sealer | None = None

    def _sealer(self) -> Sealer:
        if self._sealer_instance is None:
            self._sealer_instance = Sealer.for_data_dir(self._config.data_dir)
        return self._sealer_instance

    async def create(
        self,
        org_id: str,
        name: object,
        scopes: list[str],
        bucket_id: str | None = None,
        expires_at: int | None = None,
        s3: bool = False,
        credentials: tuple[str, str] | None = None,
        replacing: list[str] | None = None,
    ) -> tuple[ApiKey, str]:
        """Make a key; returns it and its secret. An API key's secret is stored only as a
        hash; an S3 key (`s3=True`, with an access key id) has its secret sealed, since
        verifying a signature needs it. `credentials`: the S3 key's (access key id, secret)
        as given, instead of new ones; `replacing`: keys revoked in the same transaction."""
        name = check_name(name)
        unknown = [scope for scope in scopes if scope not in SCOPES]
        if unknown or not scopes:
            raise InvalidScopes(f"scopes must be a non-empty list of: {', '.join(SCOPES)}")
        if ORGS_MANAGE in scopes and bucket_id is not None:
            raise InvalidScopes(
                f"{ORGS_MANAGE} reaches every organization: it is never given to a key "
                "restricted to a bucket"
            )
        await self._orgs.get(org_id)
        if bucket_id is not None:
            await self._buckets.get(Actor(org_id=org_id), bucket_id)
        if expires_at is not None and expires_at <= self._clock.time():
            raise InvalidInput("the expiry must be in the future")
        prefix = self._config.id_prefix
        if credentials is not None:
            access_key_id, secret = check_s3_credentials(*credentials)
        elif s3:
            access_key_id, secret = ids.new_access_key_id(), ids.new_s3_secret()
        else:
            access_key_id, secret = None, ids.new_secret(prefix)
        key = ApiKey(
            id=ids.new_id(prefix),
            org_id=org_id,
            name=name,
            scopes=tuple(scope for scope in SCOPES if scope in scopes),
            bucket_id=bucket_id,
            created_at=self._clock.iso(),
            expires_at=expires_at,
            revoked_at=None,
            last4=secret[-4:],
            access_key_id=access_key_id,
        )
        sealed = None if access_key_id is None else self._sealer().seal(secret, access_key_id)
        await self._index.run(
            accounts.replace_keys,
            org_id,
            replacing or [],
            key,
            ids.hash_secret(secret),
            sealed,
            self._clock.iso(),
        )
        return key, secret

    async def reinstate(
        self, key_id: str, access_key_id: str, replacing: list[str] | None = None
    ) -> ApiKey:
        """Make a revoked S3 key valid again, revoking `replacing` in the same transaction
        (bootstrap's rotation to it). For a credential whose secret is published anyway
        (`bucketd dev`'s): a key's secret is unique, so making it again means this row."""
        key = await self.by_id(key_id)
        await self._index.run(
            accounts.reinstate_key,
            key.org_id,
            replacing or [],
            key_id,
            access_key_id,
            self._clock.iso(),
        )
        return await self.by_id(key_id)

    async def by_id(self, key_id: str) -> ApiKey:
        """A key of any organization (the operator's view)."""
        found = await self._index.run(accounts.find_key_by_id, key_id)
        if found is None:
            raise KeyNotFound("key not found")
        return found[0]

    async def active_named(self, org_id: str, name: str) -> list[ApiKey]:
        return await self._index.run(accounts.active_keys_named, org_id, name)

    async def find_s3(self, access_key_id: str) -> tuple[ApiKey, str] | None:
        """The S3 credential and its secret (unsealed), whatever its state."""
        found = await self._index.run(accounts.find_access_key, access_key_id)
        if found is None:
            return None
        key, sealed = found
        return key, self._sealer().open(sealed, access_key_id)

    async def find(self, secret_hash: bytes) -> tuple[ApiKey, bytes] | None:
        """The key stored under a secret's hash, with that stored hash (in any state)."""
        return await self._index.run(accounts.find_key, secret_hash)

    async def signing_secret(self, key_id: str) -> tuple[ApiKey, bytes] | None:
        """A key (in any state) and the secret its signed URLs are signed with: derived
        from the data dir's sealing key and the hash of the key's own secret, so that
        revoking the key ends its URLs on every gateway, and that the index (or a backup of
        it), which holds the hash, is not enough to forge one."""
        found = await self._index.run(accounts.find_key_by_id, key_id)
        if found is None:
            return None
        key, digest = found
        return key, self._sealer().derive("signed-url", digest)

    async def get(self, actor: Actor, key_id: str) -> ApiKey:
        key = await self._index.run(accounts.get_key, actor.org_id, key_id)
        if key is None or (actor.bucket_id is not None and key.bucket_id != actor.bucket_id):
            raise KeyNotFound("key not found")
        return key

    async def list(self, actor: Actor, after: str | None, limit: int) -> Page[ApiKey]:
        rows = await self._index.run(
            accounts.list_keys, actor.org_id, actor.bucket_id, after, limit + 1
        )
        return Page.of(rows, limit, lambda key: key.id)

    def watch_revocations(self, forget: Callable[[str], None]) -> None:
        """Have `forget` called with every key id revoked, by this process or another."""
        self._tasks.spawn(self._index.watch_revocations(forget))

    async def revoke(self, actor: Actor, key_id: str) -> ApiKey:
        await self.get(actor, key_id)
        await self._index.run(accounts.revoke_key, actor.org_id, key_id, self._clock.iso())
        return await self.get(actor, key_id)
