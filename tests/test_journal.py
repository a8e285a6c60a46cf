"""Test mode's journal of requests through a real server with two workers: what boto3 sent
to S3 and httpx to /v1 is read back with the right fields, never a secret; the journal is
whole whichever worker answered, bounded, clearable, the operator's only, and absent when
test mode is off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.settings import SettingsError, load_settings
from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name

JOURNAL = "/_bucketd/test/journal"
BOUND = 40


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("journal") / "data",
        TEST_CONFIG,
        env={"BUCKETD_TEST_MODE": "true", "BUCKETD_TEST_JOURNAL_ENTRIES": str(BOUND)},
        workers=2,
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credentials(live: LiveServer) -> tuple[str, str]:
    return live.s3_credentials()


@pytest.fixture
def operator(live: LiveServer) -> Iterator[httpx.Client]:
    """The admin key on the API listener's root; the journal cleared before the test."""
    with web.client(base_url=live.url, headers={"Authorization": f"Bearer {live.admin_key}"}) as h:
        assert h.delete(JOURNAL).status_code == 200
        yield h


def entries(operator: httpx.Client, **filters: str) -> list[dict[str, Any]]:
    answer = operator.get(JOURNAL, params=filters)
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["data"]["entries"]
    return found


def test_s3_requests_are_recorded_without_secrets(
    live: LiveServer, operator: httpx.Client, credentials: tuple[str, str]
) -> None:
    access, secret = credentials
    s3 = live.s3(access, secret)
    bucket = unique_name("jr")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(
        Bucket=bucket,
        Key="photos/cat.jpg",
        Body=b"meow",
        ContentType="image/jpeg",
        Metadata={"owner": "ann"},
        Tagging="kind=pet",
    )
    assert s3.get_object(Bucket=bucket, Key="photos/cat.jpg", Range="bytes=0-1")["Body"].read()
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "nope"})
    assert web.get(url).status_code == 404

    s3.list_objects_v2(Bucket=bucket)
    s3.list_objects(Bucket=bucket)

    found = entries(operator, protocol="s3", bucket=bucket)
    assert [(e["operation"], e["key"], e["status"]) for e in found] == [
        ("CreateBucket", None, 200),
        ("PutObject", "photos/cat.jpg", 200),
        ("GetObject", "photos/cat.jpg", 206),
        ("GetObject", "nope", 404),
        ("ListObjectsV2", None, 200),
        ("ListObjects", None, 200),
    ]
    put = found[1]
    assert put["method"] == "PUT"
    assert put["bytesIn"] == 4
    assert put["headers"]["content-type"] == "image/jpeg"
    assert put["headers"]["content-length"] == "4"
    assert put["headers"]["x-amz-meta-owner"] == "ann"
    assert put["headers"]["x-amz-tagging"] == "kind=pet"
    assert put["accessKeyId"] == access
    assert put["keyId"]
    assert found[2]["headers"]["range"] == "bytes=0-1"
    assert found[2]["bytesOut"] == 2
    assert found[3]["accessKeyId"] == access  # presigned: the key named in the query
    everything = operator.get(JOURNAL).text
    assert secret not in everything
    assert "authorization" not in everything.lower()
    assert "Signature" not in everything and "AWS4-HMAC-SHA256" not in everything


def test_sse_c_keys_are_never_recorded(
    live: LiveServer, operator: httpx.Client, credentials: tuple[str, str]
) -> None:
    s3 = live.s3(*credentials)
    bucket = unique_name("jr")
    s3.create_bucket(Bucket=bucket)
    customer_key = "k" * 32
    try:
        s3.put_object(
            Bucket=bucket,
            Key="a",
            Body=b"x",
            SSECustomerAlgorithm="AES256",
            SSECustomerKey=customer_key,
        )
    except Exception:  # whether the server accepts SSE-C or not, the request was sent
        pass
    found = entries(operator, operation="PutObject", bucket=bucket)
    assert len(found) == 1
    assert found[0]["headers"]["x-amz-server-side-encryption-customer-algorithm"] == "AES256"
    text = operator.get(JOURNAL).text
    assert "customer-key" not in text
    assert customer_key not in text


