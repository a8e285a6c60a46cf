"""File endpoints: /v1/buckets/{bucket_id}/files[/{key}]."""

from __future__ import annotations

import email.utils
import json
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api import touches
from gateway.api.access import also, visible
from gateway.api.pagination import decode_cursor, encode_cursor, parse_limit
from gateway.api.resources import file_shape
from gateway.api.sharing import public_headers
from gateway.api.touches import read
from gateway.api.versions import bypasses_governance
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.conditions import write_condition
from gateway.http.content import content_response, http_date, safe_content_headers
from gateway.http.envelope import created, ok, page, written
from gateway.http.errors import bad_request
from gateway.http.forms import FormError, FormReader, boundary_of
from gateway.http.inputs import file_key, flag, parse_flag, read_json, text_param, version_param
from gateway.http.ranges import parse_range
from storage.attributes import Attributes
from storage.errors import FileNotFound
from storage.models import Condition, DeleteCondition, FileRecord, WriteOptions
from storage.rules.clock import iso_to_unix
from storage.rules.etags import etag_matches
from storage.rules.tags import MAX_OBJECT_TAGS, check_tags, encode_tags

MAX_DELIMITER_BYTES = 16


async def list_files(request: Request, principal: Principal) -> Response:
    bucket_id = request.path_params["bucket_id"]
    limit = parse_limit(request.query_params)
    prefix = text_param(request, "prefix")
    delimiter = text_param(request, "delimiter", MAX_DELIMITER_BYTES)
    after = None
    cursor = request.query_params.get("cursor")
    if cursor:
        prefix, delimiter, after = _resume(request, cursor, bucket_id, prefix, delimiter)
    result = await context(request).engine.files.list(
        principal.actor, bucket_id, prefix, delimiter, after, limit
    )
    next_cursor = None
    if result.last is not None:
        next_cursor = encode_cursor(
            {
                "list": "files",
                "bucket": bucket_id,
                "prefix": prefix,
                "delimiter": delimiter,
                "after": result.last,
            }
        )
    return page(
        [file_shape(visible(request, record)) for record in result.items],
        next_cursor,
        {"prefixes": result.prefixes},
        top_level_has_more=True,
    )


def _resume(
    request: Request, cursor: str, bucket_id: str, prefix: str, delimiter: str
) -> tuple[str, str, str]:
    """(prefix, delimiter, after) from a cursor; a cursor of another listing is a 400."""
    fields = decode_cursor(cursor, "files")
    cursor_prefix, cursor_delimiter = fields.get("prefix"), fields.get("delimiter")
    if (
        fields.get("bucket") != bucket_id
        or not isinstance(cursor_prefix, str)
        or not isinstance(cursor_delimiter, str)
        or ("prefix" in request.query_params and prefix != cursor_prefix)
        or ("delimiter" in request.query_params and delimiter != cursor_delimiter)
    ):
        raise bad_request("the cursor is not a cursor of this list", "invalid_cursor")
    return cursor_prefix, cursor_delimiter, fields["after"]


def _content_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        raise bad_request("Content-Length must be a non-negative integer")
    return int(raw)


async def _body(request: Request) -> AsyncIterator[bytes]:
    async for chunk in request.stream():
        if chunk:
            yield chunk


def _write_options(request: Request) -> WriteOptions:
    """A conditional upload: `If-None-Match: *` (only if no file is at the key) and/or
    `If-Match: "<etag>"` (only over that content)."""
    headers = request.headers
    try:
        condition = write_condition(headers.get("if-none-match"), headers.get("if-match"))
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    if request.scope["state"].get("signed_upsert") is False:  # a signed upload that only creates
        condition = Condition(if_none_match_any=True)
    return WriteOptions(condition=condition)


async def _tags(request: Request, key: str) -> str | None:
    """An upload's tags: `Tagging: k=v&k2=v2` (URL-encoded, as S3's x-amz-tagging)."""
    raw = read(request, "tagging")
    tags = None
    if raw is not None:
        tags = encode_tags(check_tags(parse_qsl(raw, keep_blank_values=True), MAX_OBJECT_TAGS))
        if tags:
            await also(request, "s3:PutObjectTagging", key)
    return tags


FORM_FIELDS = frozenset({"cachecontrol"})
"""Fields a form upload may hold before its file: `cacheControl`, which Supabase's client
always sends, becomes the file's Cache-Control (`_cache_control`). Any other is refused
rather than ignored."""


def _cache_control(value: str) -> str:
    """A form's `cacheControl` as the file's stored Cache-Control: seconds as Supabase
    Storage reads them (`3600`: `max-age=3600`), else the header's own text."""
    value = value.strip()
    if not value.isprintable() or not value.isascii():
        raise bad_request("cacheControl must be printable ASCII")
    return f"max-age={value}" if value.isdigit() else value


async def _form(request: Request) -> tuple[str | None, AsyncIterator[bytes], str | None]:
    """A `multipart/form-data` upload (a browser's FormData, `curl -F file=@x`): the type
    and the streamed bytes of its file, the field named `file` or else the first part with
    a file name, and the file's stored headers (from `cacheControl`)."""
    try:
        reader = FormReader(_body(request), boundary_of(request.headers["content-type"]), True)
        fields, part = await reader.fields()
    except FormError as exc:
        raise _form_error(exc) from None
    unknown = sorted(set(fields) - FORM_FIELDS)
    if unknown:
        raise bad_request(f"a form upload holds only its file (and cacheControl), not {unknown}")

    async def content() -> AsyncIterator[bytes]:
        try:
            async for chunk in reader.file():
                yield chunk
        except FormError as exc:
            raise _form_error(exc) from None

    cache = fields.get("cachecontrol")
    headers = None if not cache else json.dumps({"Cache-Control": _cache_control(cache)})
    return part.content_type, content(), headers


