"""AWS Signature Version 4, as S3 verifies it: headers, presigned URLs, chunk signatures.

Pure functions over strings and bytes; the request plumbing is in `auth.py`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED = "UNSIGNED-PAYLOAD"
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING = (STREAMING_SIGNED, STREAMING_SIGNED_TRAILER, STREAMING_UNSIGNED_TRAILER)
MAX_SKEW_SECONDS = 15 * 60
MAX_PRESIGNED_SECONDS = 7 * 24 * 3600
_CREDENTIAL = re.compile(r"([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request")
_SPACES = re.compile(r"\s+")


class SignatureError(Exception):
    """A request whose signature cannot be accepted; `code` is the S3 error code."""

    def __init__(self, code: str, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Credential:
    access_key_id: str
    date: str
    region: str
    service: str

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


@dataclass(frozen=True)
class Signed:
    """What a request claims: who, when, which headers, the signature, the payload form."""

    credential: Credential
    amz_date: str
    signed_headers: tuple[str, ...]
    signature: str
    payload: str
    presigned: bool = False
    expires: int | None = None


UNSIGNED_REQUEST = Signed(Credential("", "", "", "s3"), "", (), "", UNSIGNED)
"""What a request without credentials claims: nothing, and an unsigned body."""


def parse_credential(value: str) -> Credential:
    match = _CREDENTIAL.fullmatch(value.strip())
    if match is None:
        raise SignatureError(
            "AuthorizationHeaderMalformed", "the Credential is not well formed", 400
        )
    return Credential(*match.groups())


def parse_header(authorization: str, amz_date: str | None, payload: str | None) -> Signed:
    """The parts of `Authorization: AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`."""
    algorithm, _, rest = authorization.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureError("AuthorizationHeaderMalformed", f"only {ALGORITHM} is supported", 400)
    fields = {}
    for part in rest.split(","):
        name, _, value = part.strip().partition("=")
        fields[name] = value
    if not {"Credential", "SignedHeaders", "Signature"} <= set(fields):
        raise SignatureError(
            "AuthorizationHeaderMalformed", "the Authorization header is incomplete", 400
        )
    if amz_date is None:
        raise SignatureError("AccessDenied", "X-Amz-Date is required with SigV4")
    if payload is None:
        raise SignatureError("InvalidRequest", "x-amz-content-sha256 is required with SigV4", 400)
    return Signed(
        parse_credential(fields["Credential"]),
        amz_date,
        tuple(fields["SignedHeaders"].split(";")),
        fields["Signature"],
        payload,
    )


def parse_query(params: dict[str, str]) -> Signed:
    """The parts of a presigned URL's query (X-Amz-Algorithm, -Credential, -Date, …)."""
    if params.get("X-Amz-Algorithm") != ALGORITHM:
        raise SignatureError(
            "AuthorizationQueryParametersError", f"X-Amz-Algorithm must be {ALGORITHM}", 400
        )
    try:
        expires = int(params["X-Amz-Expires"])
        signed = Signed(
            parse_credential(params["X-Amz-Credential"]),
            params["X-Amz-Date"],
            tuple(params["X-Amz-SignedHeaders"].split(";")),
            params["X-Amz-Signature"],
            params.get("X-Amz-Content-Sha256", UNSIGNED),
            presigned=True,
            expires=expires,
        )
    except (KeyError, ValueError):
        raise SignatureError(
            "AuthorizationQueryParametersError", "the presigned URL lacks a SigV4 parameter", 400
        ) from None
    # 403, as S3 answers a URL it will not honour (not 400, the answer to a URL it cannot
    # read): one valid for no time has expired, one past a week or negative is refused.
    if expires == 0:
        raise SignatureError("AccessDenied", "Request has expired")
    if not 0 < expires <= MAX_PRESIGNED_SECONDS:
        raise SignatureError(
            "AuthorizationQueryParametersError",
            "X-Amz-Expires must be non-negative and less than a week (in seconds); that is, "
            f"the given X-Amz-Expires must be less than {MAX_PRESIGNED_SECONDS} seconds",
        )
    return signed


AMZ_DATE = re.compile(r"\d{8}T\d{6}Z", re.ASCII)
"""X-Amz-Date's form (ISO 8601's basic format, in UTC)."""


