"""RenameObject (`PUT /bucket/key?renameObject`, `x-amz-rename-source`): a key takes another
key's current version within one bucket, in one transaction of the index, with no byte
moved where the backend addresses content (the local one; the S3 backend copies in its
cluster before the commit). In a versioned bucket the source keeps its history and gets a
delete marker, as a copy and a delete would leave it.

AWS serves it on directory buckets only, where it replaces an existing destination unless
`If-None-Match: *` forbids it (412). bucketd never replaces one: without that header a
taken destination is 501 NotImplemented, never a silent overwrite (docs/s3.md); the other
conditions, checked outside the rename's transaction they would be, are refused (501) by
`members.py`."""

from __future__ import annotations

from urllib.parse import unquote

from starlette.responses import Response

from storage.errors import FileExists

from .access import also
from .call import S3Call
from .errors import S3Error, not_implemented
from .touches import one


def _source_key(call: S3Call) -> str:
    """The key `x-amz-rename-source` names: `bucket/key` or `/bucket/key` of the request's
    own bucket, URL-encoded."""
    raw = one(call, "rename-source")
    bucket, _, key = unquote(raw or "").lstrip("/").partition("/")
    if not bucket or not key:
        raise S3Error("InvalidArgument", "x-amz-rename-source is bucket/key, URL-encoded")
    if bucket != call.bucket:
        raise S3Error("InvalidArgument", "RenameObject renames within one bucket")
    return key


async def rename_object(call: S3Call) -> Response:
    """Decided as s3:PutObject on the destination (the operation's own), and s3:GetObject
    and s3:DeleteObject on the source."""
    assert call.key is not None
    source = _source_key(call)
    if source == call.key:
        raise S3Error("InvalidRequest", "the source and the destination are the same key")
    await also(call, "s3:GetObject", source)
    actor = await also(call, "s3:DeleteObject", source)
    bucket = await call.target_bucket()
    guarded = call.request.headers.get("if-none-match", "").strip() == "*"
    try:
        await call.engine.files.update(actor, bucket.id, source, new_key=call.key)
    except FileExists:
        if guarded:
            raise S3Error(
                "PreconditionFailed",
                "At least one of the pre-conditions you specified did not hold",
                412,
            ) from None
        raise not_implemented("RenameObject onto an existing key (replacing it)") from None
    return Response(b"", 200)