def _form_error(exc: FormError) -> Exception:
    return bad_request(f"the body is not multipart/form-data holding a file: {exc}")


async def put_file(request: Request, principal: Principal) -> Response:
    """The body is the file, or a form holding it (`_form`)."""
    ctx = context(request)
    key = file_key(request)
    started: float = request.scope["state"]["started"]
    content_type = request.headers.get("content-type")
    length = _content_length(request)
    body = _body(request)
    options = _write_options(request)
    tags = await _tags(request, key)
    headers = None
    if content_type is not None and content_type.lower().startswith("multipart/form-data"):
        content_type, body, headers = await _form(request)
        length = None
    record = await ctx.engine.files.put(
        principal.actor,
        request.path_params["bucket_id"],
        key,
        Attributes(content_type or "", headers=headers, tags=tags),
        body,
        length,
        deadline=started + ctx.settings.uploads.deadline_seconds,
        options=options,
    )
    return created(file_shape(record))


def _not_modified(request: Request, record: FileRecord) -> bool:
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        return etag_matches(if_none_match, (record.etag,), weak=True)
    if_modified_since = request.headers.get("if-modified-since")
    if if_modified_since is not None:
        try:
            since = email.utils.parsedate_to_datetime(if_modified_since)
        except (TypeError, ValueError):
            return False
        return since.tzinfo is not None and iso_to_unix(record.uploaded_at) <= since.timestamp()
    return False


def _own_cache_control(record: FileRecord) -> dict[str, str]:
    """The Cache-Control stored with the file (a form's `cacheControl`, an S3 PUT's header),
    which wins over the public bucket's."""
    cache = json.loads(record.headers).get("Cache-Control") if record.headers else None
    return {"Cache-Control": cache} if cache else {}


def _range_applies(request: Request, record: FileRecord) -> bool:
    if "range" not in request.headers:
        return False
    if_range = request.headers.get("if-range")
    return if_range is None or if_range.strip() in (record.etag, http_date(record.uploaded_at))


async def get_file(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    bucket_id = request.path_params["bucket_id"]
    key = file_key(request)
    named, version_id = version_param(request)

    async def lookup() -> FileRecord:
        if named:
            return await engine.files.get_version(principal.actor, bucket_id, key, version_id)
        return await engine.files.get(principal.actor, bucket_id, key)

    if flag(request, "metadata"):
        return ok(file_shape(visible(request, await lookup(), named)))
    rereads = engine.files.rereads()
    for _ in rereads.attempts():
        record = await lookup()
        engine.files.sealed.check(record, None)  # SSE-C: no HEAD, 304 or body without a key
        headers = {
            "ETag": record.etag,
            "Last-Modified": http_date(record.uploaded_at),
            "Accept-Ranges": "bytes",
        }
        if record.version_id is not None:
            headers["X-Version-Id"] = record.version_id
        if _not_modified(request, record):
            return Response(status_code=304, headers=headers)
        start, end, status = 0, record.size, 200
        if _range_applies(request, record):
            start, end = parse_range(request.headers["range"], record.size)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{record.size}"
        headers.update(safe_content_headers(record.content_type))
        headers.update(public_headers(request))
        headers.update(_own_cache_control(record))
        headers["Content-Length"] = str(end - start)
        if request.method == "HEAD":
            return Response(status_code=status, headers=headers)
        try:
            body = await engine.files.open(record, start, end)
        except FileNotFound:
            if await rereads.raced(record):
                continue  # replaced between the lookup and the open: look it up again
            raise
        return await content_response(body, end - start, status, headers)
    raise rereads.exhausted(key)


async def update_file(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    key = file_key(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.UpdateFile)
    bucket_id = request.path_params["bucket_id"]
    files = ctx.engine.files
    if body.key is not None and body.key != key:  # a rename reads, deletes and writes
        await also(request, "s3:GetObject", key)
        await also(request, "s3:DeleteObject", key)
        await also(request, "s3:PutObject", body.key)
        moved = await files.get(principal.actor, bucket_id, key)
        if moved.tags and body.tags is None:  # its tags go along, as a copy's (COPY) do
            await also(request, "s3:GetObjectTagging", key)
            await also(request, "s3:PutObjectTagging", body.key)
    if body.tags is not None:
        await also(request, "s3:PutObjectTagging", body.key or key)
    record = await files.update(principal.actor, bucket_id, key, body.key, body.content_type)
    if body.tags is not None:
        pairs = list(body.tags.items()) or None
        await files.set_tags(principal.actor, bucket_id, record.key, None, pairs, current=True)
    return written("file", record.key)


async def delete_file(request: Request, principal: Principal) -> Response:
    """Delete a file (in a versioned bucket: a delete marker), or with `versionId` that
    version for good."""
    key = file_key(request)
    files = context(request).engine.files
    bucket_id = request.path_params["bucket_id"]
    named, version_id = version_param(request)
    if_match = request.headers.get("if-match")
    if named and if_match is not None:
        raise bad_request("If-Match applies to a file's current version, not to versionId")
    if named:
        asked = parse_flag(read(request, "bypass"), touches.BYPASS)
        bypass = await bypasses_governance(request, asked, key, version_id)
        gone = await files.delete_version(principal.actor, bucket_id, key, version_id, bypass)
        return written("file_version", gone.s3_version_id)
    condition = None if if_match is None else DeleteCondition(if_match=if_match)
    await files.delete(principal.actor, bucket_id, key, condition=condition)
    return written("file", key)
