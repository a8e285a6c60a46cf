"""Who sent an S3 request: SigV4 or SigV2, in the Authorization header or a presigned URL."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import unquote_to_bytes

from starlette.requests import Request

from gateway.http.generation import Generation
from gateway.http.key_cache import KeyCache
from storage.engine import Engine
from storage.models import Actor, ApiKey, Organization
from storage.rules.validation import default_region

from . import sigv2, sigv4
from .errors import S3Error
from .sigv4 import SignatureError


@dataclass(frozen=True)
class S3Principal:
    key: ApiKey
    org: Organization
    signed: sigv4.Signed
    signing_key: bytes

    @property
    def actor(self) -> Actor:
        return Actor(org_id=self.key.org_id, bucket_id=self.key.bucket_id)


def query_params(raw_query: str) -> dict[str, str]:
    """The query as S3 reads it: percent-decoded once, '+' kept, valueless names as ''.
    A name or value that is not UTF-8 once decoded is refused, never patched with U+FFFD."""
    params = {}
    try:
        for item in raw_query.split("&") if raw_query else []:
            name, _, value = item.partition("=")
            params[_decode(name)] = _decode(value)
    except UnicodeDecodeError:
        raise S3Error(
            "InvalidArgument", "the query string is not valid UTF-8 once percent-decoded"
        ) from None
    return params


def _decode(text: str) -> str:
    return unquote_to_bytes(text).decode("utf-8")


class S3Authenticator:
    """Verifies signatures; secrets of recently used keys are cached (`key_cache.py`)."""

    def __init__(
        self,
        engine: Engine,
        cache_seconds: float,
        revocations: Generation | None = None,
        domain: str = "",
    ) -> None:
        """`domain`: settings.s3_domain, whose subdomains name buckets (SigV2 signs the
        bucket such a Host names as the start of the resource)."""
        self._engine = engine
        self._domain = domain.lower()
        self._cache: KeyCache[tuple[ApiKey, str, Organization]] = KeyCache(
            cache_seconds, revocations
        )
        self._regions = engine.config.regions
        self._default_region = default_region(engine.config.regions)
        engine.keys.watch_revocations(self._cache.forget)

    async def _credential(self, access_key_id: str) -> tuple[ApiKey, str, Organization]:
        cached = self._cache.get(access_key_id)
        if cached is not None:
            key, secret, org = cached
        else:
            generation = self._cache.generation()
            found = await self._engine.keys.find_s3(access_key_id)
            if found is None:
                raise SignatureError(
                    "InvalidAccessKeyId",
                    "The AWS Access Key Id you provided does not exist in our records.",
                )
            key, secret = found
            org = await self._engine.orgs.get(key.org_id)
            self._cache.put(access_key_id, key.id, (key, secret, org), generation)
        if key.revoked_at is not None or (
            key.expires_at is not None and self._engine.clock.time() >= key.expires_at
        ):
            raise SignatureError(
                "InvalidAccessKeyId",
                "The AWS Access Key Id you provided does not exist in our records.",
            )
        return key, secret, org

    async def authenticate(self, request: Request) -> S3Principal | None:
        """The request's verified credentials; None when it carries none (anonymous)."""
        raw_query = request.scope.get("query_string", b"").decode("latin-1")
        params = query_params(raw_query)
        authorization = request.headers.get("authorization")
        if "AWSAccessKeyId" in params or (authorization or "").startswith("AWS "):
            return await self._authenticate_v2(request, params, raw_query, authorization)
        if "X-Amz-Algorithm" in params:
            signed = sigv4.parse_query(params)
        else:
            if authorization is None:
                return None
            signed = sigv4.parse_header(
                authorization,
                request.headers.get("x-amz-date"),
                request.headers.get("x-amz-content-sha256"),
            )
        sigv4.check_scope(signed, self._regions, self._default_region)
        sigv4.check_time(signed, self._engine.clock.datetime(), datetime.now(UTC))
        key, secret, org = await self._credential(signed.credential.access_key_id)
        signing_key = sigv4.signing_key(secret, signed.credential)
        raw_path, headers = _path_and_headers(request)
        canonical = sigv4.canonical_request(
            request.method,
            raw_path,
            raw_query,
            headers,
            signed.signed_headers,
            signed.payload,
            signed.presigned,
        )
        expected = sigv4.sign(
            signing_key, sigv4.string_to_sign(signed.amz_date, signed.credential.scope, canonical)
        )
        if not sigv4.same(expected, signed.signature):
            raise SignatureError(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided. "
                "Check your key and signing method.",
            )
        unsigned = sigv4.unsigned_amz_headers(headers, signed.signed_headers)
        if unsigned:
            raise SignatureError(
                "AccessDenied",
                f"There were headers present in the request which were not signed: {unsigned[0]}",
            )
        return S3Principal(key, org, signed, signing_key)

    async def authenticate_form(self, fields: dict[str, str]) -> S3Principal | None:
        """The signer of a POST form's policy (the signature is an HMAC of the policy: under
        the SigV4 signing key, or SigV2's HMAC-SHA1 under the secret); None for a form that
        carries no credentials."""
        if not {"policy", "x-amz-signature", "x-amz-credential", "awsaccesskeyid"} & set(fields):
            return None
        if "awsaccesskeyid" in fields:
            return await self._form_v2(fields)
        if fields.get("x-amz-algorithm") != sigv4.ALGORITHM:
            raise S3Error("InvalidArgument", f"x-amz-algorithm must be {sigv4.ALGORITHM}")
        for name in ("policy", "x-amz-signature", "x-amz-credential", "x-amz-date"):
            if name not in fields:
                raise S3Error(
                    "InvalidArgument", f"Bucket POST must contain a field named '{name}'."
                )
        credential = sigv4.parse_credential(fields["x-amz-credential"])
        if not sigv4.AMZ_DATE.fullmatch(fields["x-amz-date"]):
            raise S3Error(
                "InvalidArgument", "X-Amz-Date must be in the ISO8601 Long Format: YYYYMMDDTHHMMSSZ"
            )
        signed = sigv4.Signed(
            credential, fields["x-amz-date"], (), fields["x-amz-signature"], sigv4.UNSIGNED
        )
        sigv4.check_scope(signed, self._regions, self._default_region)
        key, secret, org = await self._credential(credential.access_key_id)
        signing_key = sigv4.signing_key(secret, credential)
        if not sigv4.same(sigv4.sign(signing_key, fields["policy"]), signed.signature):
            raise SignatureError(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided.",
                403,
            )
        return S3Principal(key, org, signed, signing_key)

    async def _form_v2(self, fields: dict[str, str]) -> S3Principal:
        for name in ("policy", "signature"):
            if name not in fields:
                raise S3Error(
                    "InvalidArgument", f"Bucket POST must contain a field named '{name}'."
                )
        key, secret, org = await self._credential(fields["awsaccesskeyid"])
        if not sigv4.same(sigv2.sign(secret, fields["policy"]), fields["signature"]):
            raise SignatureError(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided.",
            )
        credential = sigv4.Credential(fields["awsaccesskeyid"], "", "", "s3")
        return S3Principal(key, org, sigv4.Signed(credential, "", (), "", sigv4.UNSIGNED), b"")

    async def _authenticate_v2(
        self, request: Request, params: dict[str, str], raw_query: str, authorization: str | None
    ) -> S3Principal:
        """SigV2: a presigned URL (`AWSAccessKeyId`, `Expires`, `Signature`) or the header
        `Authorization: AWS id:signature`, dated by `Date` or `x-amz-date` (then the date
        line is empty, as AWS documents, or Date's, as botocore signs it: x-amz-date itself
        is signed among the x-amz- headers either way)."""
        now = self._engine.clock.time()  # expiry by the server's clock; skew by the wall's
        if "AWSAccessKeyId" in params:
            access_key_id, given = params["AWSAccessKeyId"], params.get("Signature", "")
            sigv2.check_expiry(params.get("Expires", ""), now, time.time())
            dates = [params["Expires"]]
        else:
            access_key_id, colon, given = (authorization or "")[4:].strip().partition(":")
            if not (colon and access_key_id and given):
                raise SignatureError(
                    "InvalidArgument",
                    "AWS authorization header is invalid.  Expected AwsAccessKeyId:signature",
                    400,
                )
            if "x-amz-date" in request.headers:
                sigv2.check_date(request.headers["x-amz-date"], time.time())
                dates = ["", request.headers.get("date", "")]  # botocore signs Date's line
            else:
                dates = [sigv2.check_date(request.headers.get("date"), time.time())]
        key, secret, org = await self._credential(access_key_id)
        raw_path, headers = _path_and_headers(request)
        headers += _amz_query(params, headers)
        host_bucket = self._host_bucket(request)
        paths = [raw_path]
        if host_bucket is None and (slashed := sigv2.bucket_slash(raw_path)) is not None:
            paths.append(slashed)
        signed_names: list[Collection[str]] = [sigv2.FULL]
        if "AWSAccessKeyId" not in params and sigv2.OPERATION_FLAGS.intersection(params):
            signed_names.append(sigv2.SUBRESOURCES)
        texts = (
            sigv2.string_to_sign(request.method, headers, date, path, raw_query, host_bucket, names)
            for date in dict.fromkeys(dates)
            for path in paths
            for names in signed_names
        )
        if not any(sigv4.same(sigv2.sign(secret, text), given) for text in texts):
            raise SignatureError(
                "SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided.",
            )
        credential = sigv4.Credential(access_key_id, "", "", "s3")
        signed = sigv4.Signed(credential, "", (), given, sigv4.UNSIGNED)
        return S3Principal(key, org, signed, b"")

    def _host_bucket(self, request: Request) -> str | None:
        """The bucket a virtual-host-style request's Host names (as `app._target` reads it)."""
        host = request.headers.get("host", "").rsplit(":", 1)[0].lower()
        if self._domain and host.endswith("." + self._domain):
            return host[: -len(self._domain) - 1]
        return None


def _path_and_headers(request: Request) -> tuple[str, list[tuple[str, str]]]:
    """The raw path and the headers as the client signed them (`sigv4.as_sent`)."""
    raw_path = sigv4.as_sent(request.scope.get("raw_path") or request.scope["path"].encode())
    headers = [(k.decode("latin-1"), sigv4.as_sent(v)) for k, v in request.scope["headers"]]
    return raw_path, headers


def _amz_query(params: dict[str, str], headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The request's x-amz- query parameters that no header gives: `app._hoisted` makes
    them headers, and botocore's SigV2 presigner signs them as the x-amz- headers they
    stand for, so the signature covers them; else whoever holds a URL could add one (an
    ACL, metadata, a copy source, an SSE-C key) and have it honoured."""
    sent = {name.lower() for name, _ in headers}
    return [
        (name.lower(), value)
        for name, value in params.items()
        if name.lower().startswith("x-amz-") and name.lower() not in sent
    ]
