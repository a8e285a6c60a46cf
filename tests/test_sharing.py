"""Files reached without an API key on /v1: public buckets and signed download and upload
URLs, with the hostile cases (forged, expired, tampered, revoked, another file's token)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name


@pytest.fixture
def http(local_server: LiveServer) -> httpx.Client:
    with local_server.client() as client:
        yield client


def put(http: httpx.Client, bucket: dict, key: str, body: bytes = b"hello") -> None:
    answer = http.put(
        f"/buckets/{bucket['id']}/files/{key}", content=body, headers={"Content-Type": "text/plain"}
    )
    assert answer.status_code == 201, answer.text


def sign(http: httpx.Client, bucket: dict, key: str, **body: object) -> dict:
    answer = http.post(f"/buckets/{bucket['id']}/sign/{key}", json={"expiresIn": 60, **body})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def test_a_public_bucket_serves_reads_without_a_key_and_nothing_else(
    local_server: LiveServer, http: httpx.Client
) -> None:
    bucket = new_bucket(http, unique_name("pub"))
    put(http, bucket, "img/cat.txt")
    url = f"{local_server.url}/v1/buckets/{bucket['id']}/files/img/cat.txt"
    assert web.get(url).status_code == 401  # private until made public
    changed = http.patch(
        f"/buckets/{bucket['id']}", json={"public": True, "cacheControl": "public, max-age=60"}
    )
    assert changed.status_code == 200, changed.text
    shown = http.get(f"/buckets/{bucket['id']}").json()["data"]
    assert shown["public"] is True and shown["cacheControl"] == "public, max-age=60"
    read = web.get(url)
    assert read.status_code == 200 and read.content == b"hello"
    assert read.headers["cache-control"] == "public, max-age=60"
    assert web.head(url).status_code == 200
    assert web.get(url + "x").status_code == 404
    # Reads only: no listing, no writes, no metadata of other buckets.
    assert web.get(f"{local_server.url}/v1/buckets/{bucket['id']}/files").status_code == 401
    assert web.put(url, content=b"x", headers={"Content-Type": "text/plain"}).status_code == 401
    assert web.delete(url).status_code == 401
    # A key that is sent must be valid: a bad one is not read as "no key".
    bad = web.get(url, headers={"Authorization": "Bearer svc_" + "x" * 40})
    assert bad.status_code == 401
    assert http.patch(f"/buckets/{bucket['id']}", json={"public": False}).status_code == 200
    assert web.get(url).status_code == 401


def test_signed_download_urls_work_until_they_expire(
    local_server: LiveServer, http: httpx.Client
) -> None:
    bucket = new_bucket(http, unique_name("sig"))
    put(http, bucket, "a/report.txt", b"report")
    put(http, bucket, "a/other.txt", b"other")
    signed = sign(http, bucket, "a/report.txt")
    assert signed["method"] == "GET" and signed["key"] == "a/report.txt"
    read = web.get(signed["url"])
    assert read.status_code == 200 and read.content == b"report"
    token = signed["url"].split("token=")[1]
    other = f"{local_server.url}/v1/buckets/{bucket['id']}/files/a/other.txt?token={token}"
    assert web.get(other).status_code == 401  # another file
    assert (
        web.put(signed["url"], content=b"x", headers={"Content-Type": "text/plain"}).status_code
        == 401
    )
    payload, mac = token.split(".")
    forged = signed["url"].replace(token, payload + "." + mac[::-1])
    assert web.get(forged).json()["error"]["code"] == "invalid_signature"
    assert web.get(signed["url"].replace(token, "garbage")).status_code == 401
    assert (
        http.post(f"/buckets/{bucket['id']}/sign/missing", json={"expiresIn": 60}).status_code
        == 404
    )
    too_long = http.post(f"/buckets/{bucket['id']}/sign/a/report.txt", json={"expiresIn": 10**7})
    assert too_long.status_code == 400
    short = sign(http, bucket, "a/report.txt", expiresIn=1)
    time.sleep(1.1)
    expired = web.get(short["url"])
    assert expired.status_code == 401 and "expired" in expired.json()["error"]["message"]


def test_revoking_the_signing_key_ends_its_urls(
    local_server: LiveServer, http: httpx.Client
) -> None:
    bucket = new_bucket(http, unique_name("rev"))
    put(http, bucket, "doc.txt")
    made = http.post("/keys", json={"name": "signer", "scopes": ["files:read"]}).json()["data"]
    with local_server.client(made["secret"]) as signer:
        signed = sign(signer, bucket, "doc.txt")
        refused = signer.post(
            f"/buckets/{bucket['id']}/sign/doc.txt", json={"expiresIn": 60, "upload": True}
        )
        assert refused.status_code == 403  # an upload URL needs files:write
    assert web.get(signed["url"]).status_code == 200
    assert http.delete(f"/keys/{made['id']}").status_code == 200
    assert web.get(signed["url"]).status_code == 401


def test_signed_upload_urls_keep_the_buckets_rules(
    local_server: LiveServer, http: httpx.Client
) -> None:
    bucket = new_bucket(
        http, unique_name("up"), maxUploadBytes=10, allowedContentTypes=["text/plain"]
    )
    signed = sign(http, bucket, "in/note.txt", upload=True)
    assert signed["method"] == "PUT"
    for body, kind, status in [
        (b"x" * 11, "text/plain", 413),  # the bucket's size limit
        (b"hi", "image/png", 415),  # its MIME allow-list
    ]:
        assert (
            web.put(signed["url"], content=body, headers={"Content-Type": kind}).status_code
            == status
        )
    assert (
        web.put(signed["url"], content=b"note", headers={"Content-Type": "text/plain"}).status_code
        == 201
    )
    # Without upsert the URL only creates: the second PUT finds the file there.
    again = web.put(signed["url"], content=b"again", headers={"Content-Type": "text/plain"})
    assert again.status_code == 412
    assert http.get(f"/buckets/{bucket['id']}/files/in/note.txt").content == b"note"
    assert web.get(signed["url"]).status_code == 401  # an upload URL does not download
    upsert = sign(http, bucket, "in/note.txt", upload=True, upsert=True)
    for body in (b"one", b"two"):
        assert (
            web.put(upsert["url"], content=body, headers={"Content-Type": "text/plain"}).status_code
            == 201
        )
    assert http.get(f"/buckets/{bucket['id']}/files/in/note.txt").content == b"two"


def test_the_client_signs_and_names_public_urls(local_server: LiveServer) -> None:
    import bucketd_client as bc

    with bc.Client(local_server.url, local_server.admin_key) as client:
        bucket = client.create_bucket(
            unique_name("cl"), "us-east-1", public=True, cache_control="max-age=5"
        )
        bucket = client.wait_until_active(bucket)
        assert bucket.public and bucket.cache_control == "max-age=5"
        client.upload(bucket.id, "a.txt", b"client")
        assert web.get(client.public_url(bucket.id, "a.txt")).content == b"client"
        client.update_bucket(bucket.id, public=False)
        assert web.get(client.public_url(bucket.id, "a.txt")).status_code == 401
        signed = client.sign_url(bucket.id, "a.txt", 60)
        assert web.get(signed.url).content == b"client"
        upload = client.sign_url(bucket.id, "b.txt", 60, upload=True)
        put = web.put(upload.url, content=b"b", headers={"Content-Type": "text/plain"})
        assert put.status_code == 201
        with pytest.raises(bc.PreconditionFailed):
            client.upload(bucket.id, "b.txt", b"again", if_none_match="*")
        rule = bc.shapes.CorsRule(allowed_origins=["*"], allowed_methods=["GET"])
        statement = {
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{bucket.name}/*",
        }
        bucket = client.update_bucket(bucket.id, cors=[rule], policy={"Statement": [statement]})
        assert bucket.cors == [rule] and bucket.policy == {"Statement": [statement]}
        with pytest.raises(bc.BadRequest) as bad:
            client.update_bucket(
                bucket.id, policy={"Statement": [{**statement, "Effect": "Maybe"}]}
            )
        assert bad.value.code == "invalid_policy"


@pytest.mark.slow  # a bucketd process per command
def test_the_cli_shares_and_signs(local_server: LiveServer, tmp_path: Path) -> None:
    from tests.support.commands import bucketd, ok

    name = unique_name("clis")
    ok(bucketd(local_server, "buckets", "create", name))
    shared = ok(
        bucketd(
            local_server,
            *("buckets", "share", name, "--public", "--cache-control", "max-age=60"),
            *("--anonymous-rpm", "7"),
        )
    )
    assert "public" in shared and "/files/KEY" in shared
    assert "requests without a key: 7 a minute per client address" in shared
    wrong = bucketd(local_server, "buckets", "share", name, "--anonymous-rpm", "lots")
    assert wrong.returncode != 0 and "--anonymous-rpm" in wrong.stderr
    back = ok(bucketd(local_server, "buckets", "share", name, "--anonymous-rpm", "default"))
    assert "requests without a key" not in back
    rules = tmp_path / "cors.json"
    rules.write_text(
        json.dumps([{"allowedOrigins": ["https://app.example.com"], "allowedMethods": ["GET"]}])
    )
    assert "https://app.example.com" in ok(
        bucketd(local_server, "buckets", "cors", name, "--rules", str(rules))
    )
    document = tmp_path / "policy.json"
    document.write_text(
        json.dumps(
            {
                "Statement": [
                    {
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "s3:DeleteObject",
                        "Resource": f"arn:aws:s3:::{name}/*",
                    }
                ]
            }
        )
    )
    assert '"Deny"' in ok(
        bucketd(local_server, "buckets", "policy", name, "--policy", str(document))
    )
    broken = bucketd(local_server, "buckets", "policy", name, "--policy", str(rules))
    assert broken.returncode != 0 and "policy" in broken.stderr
    upload_url = ok(
        bucketd(local_server, "files", "sign", name, "in.txt", "--upload", "--expires", "5m")
    ).strip()
    assert (
        web.put(upload_url, content=b"x", headers={"Content-Type": "text/plain"}).status_code == 201
    )
    url = ok(bucketd(local_server, "files", "sign", name, "in.txt", "--expires", "1h")).strip()
    assert web.get(url).content == b"x"
