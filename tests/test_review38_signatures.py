"""A hostile review of issue 38's signatures (SigV2 header and presigned, SigV4 over the
header bytes as sent) and POST uploads, against the real shared server: an old or replayed
signature, one moved to another resource or operation, bytes that would read alike, and
a form whose key comes from its file's name. Each test is an attack that held, or a hole
fixed with it (tests/test_review38.py holds the access attacks)."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import time
from typing import Any

from tests.support import web
from tests.support.access import failure, group_uris, policy, s3_bucket
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import raw_sigv4_put


def _v2_put(live: LiveServer, credentials: tuple[str, str], path: str, date: str) -> Any:
    import hmac

    access, secret = credentials
    text = f"PUT\n\n\n{date}\n{path}"
    signature = base64.b64encode(
        hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()
    ).decode()
    return web.put(
        live.s3_url + path,
        content=b"v2",
        headers={"Date": date, "Authorization": f"AWS {access}:{signature}"},
    )


def test_sigv2_refuses_old_dates_revoked_keys_and_another_resource(
    local_server: LiveServer, s3: Any
) -> None:
    """Holds: a SigV2 header signature 16 minutes old is RequestTimeTooSkewed; a revoked
    key's is InvalidAccessKeyId; a signature of one object's PUT is not one of another's."""
    bucket = s3_bucket(s3, "rv38-v2")
    credentials = local_server.s3_credentials()
    now = email.utils.formatdate(time.time(), usegmt=True)
    old = email.utils.formatdate(time.time() - 16 * 60, usegmt=True)
    assert _v2_put(local_server, credentials, f"/{bucket}/a", now).status_code == 200
    stale = _v2_put(local_server, credentials, f"/{bucket}/a", old)
    assert (stale.status_code, "RequestTimeTooSkewed" in stale.text) == (403, True)
    signed = _v2_put(local_server, credentials, f"/{bucket}/a", now).request.headers
    moved = web.put(
        f"{local_server.s3_url}/{bucket}/b",
        content=b"v2",
        headers={"Date": signed["Date"], "Authorization": signed["Authorization"]},
    )
    assert (moved.status_code, "SignatureDoesNotMatch" in moved.text) == (403, True)
    # Virtual-host style signs the Host's bucket: a signature of /bucket/a is one of the
    # same object by Host, and of no other bucket's /a.
    headers = {"Date": signed["Date"], "Authorization": signed["Authorization"]}
    port = local_server.s3_port
    for host, expected in (
        (f"{bucket}.localhost:{port}", 200),
        (f"x{bucket}.localhost:{port}", 403),
    ):
        by_host = web.put(
            f"{local_server.s3_url}/a", content=b"v2", headers={**headers, "Host": host}
        )
        assert by_host.status_code == expected, by_host.text
    unused = local_server.s3_credentials()  # revoked before the gateway caches it
    local_server.cli("keys", "revoke", unused[0])
    revoked = _v2_put(local_server, unused, f"/{bucket}/a", now)
    assert (revoked.status_code, "InvalidAccessKeyId" in revoked.text) == (403, True)


LEGAL_HOLD = (
    b'<LegalHold xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>ON</Status></LegalHold>'
)


