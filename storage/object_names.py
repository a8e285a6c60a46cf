"""Where the S3 backend keeps each version's content in the cluster.

A file's content is the object under its own key (the cluster stays browsable), except the
named versions of a versioned bucket: those live apart, each under
`.bucketd-versions/<version id>/<key>`, so a new version never replaces an older one's
object. The null version (unversioned or suspended writes) stays under the key. The index
records the name (`FileRecord.object_key`), so a record always says where its bytes are.
"""

from __future__ import annotations

from .models import FileRecord

VERSIONS_PREFIX = ".bucketd-versions/"


def for_version(key: str, version: str) -> str:
    return f"{VERSIONS_PREFIX}{version}/{key}"


def version_of(object_key: str | None) -> str:
    """The version id a name made by `for_version` holds ("" for any other name)."""
    if object_key is None or not object_key.startswith(VERSIONS_PREFIX):
        return ""
    return object_key[len(VERSIONS_PREFIX) :].split("/", 1)[0]


def stored_under(record: FileRecord) -> str:
    return record.object_key or record.key
