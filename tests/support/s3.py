"""S3 requests by hand: signed headers, presigned POST forms, error codes, SigV4 test vectors."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from gateway.s3 import sigv4
from tests.support import web
from tests.support.live import LiveServer

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


CREDENTIAL = sigv4.Credential("AKIAIOSFODNN7EXAMPLE", "20130524", "us-east-1", "s3")


DATE = "20130524T000000Z"


SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"


CHUNKS = [
    (65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"),
    (1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"),
    (0, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"),
]


def send(
    post: dict, content: bytes = b"hello", filename: str = "cat.jpg", **extra: str
) -> httpx.Response:
    fields = {**post["fields"], **extra}
    return web.post(post["url"], data=fields, files={"file": (filename, content, "image/jpeg")})


def presign(s3: Any, bucket: str, key: str = "uploads/${filename}", **extra: Any) -> dict:
    conditions = [
        ["starts-with", "$key", "uploads/"],
        ["content-length-range", 1, 100],
        ["starts-with", "$Content-Type", "image/"],
        {"success_action_status": "201"},
        ["starts-with", "$x-amz-meta-owner", ""],
        *extra.pop("conditions", []),
    ]
    fields = {
        "Content-Type": "image/jpeg",
        "success_action_status": "201",
        "x-amz-meta-owner": "ana",
        **extra.pop("fields", {}),
    }
    return s3.generate_presigned_post(
        Bucket=bucket,
        Key=key,
        Fields=fields,
        Conditions=conditions,
        ExpiresIn=extra.pop("expires", 300),
    )


def signed_headers(
    live: LiveServer,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    region: str = "us-east-1",
    service: str = "s3",
    credentials: tuple[str, str] | None = None,
) -> dict[str, str]:
    """SigV4 headers of a request whose body is not signed (UNSIGNED-PAYLOAD or aws-chunked).
    Over plain HTTP botocore signs the (here empty) body's hash whatever the headers say,
    but for STREAMING-UNSIGNED-PAYLOAD-TRAILER, which it sends when a checksum trails."""
    access, secret = credentials or live.s3_credentials()
    request = AWSRequest(
        method,
        live.s3_url + path,
        headers={
            "Host": live.s3_url.removeprefix("http://"),
            "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
            **(headers or {}),
        },
    )
    if request.headers["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER":
        request.context["checksum"] = {"request_algorithm": {"in": "trailer"}}
    S3SigV4Auth(Credentials(access, secret), service, region).add_auth(request)
    return dict(request.headers)


def code(error: ClientError) -> str:
    return str(error.response["Error"]["Code"])


def status(error: ClientError) -> int:
    return int(error.response["ResponseMetadata"]["HTTPStatusCode"])


def raw_sigv4_put(
    url: str,
    credentials: tuple[str, str],
    path: str,
    signed: list[tuple[bytes, bytes]],
    sent: list[tuple[bytes, bytes]] | None = None,
) -> httpx.Response:
    """A SigV4 PUT of `path` whose headers (besides host, the payload hash and the date)
    are signed as the bytes `signed` gives and sent as `sent` (the same by default): bytes
    that need not be UTF-8, which botocore cannot send. The canonical request is written
    out here, over the bytes."""
    access, secret = credentials
    amz = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    fixed = [
        (b"host", url.removeprefix("http://").encode()),
        (b"x-amz-content-sha256", b"UNSIGNED-PAYLOAD"),
        (b"x-amz-date", amz.encode()),
    ]
    headers = sorted([*signed, *fixed])
    canonical = b"\n".join(
        [
            b"PUT",
            path.encode(),
            b"",
            b"".join(k + b":" + v + b"\n" for k, v in headers),
            b";".join(k for k, _ in headers),
            b"UNSIGNED-PAYLOAD",
        ]
    )
    credential = sigv4.Credential(access, amz[:8], "us-east-1", "s3")
    to_sign = f"AWS4-HMAC-SHA256\n{amz}\n{credential.scope}\n" + (
        hashlib.sha256(canonical).hexdigest()
    )
    signature = sigv4.sign(sigv4.signing_key(secret, credential), to_sign)
    names = ";".join(k.decode() for k, _ in headers)
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={access}/{credential.scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    wire = [*(signed if sent is None else sent), *fixed[1:]]
    return web.put(
        url + path, content=b"x", headers=[*wire, (b"authorization", authorization.encode())]
    )
