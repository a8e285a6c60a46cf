"""Buckets: created (then provisioned in the background), read, changed, deleted.

A bucket of another organization, or outside the actor's bucket restriction, is reported
exactly as a missing one.
"""

from __future__ import annotations

from dataclasses import replace

from storage import encryption, kms
from storage.backends.commits import Commits
from storage.backends.protocol import Backend
from storage.config import EngineConfig
from storage.errors import BucketNotFound, InvalidBucketState, InvalidInput, NotSupported
from storage.index import BucketChanges, Index, buckets
from storage.models import Actor, Bucket, Page
from storage.rules import ids
from storage.rules.acl import check_acl, shares
from storage.rules.clock import Clock
from storage.rules.lifecycle_rules import check_rules, encode_rules
from storage.rules.object_lock import BucketLock, DefaultRetention, encode_config
from storage.rules.ownership import check_bucket_acl, check_ownership
from storage.rules.sharing import (
    Sharing,
    anonymous_rpm_column,
    cache_control_column,
    cors_column,
    sharing_changes,
)
from storage.rules.tags import MAX_BUCKET_TAGS, check_tags, encode_tags
from storage.rules.validation import (
    check_allow_list,
    check_bucket_name,
    check_max_bytes,
    check_region,
)
from storage.services.organizations import Organizations
from storage.services.provisioning import Provisioning


