"""Files reached without an API key on /v1: downloads from public buckets, and signed URLs.

A signed URL is the file's own URL with `?token=`: the token names the key that signed it,
the bucket, the file, the method and the moment it ends, and is an HMAC-SHA256 of those
under a key only the server can derive (`Keys.signing_secret`: the data dir's sealing key
and the signing key's hash). Verifying looks the key up, so a revoked or
expired key's URLs stop working on every gateway at once, and a URL works only for what the
key could still do itself. A request with a valid token acts as its signer confined to that
one file, method and current version, and is decided as the signer's own request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import replace
from urllib.parse import quote

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api.access import also
from gateway.api.touches import VERSION_ID
from gateway.context import context
from gateway.http.anonymous import AnonymousLimit
from gateway.http.auth import MISSING, Principal, principal_of
from gateway.http.envelope import ok
from gateway.http.errors import ApiError
from gateway.http.inputs import file_key, read_json
from storage.models import Bucket
from storage.rules.clock import unix_to_iso


class Token(msgspec.Struct, array_like=True, frozen=True):
    key_id: str
    bucket_id: str
    file_key: str
    method: str
    expires: int
    upsert: bool


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))


def _mac(secret: bytes, payload: bytes) -> bytes:
    return hmac.new(secret, payload, hashlib.sha256).digest()


def encode_token(token: Token, secret: bytes) -> str:
    payload = msgspec.json.encode(token)
    return _b64(payload) + "." + _b64(_mac(secret, payload))


def _invalid(message: str = "the signed URL is not valid") -> ApiError:
    return ApiError(401, "invalid_signature", message)


def decode_token(text: str) -> tuple[Token, bytes, bytes]:
    """(token, payload, signature) as sent; not yet verified."""
    try:
        payload_text, _, signature_text = text.partition(".")
        payload, signature = _unb64(payload_text), _unb64(signature_text)
        return msgspec.json.decode(payload, type=Token), payload, signature
    except (ValueError, binascii.Error, msgspec.DecodeError, UnicodeEncodeError):
        raise _invalid() from None


async def sign_file(request: Request, principal: Principal) -> Response:
    """POST /v1/buckets/{id}/sign/{key}: a signed URL of one file. The action comes before
    the key (as in Supabase's /object/sign/), so that every key, one ending in /sign too,
    stays a file's path."""
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.SignFile)
    bucket_id, key = request.path_params["bucket_id"], file_key(request)
    actor = await also(request, "s3:PutObject" if body.upload else "s3:GetObject", key)
    if not body.upload:
        await ctx.engine.files.get(actor, bucket_id, key)
    found = await ctx.engine.keys.signing_secret(principal.key.id)
    if found is None:
        raise _invalid("the key is gone")
    expires = int(ctx.engine.clock.time()) + body.expires_in
    if principal.key.expires_at is not None:
        expires = min(expires, principal.key.expires_at)
    method = "PUT" if body.upload else "GET"
    token = Token(principal.key.id, bucket_id, key, method, expires, body.upsert)
    path = f"/v1/buckets/{bucket_id}/files/{quote(key, safe='/')}"
    url = f"{str(request.base_url).rstrip('/')}{path}?token={encode_token(token, found[1])}"
    return ok(shapes.SignedUrl(url=url, method=method, key=key, expires_at=unix_to_iso(expires)))


async def guest(request: Request) -> Principal | None:
    """Who a request without an API key acts as on a file path: the signer of its token, or
    nobody (None), whom the access decision then grants what the bucket grants anyone."""
    if request.scope["state"].get("auth_failure", MISSING) is not MISSING:
        return principal_of(request)  # a key was sent, and it is not valid
    token_text = request.query_params.get("token")
    if token_text is not None:
        try:
            return await _signed(request, token_text)
        except ApiError:
            await _count_failure(request)
            raise
    return None


async def _count_failure(request: Request) -> None:
    """A token that fails is a signature that fails: counted at the server's rate for
    requests without a key (429 past it), as a bad key is, though the guard had counted
    the request at its bucket's (as one carrying none), which may be no limit at all."""
    anonymous: AnonymousLimit = request.app.state.anonymous
    client = request.client
    now = context(request).engine.clock.time()
    decision = await anonymous.hit(client.host if client else None, now)
    if decision is not None and not decision.allowed:
        raise ApiError(
            429,
            "rate_limited",
            f"rate limit of {decision.limit} requests per minute without a key, per client "
            f"address, exceeded; retry in {decision.retry_after} seconds",
            decision.headers(),
        )


async def _signed(request: Request, text: str) -> Principal:
    token, payload, signature = decode_token(text)
    engine = context(request).engine
    found = await engine.keys.signing_secret(token.key_id)
    if found is None or not hmac.compare_digest(_mac(found[1], payload), signature):
        raise _invalid()
    key = found[0]
    now = engine.clock.time()
    if now >= token.expires:
        raise _invalid("the signed URL has expired")
    if token.expires > now + shapes.MAX_SIGNED_SECONDS:
        raise _invalid("the signed URL lasts longer than a signed URL can")
    if key.revoked_at is not None or (key.expires_at is not None and now >= key.expires_at):
        raise _invalid("the key that signed the URL is no longer valid")
    method = "GET" if request.method == "HEAD" else request.method
    if (
        method != token.method
        or request.path_params["bucket_id"] != token.bucket_id
        or file_key(request) != token.file_key
        or VERSION_ID in request.query_params
    ):
        raise _invalid("the signed URL is for another file or method")
    scope = "files:write" if token.method == "PUT" else "files:read"
    if scope not in key.scopes or key.bucket_id not in (None, token.bucket_id):
        raise _invalid("the key that signed the URL can no longer do this")
    request.scope["state"]["signed_upsert"] = token.upsert
    confined = replace(key, scopes=(scope,), bucket_id=token.bucket_id)
    return Principal(confined, await engine.orgs.get(key.org_id))


def public_headers(request: Request) -> dict[str, str]:
    """Cache-Control of a public bucket's download (none for other reads)."""
    bucket: Bucket | None = request.scope["state"].get("public_bucket")
    if bucket is None or bucket.cache_control is None:
        return {}
    return {"Cache-Control": bucket.cache_control}