def test_a_sigv2_presigned_url_is_not_another_operation_by_an_unsigned_subresource(
    local_server: LiveServer,
) -> None:
    """Hole (fixed): SigV2 signs only the sub-resources of its list (botocore's), and
    `?legal-hold`, `?retention`, `?publicAccessBlock`, `?ownershipControls`, `?encryption`
    and the other flags that name an operation here are not on it: whoever held a
    presigned PUT URL of one object could add `&legal-hold` (or `&retention`, a
    COMPLIANCE date years away) and lock its version, and a presigned CreateBucket URL
    turned off the bucket's public access block. A presigned SigV2 URL now signs every
    flag that names an operation; a header signature, which botocore's SigV2 signer makes
    without them for these newer operations, is still taken either way."""
    v2: Any = local_server.s3(signature_version="s3")
    bucket = unique_name("rv38-v2sub")
    v2.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    v2.put_object(Bucket=bucket, Key="k", Body=b"x")
    put = v2.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "k"})
    held = web.put(put + "&legal-hold", content=LEGAL_HOLD)
    assert (held.status_code, "SignatureDoesNotMatch" in held.text) == (403, True)
    assert v2.get_object_legal_hold(Bucket=bucket, Key="k")["LegalHold"]["Status"] == "OFF"
    assert web.put(put, content=b"as signed").status_code == 200

    block = (
        b'<PublicAccessBlockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<BlockPublicAcls>false</BlockPublicAcls></PublicAccessBlockConfiguration>"
    )
    v2.put_public_access_block(
        Bucket=bucket,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    create = v2.generate_presigned_url("create_bucket", Params={"Bucket": bucket})
    assert web.put(create + "&publicAccessBlock", content=block).status_code == 403
    config = v2.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert config["BlockPublicAcls"] is True

    # boto3's own SigV2 header signatures of these operations still hold.
    v2.put_object_legal_hold(Bucket=bucket, Key="k", LegalHold={"Status": "ON"})
    assert v2.get_object_legal_hold(Bucket=bucket, Key="k")["LegalHold"]["Status"] == "ON"
    v2.put_object_legal_hold(Bucket=bucket, Key="k", LegalHold={"Status": "OFF"})


def test_every_flag_that_names_an_operation_is_signed_by_a_sigv2_presigned_url() -> None:
    """The flags `operations.py` routes on are all among what a presigned SigV2 URL signs,
    so a new operation's flag cannot be added to an old URL unseen."""
    from gateway.s3 import sigv2
    from gateway.s3.operations import SUBRESOURCES

    assert SUBRESOURCES <= sigv2.SUBRESOURCES | sigv2.OPERATION_FLAGS


def test_header_bytes_that_are_not_utf8_never_sign_alike(local_server: LiveServer, s3: Any) -> None:
    """Holds: the canonical request holds a header's bytes as sent, so a signature over one
    byte that is not UTF-8 is not one over another (both would read as U+FFFD if decoded
    leniently): the altered request is SignatureDoesNotMatch; the signed one is served."""
    bucket = s3_bucket(s3, "rv38-raw")
    credentials = local_server.s3_credentials()
    signed, altered = b"attachment; filename=\xe9", b"attachment; filename=\xe8"
    header = b"content-disposition"
    forged = raw_sigv4_put(
        local_server.s3_url, credentials, f"/{bucket}/k", [(header, signed)], [(header, altered)]
    )
    assert (forged.status_code, "SignatureDoesNotMatch" in forged.text) == (403, True)
    assert failure(s3.head_object, Bucket=bucket, Key="k")[0] == 404
    honest = raw_sigv4_put(local_server.s3_url, credentials, f"/{bucket}/k", [(header, signed)])
    assert honest.status_code in (200, 400), honest.text


def test_an_anonymous_post_is_decided_on_the_key_its_filename_makes(
    local_server: LiveServer, s3: Any
) -> None:
    """Holds: `${filename}` is put in the key before the access decision, so a policy that
    lets anyone POST under `uploads/` does not let a form whose key is `${filename}` write
    elsewhere by its file's name, nor an `acl` field make the upload public."""
    bucket = s3_bucket(s3, "rv38-post")
    s3.put_bucket_policy(
        Bucket=bucket,
        Policy=policy(
            bucket,
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{bucket}/uploads/*",
            },
        ),
    )
    url = f"{local_server.s3_url}/{bucket}"

    def post(key: str, filename: str, **extra: str) -> int:
        files = {"file": (filename, b"posted", "text/plain")}
        return web.post(url, data={"key": key, **extra}, files=files).status_code

    assert post("${filename}", "top.txt") == 403
    assert post("${filename}", "uploads/ok.txt") == 204
    assert post("uploads/${filename}", "a.txt", acl="public-read") == 403
    assert post("uploads/${filename}", "a.txt") == 204
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["uploads/a.txt", "uploads/ok.txt"]
    assert group_uris(s3.get_object_acl(Bucket=bucket, Key="uploads/a.txt")["Grants"]) == []