class Buckets:
    def __init__(
        self,
        index: Index,
        backend: Backend,
        config: EngineConfig,
        orgs: Organizations,
        provisioning: Provisioning,
        commits: Commits,
        clock: Clock,
    ) -> None:
        self._index = index
        self._clock = clock
        self._backend = backend
        self._config = config
        self._keyring = kms.keyring(config.storage.kms_keys, config.storage.kms_default_key)
        self._orgs = orgs
        self._provisioning = provisioning
        self._commits = commits

    async def create(
        self,
        actor: Actor,
        name: object,
        region: object,
        max_upload_bytes: object = None,
        allowed_content_types: object = None,
        versioning: object = None,
        object_lock: BucketLock | None = None,
        lifecycle: object = None,
        sharing: Sharing | None = None,
        at_once: bool = False,
        encryption: object = None,
        object_ownership: object = None,
    ) -> Bucket:
        """A new bucket, provisioning (`at_once`: provisioned before this returns);
        `object_lock` enables object lock (and versioning) for good; `encryption` its
        default encryption; `object_ownership` S3's (`ownership.py`)."""
        sharing = sharing or Sharing()
        name = check_bucket_name(name)
        default_encryption = check_default_encryption(encryption, self._keyring)
        ownership = check_ownership(object_ownership)
        if object_lock is not None:
            if versioning not in (None, "Enabled"):
                raise InvalidBucketState("object lock keeps versioning enabled")
            versioning = "Enabled"
        state = None if versioning is None else self._check_versioning(versioning)
        region = check_region(region, self._config.regions)
        limit = None if max_upload_bytes is None else check_max_bytes(max_upload_bytes)
        types = None if allowed_content_types is None else check_allow_list(allowed_content_types)
        org = await self._orgs.get(actor.org_id)
        uploads = self._config.uploads
        bucket = Bucket(
            id=ids.new_id(self._config.id_prefix),
            org_id=org.id,
            name=name,
            region=region,
            status="provisioning",
            status_reason=None,
            created_at=self._clock.iso(),
            max_upload_bytes=uploads.default_max_bytes if limit is None else limit,
            allowed_content_types=types or tuple(uploads.allowed_content_types),
            file_count=0,
            size_bytes=0,
            versioning=state,
            object_lock=None if object_lock is None else encode_config(object_lock),
            lifecycle=None if lifecycle is None else encode_rules(check_rules(lifecycle)),
            encryption=default_encryption,
            cors=cors_column(sharing.cors),
            public=sharing.public,
            cache_control=cache_control_column(sharing.cache_control),
            acl=check_acl(sharing.acl, on_object=False),
            object_ownership=ownership,
            anonymous_rpm=anonymous_rpm_column(sharing.anonymous_rpm),
            shared_name=name if sharing.public or sharing.cors or shares(sharing.acl) else None,
        )
        check_bucket_acl(ownership, bucket.acl)
        bucket = replace(bucket, location=self._backend.location_for(bucket))
        max_buckets = self._orgs.plan(org).max_buckets
        await self._index.run(buckets.insert_bucket, bucket, max_buckets, limit, types)
        if at_once:
            await self._provisioning.provision_now(bucket.id)
            return await self.get(actor, bucket.id)
        await self._provisioning.claim(bucket.id)
        return bucket

    async def get(self, actor: Actor, bucket_id: str) -> Bucket:
        decided = actor.decided
        if decided is not None and decided.id == bucket_id:
            bucket: Bucket | None = decided
        else:
            bucket = await self._index.run(buckets.get_bucket, bucket_id, self._config.uploads)
        if bucket is None or bucket.org_id != actor.org_id or not actor.can_see(bucket_id):
            raise BucketNotFound("bucket not found")
        return bucket

    async def shared(self, name: str) -> Bucket:
        """The bucket that holds `name` across the server (one that shares, or once shared,
        something beyond its organization): what a request from outside it names."""
        bucket = await self._index.run(buckets.get_shared_bucket, name, self._config.uploads)
        if bucket is None:
            raise BucketNotFound("bucket not found")
        return bucket

    async def reserve_name(self, bucket: Bucket, acl: str | None) -> None:
        """Before a write gives an object the ACL `acl`: a public one reserves the bucket's
        name across the server for good (SharedNameTaken, before any byte is read, when
        another organization's bucket holds it). The commit reserves it again, in its own
        transaction; a reservation already held costs nothing."""
        if shares(acl) and bucket.shared_name is None:
            await self._index.run(buckets.reserve_name, bucket.id)

    async def check_granted(self, bucket: Bucket, acl: str | None) -> None:
        """After a write's body, before its commit: a write whose ACL shares anything lands
        only while the bucket's grants are those of `bucket`, as its decision read them (a
        body held back past a revoked grant, a Deny or BlockPublicAcls no longer lets it
        through: AccessDenied)."""
        if shares(acl):
            judged = buckets.judged_grants(bucket, bucket.id)
            await self._index.run(buckets.check_grants, bucket.id, judged)

    async def get_any(self, bucket_id: str) -> Bucket:
        """A bucket by id whoever owns it: for requests without credentials (public
        downloads, signed URLs, CORS preflights), which the caller then authorizes."""
        bucket = await self._index.run(buckets.get_bucket, bucket_id, self._config.uploads)
        if bucket is None:
            raise BucketNotFound("bucket not found")
        return bucket

    async def owner(self, bucket_id: str) -> Actor:
        """The organization a bucket belongs to, as an actor: for operator commands that
        work on a data dir directly (export, import), where no API key is involved."""
        return Actor(org_id=(await self.get_any(bucket_id)).org_id)

    async def get_by_name(self, actor: Actor, name: str) -> Bucket:
        bucket = await self._index.run(
            buckets.get_bucket_by_name, actor.org_id, name, self._config.uploads
        )
        if bucket is None or not actor.can_see(bucket.id):
            raise BucketNotFound("bucket not found")
        return bucket

    async def list(self, actor: Actor, after: str | None, limit: int) -> Page[Bucket]:
        rows = await self._index.run(
            buckets.list_buckets,
            actor.org_id,
            actor.bucket_id,
            after,
            limit + 1,
            self._config.uploads,
        )
        return Page.of(rows, limit, lambda bucket: bucket.id)

    async def update(self, actor: Actor, bucket_id: str, changes: dict[str, object]) -> Bucket:
        """Apply a PATCH; keys are `name`, `max_upload_bytes`, `allowed_content_types`,
        `versioning`, `object_lock` (a BucketLock: enables object lock, or changes its
        default retention), `lifecycle` (lifecycle_rules.Rule objects; None: none), `tags`
        ((key, value) pairs; None: none), `encryption` (the default encryption, AES256;
        None: none), `object_ownership` (None: none), and those of
        `sharing.sharing_changes`."""
        checked: BucketChanges = {}
        if "name" in changes:
            checked["name"] = check_bucket_name(changes["name"])
        if "max_upload_bytes" in changes:
            value = changes["max_upload_bytes"]
            checked["max_upload_bytes"] = None if value is None else check_max_bytes(value)
        if "allowed_content_types" in changes:
            value = changes["allowed_content_types"]
            checked["allowed_content_types"] = None if value is None else check_allow_list(value)
        if "versioning" in changes:
            checked["versioning"] = self._check_versioning(changes["versioning"])
        if "object_lock" in changes:
            lock = changes["object_lock"]
            if not isinstance(lock, BucketLock):
                raise InvalidInput("object_lock is an object lock configuration")
            checked["object_lock"] = encode_config(lock)
        if "lifecycle" in changes:
            rules = changes["lifecycle"]
            checked["lifecycle"] = None if rules is None else encode_rules(check_rules(rules))
        if "tags" in changes:
            pairs = changes["tags"]
            if pairs is not None and not isinstance(pairs, list):
                raise InvalidInput("tags are a list of (key, value) pairs")
            tagged = None if pairs is None else check_tags(pairs, MAX_BUCKET_TAGS)
            checked["tags"] = encode_tags(tagged)
        if "encryption" in changes:
            checked["encryption"] = check_default_encryption(changes["encryption"], self._keyring)
        if "object_ownership" in changes:
            checked["object_ownership"] = check_ownership(changes["object_ownership"])
        current = await self.get(actor, bucket_id)
        checked.update(sharing_changes(current, changes))
        judged = buckets.judged_grants(actor.decided, bucket_id) if "acl" in checked else None
        await self._index.run(buckets.update_bucket, bucket_id, checked, judged)
        return await self.get(replace(actor, decided=None), bucket_id)  # as changed

    async def set_versioning(self, actor: Actor, bucket_id: str, state: str) -> Bucket:
        """Enable or suspend versioning; a bucket once versioned stays versioned."""
        return await self.update(actor, bucket_id, {"versioning": state})

    async def set_object_lock(
        self, actor: Actor, bucket_id: str, default: DefaultRetention | None
    ) -> Bucket:
        """Enable object lock on a versioned bucket (for good), or change the default
        retention new versions get (None: none)."""
        return await self.update(actor, bucket_id, {"object_lock": BucketLock(default=default)})

    def _check_versioning(self, state: object) -> str:
        if state not in buckets.VERSIONING_STATES:
            raise InvalidInput("versioning is enabled or suspended")
        return str(state)

    async def delete(self, actor: Actor, bucket_id: str, force: bool = False) -> None:
        bucket = await self.get(actor, bucket_id)
        await self._commits.delete_bucket(bucket, force)


def check_default_encryption(value: object, keyring: kms.Keyring) -> str | None:
    """A bucket's default encryption: AES256 (SSE-S3), aws:kms (the keyring's default key)
    or `aws:kms/<name>` (a key of the keyring, which must hold it), or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput("encryption is AES256, aws:kms, aws:kms/<key name> or null")
    if value.upper() == encryption.SSE_S3:
        return encryption.SSE_S3
    if kms.is_kms(value):
        asked = kms.requested(kms.key_name(value))
        keyring.resolve(asked)
        return asked
    if value == "aws:kms:dsse":
        raise NotSupported(f"{value} default encryption (DSSE-KMS) is not implemented")
    raise InvalidInput("encryption is AES256, aws:kms, aws:kms/<key name> or null")
