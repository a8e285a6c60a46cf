"""API key authentication and scope checks.

A request's key is resolved once, by the guard middleware, into a `Principal` or an
`AuthFailure`; endpoints then call `require(request, scope)`. Unknown, revoked and expired
keys fail with the same status, code and message, after the same index lookup.
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass

from starlette.requests import Request

from gateway.http.errors import ApiError
from gateway.http.generation import Generation
from gateway.http.key_cache import KeyCache
from storage.engine import Engine
from storage.models import Actor, ApiKey, Organization
from storage.rules import ids

PUBLIC_READER = "public"
"""The id a request without a key goes by (in logs and metrics) once a bucket grants it."""


@dataclass(frozen=True)
class Principal:
    key: ApiKey
    org: Organization
    acting: Actor | None = None
    """Who the engine acts for, once the access decision (`access.py`) has named it: for
    a request from outside the bucket's organization, that organization, confined to the
    bucket."""

    @property
    def anonymous(self) -> bool:
        """A request without a key: nothing to look up, nothing to revoke."""
        return self.key.id == PUBLIC_READER

    @property
    def actor(self) -> Actor:
        if self.acting is not None:
            return self.acting
        return Actor(org_id=self.key.org_id, bucket_id=self.key.bucket_id)


@dataclass(frozen=True)
class AuthFailure:
    code: str
    message: str


MISSING = AuthFailure(
    "missing_api_key",
    "send an API key as 'Authorization: Bearer <key>' (a first start saves an admin key in "
    "admin.key in the data dir), or S3 credentials as HTTP Basic auth",
)
MALFORMED = AuthFailure(
    "malformed_api_key", "the Authorization header is not a well-formed API key"
)
INVALID = AuthFailure(
    "invalid_api_key",
    "the API key is not valid: unknown, revoked or expired (`bucketd keys create` makes one)",
)


def basic_credentials(header: str | None) -> tuple[str, str] | AuthFailure | None:
    """(access key id, secret) of `Authorization: Basic ...`; None for another scheme."""
    scheme, _, value = (header or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return MALFORMED
    access_key_id, colon, secret = decoded.partition(":")
    if not colon or not access_key_id or not secret:
        return MALFORMED
    return access_key_id, secret


def bearer_token(header: str | None) -> str | AuthFailure:
    if header is None or not header.strip():
        return MISSING
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return MALFORMED
    return token.strip()


class Authenticator:
    """Resolves secrets to principals, with a short cache of verified keys.

    Only valid keys are cached, for `key_cache_seconds`, so a key made by another process works
    on its next request. A key revoked through any gateway over the same PostgreSQL index
    is dropped from every gateway's cache as the revocation commits (LISTEN/NOTIFY); one
    revoked by another process on a SQLite index, within that time.
    """

    def __init__(
        self,
        engine: Engine,
        prefix: str,
        cache_seconds: float,
        revocations: Generation | None = None,
    ) -> None:
        self._engine = engine
        self._prefix = prefix
        self._cache: KeyCache[Principal] = KeyCache(cache_seconds, revocations)

    async def authenticate(self, header: str | None) -> Principal | AuthFailure:
        """A bearer API key, or S3 credentials as HTTP Basic auth (access key id and
        secret: the pair a CI job has, e.g. from BUCKETD_ACCESS_KEY_ID)."""
        basic = basic_credentials(header)
        if isinstance(basic, AuthFailure):
            return basic
        owner: str | None = None
        if basic is not None:
            owner, token = basic
        else:
            bearer = bearer_token(header)
            if isinstance(bearer, AuthFailure):
                return bearer
            if not ids.is_secret_shaped(bearer, self._prefix):
                return MALFORMED
            token = bearer
        digest = ids.hash_secret(token)
        principal = self._cache.get(digest)
        if principal is None:
            generation = self._cache.generation()
            found = await self._engine.keys.find(digest)
            if found is None or not hmac.compare_digest(found[1], digest):
                return INVALID
            key = found[0]
            if key.revoked_at is not None:
                return INVALID
            principal = Principal(key, await self._engine.orgs.get(key.org_id))
            self._cache.put(digest, key.id, principal, generation)
        if owner is not None and principal.key.access_key_id != owner:
            return INVALID
        expires = principal.key.expires_at
        if expires is not None and self._engine.clock.time() >= expires:
            self._cache.drop(digest)
            return INVALID
        return principal

    def forget(self, key_id: str) -> None:
        self._cache.forget(key_id)


def principal_of(request: Request) -> Principal:
    """The request's principal; 401 in the envelope when there is none."""
    found = request.scope.get("state", {}).get("principal")
    if isinstance(found, Principal):
        return found
    failure = request.scope.get("state", {}).get("auth_failure", MISSING)
    raise ApiError(401, failure.code, failure.message, {"WWW-Authenticate": "Bearer"})


def require(request: Request, scope: str | None) -> Principal:
    principal = principal_of(request)
    if scope is not None and scope not in principal.key.scopes:
        raise ApiError(403, "insufficient_scope", f"the API key lacks the {scope} scope")
    return principal