def parse_amz_date(value: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SignatureError(
            "AccessDenied", "X-Amz-Date is not of the form YYYYMMDDTHHMMSSZ"
        ) from None


def check_scope(signed: Signed, regions: tuple[str, ...] | list[str], default: str) -> None:
    """The credential must be scoped to S3 and to a region this server serves; the answer
    names the region to use, so a wrong AWS_DEFAULT_REGION tells the user what to fix."""
    credential = signed.credential
    code = (
        "AuthorizationQueryParametersError"
        if signed.presigned
        else ("AuthorizationHeaderMalformed")
    )
    if credential.service == "s3express":
        raise SignatureError(
            "NotImplemented",
            "directory buckets (S3 Express One Zone) are not implemented by bucketd",
            501,
        )
    if credential.service != "s3":
        raise SignatureError(
            code, f"the service '{credential.service}' is wrong; expecting 's3'", 400
        )
    if credential.region not in regions:
        raise SignatureError(
            code,
            f"the region '{credential.region}' is wrong; expecting '{default}' "
            f"(this server serves {', '.join(regions)})",
            400,
        )


def check_time(signed: Signed, now: datetime, wall: datetime | None = None) -> None:
    """A presigned URL's expiry against `now` (the server's clock, which test mode moves);
    a signature's skew against `wall` (the system's time, by default `now`): clients sign
    with their own clock, which a test does not move."""
    wall = now if wall is None else wall
    moment = parse_amz_date(signed.amz_date)
    if signed.credential.date != signed.amz_date[:8]:
        raise SignatureError("SignatureDoesNotMatch", "the credential's date is not the request's")
    if signed.presigned:
        assert signed.expires is not None
        if (now - moment).total_seconds() > signed.expires:
            raise SignatureError("AccessDenied", "Request has expired")
        if (moment - wall).total_seconds() > MAX_SKEW_SECONDS:
            raise SignatureError("RequestTimeTooSkewed", "the presigned URL is dated in the future")
    elif abs((wall - moment).total_seconds()) > MAX_SKEW_SECONDS:
        raise SignatureError(
            "RequestTimeTooSkewed",
            "The difference between the request time and the server's time is too large.",
        )


def _encode(value: str) -> str:
    return quote(value, safe="-_.~")


def canonical_query(raw_query: str, drop: str | None = None) -> str:
    pairs = []
    for item in raw_query.split("&") if raw_query else []:
        name, _, value = item.partition("=")
        name, value = unquote(name), unquote(value)
        if name == drop:
            continue
        pairs.append((_encode(name), _encode(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def canonical_request(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Iterable[tuple[str, str]],
    signed_headers: tuple[str, ...],
    payload: str,
    presigned: bool = False,
) -> str:
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.lower(), []).append(_SPACES.sub(" ", value.strip()))
    lines = []
    for name in signed_headers:
        if name not in values:
            raise SignatureError("SignatureDoesNotMatch", f"the signed header {name} is missing")
        lines.append(f"{name}:{','.join(values[name])}\n")
    query = canonical_query(raw_query, "X-Amz-Signature" if presigned else None)
    return "\n".join(
        [method, raw_path or "/", query, "".join(lines), ";".join(signed_headers), payload]
    )


UNSIGNED_ALLOWED = frozenset({"x-amz-content-sha256"})
"""The one x-amz- header a request may carry unsigned (as on AWS)."""


def unsigned_amz_headers(
    headers: list[tuple[str, str]], signed_headers: tuple[str, ...]
) -> list[str]:
    """The x-amz- headers a request carries outside its signature: refused, since anyone
    holding a presigned URL could otherwise add a copy source, an ACL or a lock to it."""
    signed = {name.lower() for name in signed_headers}
    return sorted(
        {
            name.lower()
            for name, _ in headers
            if name.lower().startswith("x-amz-")
            and name.lower() not in signed
            and name.lower() not in UNSIGNED_ALLOWED
        }
    )


def as_sent(raw: bytes) -> str:
    """A header value (or path) as text that `signed_bytes` turns back into the bytes on the
    wire: clients sign the bytes they send (botocore sends a `str` header as UTF-8), so
    reading them as Latin-1 and signing their UTF-8 would sign other bytes."""
    return raw.decode("utf-8", "surrogateescape")


def signed_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    digest = hashlib.sha256(signed_bytes(canonical)).hexdigest()
    return f"{ALGORITHM}\n{amz_date}\n{scope}\n{digest}"


def signing_key(secret: str, credential: Credential) -> bytes:
    return _signing_key(secret, credential.date, credential.region, credential.service)


@functools.lru_cache(maxsize=4096)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """Derived once per secret and day (four HMACs), as AWS's SDKs cache it."""
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key


def sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def chunk_string_to_sign(amz_date: str, scope: str, previous: str, chunk_sha256: str) -> str:
    return "\n".join(
        ["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, previous, EMPTY_SHA256, chunk_sha256]
    )


def trailer_string_to_sign(amz_date: str, scope: str, previous: str, trailer: bytes) -> str:
    digest = hashlib.sha256(trailer).hexdigest()
    return "\n".join(["AWS4-HMAC-SHA256-TRAILER", amz_date, scope, previous, digest])


def same(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())
