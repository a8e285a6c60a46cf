"""What a request changes on a version already written, beside its content: retention and
legal hold (`protect`), tags, canned ACL. Part of the `Files` service (its base class),
kept apart as the rules of changing a written version."""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from storage.errors import AccessDenied, FileNotFound
from storage.index import Index, buckets, files, versions
from storage.models import Actor, FileRecord
from storage.rules.acl import check_acl
from storage.rules.clock import Clock
from storage.rules.object_lock import Retention
from storage.rules.tags import MAX_OBJECT_TAGS, check_tags, encode_tags
from storage.rules.validation import check_key
from storage.services.buckets import Buckets


class VersionSettings:
    _index: Index
    _buckets: Buckets
    clock: Clock

    @staticmethod
    def as_judged(actor: Actor, record: FileRecord) -> FileRecord:
        """The version read, for a request whose access decision judged this version of
        its key, or none (`Actor.judged`); AccessDenied when it judged another (a write
        replaced it since: the decision does not cover the one read now)."""
        judged = _judged(actor, record.bucket_id, record.key)
        if judged is not None and not judged.same_version(record):
            raise AccessDenied("Access Denied")
        return record

    async def protect(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        version_id: str | None,
        retention: Retention | UnsetType | None = UNSET,
        legal_hold: bool | UnsetType = UNSET,
        bypass_governance: bool = False,
    ) -> tuple[FileRecord, bool]:
        """Set a version's retention (None removes it) and/or legal hold (see object_lock);
        the version, and whether it is current."""
        check_key(key)
        await self._buckets.get(actor, bucket_id)
        return await self._index.run(
            versions.set_protection,
            bucket_id,
            key,
            version_id,
            retention,
            legal_hold,
            self.clock.time(),
            bypass_governance,
        )

    async def set_tags(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        version_id: str | None,
        pairs: list[tuple[str, str]] | None,
        current: bool = False,
    ) -> tuple[FileRecord, bool]:
        """Replace the tags of a version (`current`: of whatever version is current; None
        removes them); the version and whether it is current."""
        tags = None if pairs is None else encode_tags(check_tags(pairs, MAX_OBJECT_TAGS))
        return await self._set(actor, bucket_id, key, version_id, current, "tags", tags)

    async def set_acl(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        version_id: str | None,
        acl: str,
        current: bool,
    ) -> tuple[FileRecord, bool]:
        """Replace the canned ACL of a version (or the current one); as set_tags."""
        return await self._set(
            actor, bucket_id, key, version_id, current, "acl", check_acl(acl, on_object=True)
        )

    async def _set(
        self,
        actor: Actor,
        bucket_id: str,
        key: str,
        version_id: str | None,
        current: bool,
        column: versions.Attribute,
        value: str | None,
    ) -> tuple[FileRecord, bool]:
        check_key(key)
        await self._buckets.get(actor, bucket_id)
        if current:
            now = await self._index.run(files.get_file, bucket_id, key)
            if now is None or now.delete_marker:
                raise FileNotFound("file not found")
            version_id = now.version_id
        judged = _judged(actor, bucket_id, key)
        grants = buckets.judged_grants(actor.decided, bucket_id)
        return await self._index.run(
            versions.set_attribute, bucket_id, key, version_id, column, value, judged, grants
        )


def _judged(actor: Actor, bucket_id: str, key: str) -> FileRecord | None:
    """The version of `key` the request's access decision judged, if it judged one."""
    judged = actor.judged
    if judged is None or (judged.bucket_id, judged.key) != (bucket_id, key):
        return None
    return judged
