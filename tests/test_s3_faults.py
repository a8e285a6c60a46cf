"""Faults on demand (test mode) through a real server with two workers: rules set under
`/_bucketd/test/faults` fail S3 requests as S3 does, and boto3's and the aws CLI's own
retries are what a test sees; the surface is absent when test mode is off, and the
operator's when on."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    IncompleteReadError,
    ResponseStreamingError,
)

from tests.support import web
from tests.support.commands import aws
from tests.support.live import LiveServer
from tests.support.names import unique_name

FAULTS = "/_bucketd/test/faults"
CLOCK = "/_bucketd/test/clock"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of its own in test mode (the rules are the whole server's), with two
    workers: they must share the rules and count matches once."""
    server = LiveServer(
        tmp_path_factory.mktemp("faults") / "data", env={"BUCKETD_TEST_MODE": "true"}, workers=2
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credentials(live: LiveServer) -> tuple[str, str]:
    return live.s3_credentials()


@pytest.fixture(scope="module")
def s3(live: LiveServer, credentials: tuple[str, str]) -> Any:
    """No retries: a fault is what the caller sees."""
    return live.s3(*credentials)


@pytest.fixture(scope="module")
def retrying(live: LiveServer, credentials: tuple[str, str]) -> Any:
    """boto3's standard retry mode, as applications configure it."""
    return live.s3(*credentials, retries={"mode": "standard", "max_attempts": 3})


@pytest.fixture
def operator(live: LiveServer) -> Iterator[httpx.Client]:
    """The admin key on the API listener's root; the rules cleared after."""
    headers = {"Authorization": f"Bearer {live.admin_key}"}
    with web.client(base_url=live.url, headers=headers) as http:
        yield http
        assert http.delete(FAULTS).status_code == 200


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("flt")
    s3.create_bucket(Bucket=name)
    return name


def add(http: httpx.Client, **rule: Any) -> dict[str, Any]:
    answer = http.post(FAULTS, json=rule)
    assert answer.status_code == 201, answer.text
    added: dict[str, Any] = answer.json()["data"]
    return added


def rules(http: httpx.Client) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = http.get(FAULTS).json()["data"]["rules"]
    return listed


def test_off_the_surface_is_any_unknown_path(local_server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {local_server.admin_key}"}
    rule = {"operation": "*", "fault": "SlowDown", "times": 1}
    for method in ("GET", "POST", "DELETE"):
        unknown = web.request(method, local_server.url + "/_bucketd/nothing", headers=headers)
        answer = web.request(method, local_server.url + FAULTS, headers=headers, json=rule)
        assert unknown.status_code == answer.status_code == 404
        assert answer.content == unknown.content.replace(b"/_bucketd/nothing", FAULTS.encode())


def test_the_rules_are_the_operators(live: LiveServer, operator: httpx.Client) -> None:
    rule = {"operation": "*", "fault": "SlowDown", "times": 1}
    assert web.request("POST", live.url + FAULTS, json=rule).status_code == 401
    with live.client() as http:
        made = http.post(
            "/keys", json={"name": unique_name("k"), "scopes": ["keys:manage", "files:write"]}
        )
        assert made.status_code == 201, made.text
        manager = {"Authorization": "Bearer " + made.json()["data"]["secret"]}
    for method in ("GET", "POST", "DELETE"):
        refused = web.request(method, live.url + FAULTS, json=rule, headers=manager)
        assert refused.status_code == 403, refused.text
    assert rules(operator) == []


@pytest.mark.parametrize(
    "rule",
    [
        {"fault": "SlowDown", "times": 1},
        {"operation": "PutObjekt", "fault": "SlowDown", "times": 1},
        {"operation": "*", "fault": "Explode", "times": 1},
        {"operation": "*", "fault": "SlowDown"},
        {"operation": "*", "fault": "SlowDown", "times": 1, "probability": 0.5},
        {"operation": "*", "fault": "SlowDown", "times": 0},
        {"operation": "*", "fault": "SlowDown", "probability": 1.5},
        {"operation": "*", "fault": "delay", "times": 1},
        {"operation": "*", "fault": "delay", "times": 1, "delaySeconds": 1e6},
        {"operation": "*", "fault": "SlowDown", "times": 1, "delaySeconds": 1},
        {"operation": "PutObject", "fault": "truncate", "times": 1, "truncateAfter": 3},
        {"operation": "GetObject", "fault": "truncate", "times": 1, "truncateAfter": -1},
        {"operation": "*", "fault": "SlowDown", "times": "twice"},
        {"operation": "*", "fault": "SlowDown", "times": 1, "when": "now"},
        {"operation": "ListObjectsV2", "fault": "stale", "times": 1},
        {"operation": "ListObjectsV2", "fault": "SlowDown", "times": 1, "staleSeconds": 5},
        {"operation": "GetObject", "fault": "stale", "times": 1, "staleSeconds": 5},
        {"operation": "*", "fault": "stale", "times": 1, "staleSeconds": 5},
        {"operation": "ListObjects", "fault": "stale", "key": "a*", "times": 1, "staleSeconds": 5},
        {"operation": "ListObjectVersions", "fault": "stale", "times": 1, "staleSeconds": 0},
        {"operation": "ListObjectsV2", "fault": "stale", "times": 1, "staleSeconds": 1e9},
    ],
)
def test_a_bad_rule_is_refused_and_changes_nothing(
    operator: httpx.Client, rule: dict[str, Any]
) -> None:
    kept = add(operator, operation="HeadBucket", fault="SlowDown", times=1)
    answer = operator.post(FAULTS, json=rule)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"]
    assert rules(operator) == [kept]


def test_boto3_retries_through_two_slowdowns_and_stores_once(
    operator: httpx.Client, s3: Any, retrying: Any, bucket: str
) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    add(operator, operation="PutObject", bucket=bucket, fault="SlowDown", times=2)
    answer = retrying.put_object(Bucket=bucket, Key="a.txt", Body=b"hello")
    assert answer["ResponseMetadata"]["RetryAttempts"] == 2
    versions = s3.list_object_versions(Bucket=bucket)["Versions"]
    assert [(v["Key"], v["Size"]) for v in versions] == [("a.txt", 5)]
    [rule] = rules(operator)
    assert (rule["matched"], rule["fired"]) == (3, 2)
    assert s3.put_object(Bucket=bucket, Key="b.txt", Body=b"")  # spent: no more faults


@pytest.mark.parametrize(("fault", "status"), [("SlowDown", 503), ("InternalError", 500)])
def test_without_retries_the_s3_error_surfaces_and_nothing_is_stored(
    operator: httpx.Client, s3: Any, bucket: str, fault: str, status: int
) -> None:
    add(operator, operation="PutObject", bucket=bucket, key="logs/*", fault=fault, times=1)
    s3.put_object(Bucket=bucket, Key="other.txt", Body=b"x")  # the key does not match
    with pytest.raises(ClientError) as raised:
        s3.put_object(Bucket=bucket, Key="logs/1.txt", Body=b"x")
    error = raised.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (
        fault,
        status,
    )
    assert error["Error"]["Message"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="logs/")["KeyCount"] == 0


def test_listobjects_and_listobjectsv2_are_two_operations(
    operator: httpx.Client, s3: Any, bucket: str
) -> None:
    add(operator, operation="ListObjectsV2", bucket=bucket, fault="SlowDown", times=1)
    assert s3.list_objects(Bucket=bucket)["Name"] == bucket
    with pytest.raises(ClientError) as raised:
        s3.list_objects_v2(Bucket=bucket)
    assert raised.value.response["Error"]["Code"] == "SlowDown"
    add(operator, operation="ListObjects", bucket=bucket, fault="SlowDown", times=1)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    with pytest.raises(ClientError):
        s3.list_objects(Bucket=bucket)


def test_a_reset_connection_is_botocores_connection_closed(
    operator: httpx.Client, s3: Any, retrying: Any, bucket: str
) -> None:
    add(operator, operation="PutObject", bucket=bucket, fault="reset", times=1)
    with pytest.raises(ConnectionClosedError):
        s3.put_object(Bucket=bucket, Key="a.txt", Body=b"hello")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    add(operator, operation="PutObject", bucket=bucket, fault="reset", times=1)
    assert retrying.put_object(Bucket=bucket, Key="a.txt", Body=b"hello")
    assert s3.get_object(Bucket=bucket, Key="a.txt")["Body"].read() == b"hello"


def test_a_truncated_get_fails_as_a_lost_connection_does(
    operator: httpx.Client, s3: Any, bucket: str
) -> None:
    s3.put_object(Bucket=bucket, Key="big.bin", Body=b"x" * 100_000)
    add(operator, operation="GetObject", fault="truncate", truncateAfter=1000, times=1)
    got = s3.get_object(Bucket=bucket, Key="big.bin")
    assert got["ContentLength"] == 100_000
    with pytest.raises((IncompleteReadError, ResponseStreamingError)):
        got["Body"].read()
    assert len(s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read()) == 100_000


def test_a_delay_holds_the_answer(operator: httpx.Client, s3: Any, bucket: str) -> None:
    add(operator, operation="HeadBucket", bucket=bucket, fault="delay", delaySeconds=0.3, times=1)
    began = time.monotonic()
    s3.head_bucket(Bucket=bucket)
    assert time.monotonic() - began >= 0.3


def test_clearing_the_rules_ends_the_delays_they_hold(
    operator: httpx.Client, s3: Any, bucket: str
) -> None:
    """As a test's fixture clears them when the test ends: a request still held would keep
    the server from stopping for its graceful shutdown's 10 s (whichever worker holds it)."""
    add(operator, operation="HeadBucket", bucket=bucket, fault="delay", delaySeconds=300, times=1)
    took: list[float] = []

    def held() -> None:
        began = time.monotonic()
        s3.head_bucket(Bucket=bucket)
        took.append(time.monotonic() - began)

    thread = threading.Thread(target=held)
    thread.start()
    deadline = time.monotonic() + 10
    while rules(operator)[0]["fired"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    assert operator.delete(FAULTS).status_code == 200
    thread.join(30)
    assert len(took) == 1 and 0.3 <= took[0] < 10


def test_next_n_counts_once_across_workers(
    live: LiveServer, credentials: tuple[str, str], operator: httpx.Client, bucket: str
) -> None:
    """Twelve requests on fresh connections reach either worker; three fail in all."""
    add(operator, operation="HeadBucket", bucket=bucket, fault="SlowDown", times=3)
    failed = []
    for _ in range(12):
        fresh = live.s3(*credentials)
        try:
            fresh.head_bucket(Bucket=bucket)
            failed.append(False)
        except ClientError:
            failed.append(True)
        fresh.close()
    assert failed == [True] * 3 + [False] * 9


def test_a_seeded_probability_is_reproducible(operator: httpx.Client, s3: Any, bucket: str) -> None:
    def run() -> list[bool]:
        add(operator, operation="HeadBucket", fault="InternalError", probability=0.5, seed=7)
        failed = []
        for _ in range(20):
            try:
                s3.head_bucket(Bucket=bucket)
                failed.append(False)
            except ClientError:
                failed.append(True)
        assert rules(operator)[0]["matched"] == 20
        operator.delete(FAULTS)
        return failed

    first = run()
    assert 0 < sum(first) < 20
    assert run() == first


def test_the_aws_cli_retries_an_internal_error(
    live: LiveServer,
    credentials: tuple[str, str],
    operator: httpx.Client,
    bucket: str,
    tmp_path: Path,
) -> None:
    body = tmp_path / "a.txt"
    body.write_text("hello")
    put = ("s3api", "put-object", "--bucket", bucket, "--key", "a.txt", "--body", str(body))
    add(operator, operation="PutObject", fault="InternalError", times=1)
    done = aws(live, credentials, *put)
    assert done.returncode == 0, done.stderr
    assert (rules(operator)[0]["matched"], rules(operator)[0]["fired"]) == (2, 1)

    config = tmp_path / "config"  # retries off: the CLI reports S3's error
    config.write_text("[default]\nmax_attempts = 1\n")
    add(operator, operation="PutObject", fault="InternalError", times=1)
    refused = aws(live, credentials, *put, config=str(config))
    assert refused.returncode != 0
    assert "InternalError" in refused.stderr
    assert os.path.getsize(body) == 5


@pytest.fixture
def clock(operator: httpx.Client) -> Iterator[httpx.Client]:
    """The server's clock, put back after the test."""
    yield operator
    assert operator.delete(CLOCK).status_code == 200


def _history(s3: Any, bucket: str, clock: httpx.Client) -> None:
    """Three keys, then a minute later: one more, one replaced (3 bytes, then 6), one
    deleted; a listing 30 seconds stale is of the first three as they were."""
    for key in ("kept.txt", "replaced.txt", "deleted.txt"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"old")
    assert clock.post(CLOCK, json={"advanceSeconds": 60}).status_code == 200
    s3.put_object(Bucket=bucket, Key="new.txt", Body=b"new")
    s3.put_object(Bucket=bucket, Key="replaced.txt", Body=b"newer!")
    s3.delete_object(Bucket=bucket, Key="deleted.txt")


def _listed(s3: Any, bucket: str, **params: Any) -> list[tuple[str, int]]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, **params)
    return [(item["Key"], item["Size"]) for page in pages for item in page.get("Contents", [])]


def test_a_stale_listing_of_a_versioned_bucket_is_the_past_one(
    operator: httpx.Client, clock: httpx.Client, s3: Any, bucket: str
) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    _history(s3, bucket, clock)
    now = [("kept.txt", 3), ("new.txt", 3), ("replaced.txt", 6)]
    past = [("deleted.txt", 3), ("kept.txt", 3), ("replaced.txt", 3)]
    add(operator, operation="ListObjectsV2", bucket=bucket, fault="stale", staleSeconds=30, times=3)
    assert _listed(s3, bucket, PaginationConfig={"PageSize": 1}) == past  # three stale pages
    assert _listed(s3, bucket) == now  # spent
    assert s3.list_objects(Bucket=bucket)["Contents"][0]["Key"] == "kept.txt"  # v1: no rule
    with pytest.raises(ClientError):  # listed, and gone: as an eventually consistent store
        s3.get_object(Bucket=bucket, Key="deleted.txt")

    add(operator, operation="ListObjects", bucket=bucket, fault="stale", staleSeconds=30, times=1)
    old = s3.list_objects(Bucket=bucket, Prefix="re")["Contents"]
    assert [(o["Key"], o["Size"], o["ETag"]) for o in old] == [
        ("replaced.txt", 3, '"' + hashlib.md5(b"old").hexdigest() + '"')
    ]
    rule = add(
        operator, operation="ListObjectsV2", bucket=bucket, fault="stale", staleSeconds=90, times=1
    )
    assert rule["staleSeconds"] == 90
    assert _listed(s3, bucket) == []  # before anything was written

    add(operator, operation="ListObjectVersions", fault="stale", staleSeconds=30, probability=1)
    pages = s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, PaginationConfig={"PageSize": 1}
    )
    versions = [
        v for page in pages for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
    ]
    assert sorted((v["Key"], v["Size"], v["IsLatest"]) for v in versions) == [
        ("deleted.txt", 3, True),
        ("kept.txt", 3, True),
        ("replaced.txt", 3, True),
    ]


def test_a_stale_listing_of_an_unversioned_bucket_lacks_what_changed_since(
    operator: httpx.Client, clock: httpx.Client, s3: Any, bucket: str
) -> None:
    """No row remembers an unversioned key's past: one written within the window is missing,
    new or replacing (its old content is gone), and one deleted within it too."""
    _history(s3, bucket, clock)
    add(operator, operation="ListObjectsV2", bucket=bucket, fault="stale", staleSeconds=30, times=1)
    assert _listed(s3, bucket) == [("kept.txt", 3)]
    assert _listed(s3, bucket) == [("kept.txt", 3), ("new.txt", 3), ("replaced.txt", 6)]


def test_a_stale_listing_rolls_up_prefixes_as_they_were(
    operator: httpx.Client, clock: httpx.Client, s3: Any, bucket: str
) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="a/1", Body=b"")
    s3.put_object(Bucket=bucket, Key="c", Body=b"")
    assert clock.post(CLOCK, json={"advanceSeconds": 60}).status_code == 200
    s3.put_object(Bucket=bucket, Key="b/1", Body=b"")
    s3.delete_object(Bucket=bucket, Key="a/1")
    add(operator, operation="ListObjectsV2", fault="stale", staleSeconds=30, times=1)
    listed = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["a/"]
    assert [o["Key"] for o in listed["Contents"]] == ["c"]
    listed = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in listed["CommonPrefixes"]] == ["b/"]
