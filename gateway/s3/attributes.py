"""What a write asks its new version to carry (`storage.attributes.Attributes`), read once
from an S3 request's headers or a POST upload's fields: content type, user metadata, the
stored headers, tags, canned ACL and lock."""

from __future__ import annotations

import json
from collections.abc import Mapping

from storage.attributes import Attributes

from .call import S3Call
from .errors import S3Error
from .locking import write_lock
from .permissions import write_acl
from .touches import ACL

DEFAULT_TYPE = "binary/octet-stream"
MAX_METADATA_BYTES = 2048


async def written(
    call: S3Call, source: Mapping[str, str], tags: str | None, form: bool = False
) -> Attributes:
    """The attributes a PutObject, CreateMultipartUpload or CopyObject (REPLACE) asks for
    in its headers, or a POST upload (`form`) in its fields; `tags` as the caller read
    them (a header, or a POST's XML field), decided already."""
    if form:
        acl = await write_acl(call, {ACL: source["acl"]} if "acl" in source else {})
        lock = await write_lock(call, source)
    else:
        acl, lock = await write_acl(call), await write_lock(call)
    return Attributes(
        content_type=source.get("content-type") or DEFAULT_TYPE,
        metadata=user_metadata(source),
        headers=stored_headers(source),
        tags=tags,
        acl=acl,
        lock=lock,
    )


def _meta_value(raw: str) -> str:
    """A metadata value as sent: HTTP header bytes (read as Latin-1) that are UTF-8 text."""
    if raw.isascii():
        return raw
    try:
        sent = raw.encode("latin-1")
    except UnicodeEncodeError:
        return raw  # text already (a POST form's field)
    try:
        return sent.decode("utf-8")
    except UnicodeError:
        raise S3Error("InvalidArgument", "metadata values must be UTF-8 text") from None


def user_metadata(headers: Mapping[str, str]) -> str | None:
    values = {
        name[11:]: _meta_value(value)
        for name, value in headers.items()
        if name.startswith("x-amz-meta-")
    }
    if sum(len(k) + len(v.encode()) for k, v in values.items()) > MAX_METADATA_BYTES:
        raise S3Error(
            "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size."
        )
    return json.dumps(values, sort_keys=True) if values else None


STORED_HEADERS = {
    "cache-control": "Cache-Control",
    "expires": "Expires",
    "content-disposition": "Content-Disposition",
    "content-encoding": "Content-Encoding",
    "content-language": "Content-Language",
}
"""Headers a write stores with the object and every GET/HEAD returns, as S3 keeps them."""


def stored_headers(headers: Mapping[str, str]) -> str | None:
    """The headers to store with a write, as JSON (None: none). `aws-chunked`, the transfer
    encoding of a signed stream, is not the content's and is not kept (as on S3)."""
    found = {}
    for name, canonical in STORED_HEADERS.items():
        value = headers.get(name)
        if name == "content-encoding" and value is not None:
            codings = [c.strip() for c in value.split(",") if c.strip().lower() != "aws-chunked"]
            value = ", ".join(c for c in codings if c) or None
        if value is not None:
            found[canonical] = header_value(value, canonical)
    return json.dumps(found, sort_keys=True) if found else None


def header_value(value: str, parameter: str) -> str:
    if not value.isprintable() or not all(ord(c) < 256 for c in value):
        raise S3Error("InvalidArgument", f"{parameter} must be printable Latin-1 text")
    return value
