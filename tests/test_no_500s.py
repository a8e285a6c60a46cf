"""Inputs that answered 500 (issue 32 point 9): a POST upload's key beyond Latin-1, a file
name that is not UTF-8, a /v1 JSON body that is not UTF-8, and a part racing the abort of
its upload. Each is an answer now: stored (and its Location percent-encoded), or a 4xx."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError

from storage.attributes import Attributes
from storage.config import EngineConfig
from storage.engine import Engine
from storage.errors import UploadNotFound
from storage.models import Actor
from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.s3 import presign, send


def test_a_post_upload_of_a_key_beyond_latin1(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    name = unique_name("form")
    s3.create_bucket(Bucket=name)
    answer = send(presign(s3, name), filename="猫.jpg")
    assert answer.status_code == 201, answer.text
    assert answer.headers["location"].endswith(quote(f"{name}/uploads/猫.jpg", safe="/"))
    assert s3.get_object(Bucket=name, Key="uploads/猫.jpg")["Body"].read() == b"hello"


def test_a_file_name_that_is_not_utf8_is_refused(local_server: LiveServer) -> None:
    s3: Any = local_server.s3()
    name = unique_name("form")
    s3.create_bucket(Bucket=name)
    post = presign(s3, name)
    boundary = "b0undary"
    lines = [f"--{boundary}".encode()]
    for field, value in post["fields"].items():
        lines += [f'Content-Disposition: form-data; name="{field}"'.encode(), b"", value.encode()]
        lines.append(f"--{boundary}".encode())
    lines += [
        b'Content-Disposition: form-data; name="file"; filename="\xff\xfe.jpg"',
        b"Content-Type: image/jpeg",
        b"",
        b"hello",
        f"--{boundary}--".encode(),
    ]
    answer = web.post(
        post["url"],
        content=b"\r\n".join(lines),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert answer.status_code == 400, answer.text


def test_a_json_body_that_is_not_utf8_is_a_400(local_server: LiveServer) -> None:
    with local_server.client() as http:
        answer = http.post(
            "/buckets",
            content=b'{"name": "\xff\xfe", "region": "us-east-1"}',
            headers={"Content-Type": "application/json"},
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_json"


@pytest.mark.anyio
async def test_a_part_racing_the_abort_of_its_upload_is_no_such_upload(tmp_path: Path) -> None:
    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    try:
        org = await engine.orgs.create(unique_name("org"), "pro")
        actor = Actor(org_id=org.id)
        bucket = await engine.buckets.create(actor, unique_name("b"), "us-east-1", at_once=True)
        upload = await engine.multipart.create(actor, bucket.id, "k", Attributes("text/plain"))
        halfway = asyncio.Event()
        go_on = asyncio.Event()

        async def slow() -> AsyncIterator[bytes]:
            yield b"x" * 65536
            halfway.set()
            await go_on.wait()
            yield b"y" * 65536

        part = asyncio.ensure_future(
            engine.multipart.upload_part(actor, bucket.id, "k", upload.upload_id, 1, slow())
        )
        await halfway.wait()
        await engine.multipart.abort(actor, bucket.id, "k", upload.upload_id)
        go_on.set()
        with pytest.raises(UploadNotFound):
            await part
    finally:
        await engine.close()


def test_a_post_policy_lasts_no_longer_than_a_presigned_url() -> None:
    """A signed form whose policy expires in 2099 is refused, as a presigned URL past
    7 days is (issue 32 point 10)."""
    from datetime import UTC, datetime, timedelta

    from gateway.s3 import post_policy
    from gateway.s3.errors import S3Error

    now = datetime(2026, 11, 26, tzinfo=UTC)
    fields = {"key": "k", "bucket": "b"}
    for expiration, allowed in ((now + timedelta(days=6), True), (now + timedelta(days=8), False)):
        document = {
            "expiration": expiration.isoformat(),
            "conditions": [{"bucket": "b"}, ["starts-with", "$key", ""]],
        }
        if allowed:
            post_policy.check(document, fields, "b", now)
        else:
            with pytest.raises(S3Error) as error:
                post_policy.check(document, fields, "b", now)
            assert error.value.code == "AccessDenied"


def test_post_fields_beyond_latin1_and_a_redirect_with_control_characters(
    local_server: LiveServer,
) -> None:
    s3: Any = local_server.s3()
    name = unique_name("form")
    s3.create_bucket(Bucket=name)
    post = s3.generate_presigned_post(
        name,
        "€.txt",
        Fields={"x-amz-meta-note": "€ and ✓"},
        Conditions=[{"x-amz-meta-note": "€ and ✓"}],
    )
    stored = web.post(post["url"], data=post["fields"], files={"file": ("a", b"x", "text/plain")})
    assert stored.status_code == 204, stored.text
    head = s3.head_object(Bucket=name, Key="€.txt")
    assert head["Metadata"]["note"]  # RFC 2047-encoded on the wire, as S3 sends it
    bad = s3.generate_presigned_post(
        name,
        "r.txt",
        Fields={"success_action_redirect": "http://example.com/\r\nSet-Cookie: x=1"},
        Conditions=[["starts-with", "$success_action_redirect", ""]],
    )
    refused = web.post(bad["url"], data=bad["fields"], files={"file": ("a", b"x", "text/plain")})
    assert refused.status_code == 400, refused.text
    with pytest.raises(ClientError):  # nothing stored
        s3.head_object(Bucket=name, Key="r.txt")
