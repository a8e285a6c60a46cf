"""S3 POST Object: a browser's form upload to a bucket. Its credentials are in the form (a
SigV4-signed POST policy), or absent for a bucket that lets anyone write; `read_form`
reads them before the request is authorized, `post_object` then streams the file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from urllib.parse import quote, urlencode, urlsplit

from starlette.responses import Response

from gateway.http.forms import FormError, FormReader, PostForm, boundary_of
from storage.encryption import SSE_C
from storage.models import WriteOptions
from storage.rules import events
from storage.rules.tags import MAX_OBJECT_TAGS, check_tags, encode_tags

from . import post_policy, xml
from .access import also, body_context
from .attributes import written
from .call import S3Call
from .customer_keys import answer_headers, write_key
from .errors import S3Error
from .objects import asked_encryption, checksum_headers, encryption_headers
from .payload import Payload
from .refusals import check_form, inputs_of
from .sigv4 import SignatureError
from .tagging import tag_set
from .touches import declared

STATUSES = {"200": 200, "201": 201, "204": 204}
CHECKSUM = "x-amz-checksum-"


def form_error(exc: FormError) -> S3Error:
    if exc.too_large:
        return S3Error(
            "MaxPostPreDataLengthExceeded",
            "Your POST request fields preceding the upload file were too large.",
        )
    return S3Error(
        "MalformedPOSTRequest",
        f"The body of your POST request is not well-formed multipart/form-data: {exc}.",
    )


async def read_form(call: S3Call) -> None:
    """Read the fields before the file; verify the signed policy (setting the request's
    principal and key) or, without one, leave the request anonymous. The request was
    counted as one without credentials (at its bucket's rate, maybe none): a signature that
    fails is counted at the server's rate too, as a failed Authorization header is."""
    try:
        reader = FormReader(
            call.request.stream(), boundary_of(call.request.headers.get("content-type"))
        )
        fields, part = await reader.fields()
    except FormError as exc:
        raise form_error(exc) from None
    if "key" in fields:  # the policy judges the key the object gets, as S3's does
        fields["key"] = fields["key"].replace("${filename}", part.filename)
    form = PostForm(reader, fields, part)
    endpoint = call.request.app.state.endpoint
    try:
        principal = await endpoint.authenticator.authenticate_form(fields)
    except SignatureError:
        await endpoint.count_failed_signature(call.request)  # SlowDown past the server's rate
        raise
    if principal is not None:
        assert call.bucket is not None
        document = post_policy.decode(fields.get("policy", ""))
        form.size = post_policy.check(
            document, fields, call.bucket, endpoint.engine.clock.datetime(), datetime.now(UTC)
        )
        call.principal = principal
    key = fields.get("key")
    if not key:
        raise S3Error("InvalidArgument", "Bucket POST must contain a field named 'key'.")
    call.key = key
    call.form = form


async def _sized(
    chunks: AsyncIterator[bytes], size: tuple[int, int] | None
) -> AsyncIterator[bytes]:
    """The file's bytes, refused past the policy's content-length-range."""
    total = 0
    try:
        async for chunk in chunks:
            total += len(chunk)
            if size is not None and total > size[1]:
                raise S3Error(
                    "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size"
                )
            yield chunk
    except FormError as exc:
        raise form_error(exc) from None
    if size is not None and total < size[0]:
        raise S3Error(
            "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
        )


def _redirect(fields: dict[str, str]) -> str | None:
    """Where a POST upload redirects its browser: an http(s) URL, percent-encoded to the
    ASCII a header holds; InvalidArgument, before anything is stored, for one with
    control characters."""
    raw = fields.get("success_action_redirect") or fields.get("redirect")
    if not raw:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise S3Error("InvalidArgument", "success_action_redirect holds control characters")
    url = quote(raw, safe="%:/?#[]@!$&'()*+,;=~")
    return url if urlsplit(url).scheme in ("http", "https") else None


async def post_object(call: S3Call) -> Response:
    form = call.form
    assert form is not None and call.key is not None
    fields = form.fields
    check_form(fields)
    redirect = _redirect(fields)
    given = write_key(fields)  # SSE-C: the form's fields, as a PUT's headers
    bucket = await call.target_bucket()
    tags, pairs = None, []
    declared(call, "tagging")
    if "tagging" in fields:
        try:
            document = xml.parse(fields["tagging"].encode())
        except xml.MalformedXML:
            raise S3Error("MalformedXML", "The tagging field is not well-formed XML.") from None
        inputs_of(("PutObjectTagging",)).check_body(document)
        pairs = tag_set(document)
        tags = encode_tags(check_tags(pairs, MAX_OBJECT_TAGS))
        if tags:
            await also(call, "s3:PutObjectTagging", call.key, context=body_context(tags=pairs))
    # Decided again with the form's fields as the condition keys its headers would be.
    await also(call, "s3:PutObject", call.key, context=body_context(fields, pairs))
    attrs = await written(call, fields, tags, form=True)
    if not fields.get("content-type") and form.file.content_type:
        attrs = replace(attrs, content_type=form.file.content_type)
    # A checksum field is verified over the file as a PUT's header is (BadDigest, nothing
    # stored), and kept; like every field, a signed form's policy must cover it.
    claimed = {name: value for name, value in fields.items() if name.startswith(CHECKSUM)}
    checked = Payload(claimed, None, None)
    record = await call.engine.files.put(
        call.actor,
        bucket.id,
        call.key,
        attrs,
        checked.chunks(_sized(form.reader.file(), form.size)),
        None,
        call.deadline,
        WriteOptions(
            md5=True,
            checksum=checked.checksum_json,
            event=events.POST,
            encryption=asked_encryption(fields) if given is None else SSE_C,
            customer_key=None if given is None else given.key,
        ),
    )
    etag = f'"{record.md5}"'
    if redirect is not None:
        query = urlencode({"bucket": bucket.name, "key": record.key, "etag": etag})
        separator = "&" if urlsplit(redirect).query else "?"
        return Response(b"", 303, {"Location": redirect + separator + query, "ETag": etag})
    status = STATUSES.get(fields.get("success_action_status", ""), 204)
    path = quote(f"{bucket.name}/{record.key}", safe="/")  # a header is Latin-1 at most
    location = f"{str(call.request.base_url).rstrip('/')}/{path}"
    answer = {"ETag": etag, "Location": location, **encryption_headers(record)}
    answer |= checksum_headers(checked.checksum)
    answer |= answer_headers(record, given)
    if status != 201:
        return Response(b"", status, answer)
    body = [("Location", location), ("Bucket", bucket.name), ("Key", record.key), ("ETag", etag)]
    # No namespace on PostResponse, as S3 writes it: clients find its elements unqualified.
    answered = xml.render("PostResponse", body, namespace=False)
    return Response(answered, 201, answer, media_type="application/xml")