def test_v1_requests_are_recorded_whichever_worker_answers(
    live: LiveServer, operator: httpx.Client
) -> None:
    """Sixteen fresh connections reach both workers (all reaching one is a 2**-15
    chance); each request is in the one journal."""
    with live.client() as http:
        bucket = new_bucket(http, unique_name("jv"))["id"]
    operator.delete(JOURNAL)
    headers = {"Authorization": f"Bearer {live.admin_key}"}
    for n in range(16):
        with web.client(base_url=live.url + "/v1", headers=headers) as fresh:
            made = fresh.put(
                f"/buckets/{bucket}/files/docs/{n}.txt",
                content=b"hello",
                headers={"Content-Type": "text/plain", "If-None-Match": "*"},
            )
            assert made.status_code in (200, 201), made.text
    found = entries(operator, protocol="v1", prefix="docs/")
    assert [e["key"] for e in found] == [f"docs/{n}.txt" for n in range(16)]
    first = found[0]
    assert first["operation"] == "/v1/buckets/{bucket_id}/files/{key:path}"  # as in /metrics
    assert first["method"] == "PUT"
    assert first["bucket"] == bucket
    assert first["headers"] == {
        "content-type": "text/plain",
        "content-length": "5",
        "if-none-match": "*",
    }
    assert first["bytesIn"] == 5
    assert first["keyId"] and first["accessKeyId"] is None
    assert live.admin_key not in operator.get(JOURNAL).text
    assert [e["time"] for e in found] == sorted(e["time"] for e in found)
    assert entries(operator, since=str(found[-1]["time"]), prefix="docs/")[0] == found[-1]


def test_the_surface_and_probes_are_not_recorded(live: LiveServer, operator: httpx.Client) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/console/", JOURNAL, "/_bucketd/test/clock"):
        operator.get(path)
    assert entries(operator) == []
    web.get(live.s3_url + "/metrics")  # on S3, a bucket named "metrics": recorded
    assert [(e["protocol"], e["bucket"]) for e in entries(operator)] == [("s3", "metrics")]


def test_the_bound_keeps_the_newest(live: LiveServer, operator: httpx.Client) -> None:
    with live.client() as http:
        for n in range(BOUND + 5):
            http.get("/buckets", params={"limit": n + 1})
    found = entries(operator)
    assert len(found) == BOUND
    assert all(e["operation"] == "/v1/buckets" for e in found)


def test_clear_empties_it(live: LiveServer, operator: httpx.Client) -> None:
    with live.client() as http:
        http.get("/buckets")
    assert len(entries(operator)) == 1
    cleared = operator.delete(JOURNAL)
    assert cleared.json()["data"] == {"cleared": True}
    assert entries(operator) == []


def test_bad_filters_are_refused(operator: httpx.Client) -> None:
    assert operator.get(JOURNAL, params={"buckett": "x"}).status_code == 400
    assert operator.get(JOURNAL, params={"since": "yesterday"}).status_code == 400
    assert operator.get(JOURNAL, params={"since": "nan"}).status_code == 400


def test_the_journal_is_the_operators(live: LiveServer, operator: httpx.Client) -> None:
    assert web.get(live.url + JOURNAL).status_code == 401
    assert web.delete(live.url + JOURNAL).status_code == 401
    with live.client() as http:
        made = http.post(
            "/keys", json={"name": unique_name("k"), "scopes": ["keys:manage", "files:read"]}
        )
        assert made.status_code == 201, made.text
        other = {"Authorization": "Bearer " + made.json()["data"]["secret"]}
    assert web.get(live.url + JOURNAL, headers=other).status_code == 403
    assert web.delete(live.url + JOURNAL, headers=other).status_code == 403
    assert len(entries(operator)) == 1  # the POST /v1/keys, not cleared by the refusal


def test_off_there_is_no_journal(local_server: LiveServer) -> None:
    """The shared server runs without test mode: the surface is any unknown path's 404,
    and requests leave no journal file behind."""
    headers = {"Authorization": f"Bearer {local_server.admin_key}"}
    with local_server.client() as http:
        http.get("/buckets")
    for method in ("GET", "DELETE"):
        assert web.request(method, local_server.url + JOURNAL, headers=headers).status_code == 404
    assert not list(local_server.data_dir.glob("test-journal*"))


def test_the_bound_is_at_least_one() -> None:
    assert load_settings(None, {"BUCKETD_TEST_JOURNAL_ENTRIES": "3"}, {}).test_journal_entries == 3
    with pytest.raises(SettingsError, match="test_journal_entries"):
        load_settings(None, {"BUCKETD_TEST_JOURNAL_ENTRIES": "0"}, {})
