"""Lifecycle rules: the rules as pure functions, passes of the worker on a real index (its
decisions at a chosen moment, locks respected, one pass per cluster), and the S3 and /v1
surfaces with a short lifecycle day on a live server."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from storage.attributes import Attributes
from storage.config import EngineConfig, IndexSettings, LifecycleSettings
from storage.engine import Engine
from storage.errors import InvalidInput
from storage.index import leases
from storage.models import Actor
from storage.rules.lifecycle_rules import (
    Rule,
    aborts_upload,
    check_rules,
    expires_current,
    expires_noncurrent,
    matches,
)
from storage.rules.object_lock import BucketLock, Lock
from storage.rules.tags import encode_tags
from storage.services.lifecycle import Report
from tests.support import web
from tests.support.engine import chunks
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import bucket_id_named, unique_name
from tests.support.postgres import Postgres

DAY = 86_400.0


# The rules


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (Rule(id="none"), "no action"),
        (Rule(expiration_days=0), "expirationDays"),
        (Rule(expiration_days=1, expiration_date="2030-01-01T00:00:00Z"), "not both"),
        (Rule(expiration_date="2030-01-01T12:00:00Z"), "midnight"),
        (Rule(expiration_date="soon"), "ISO 8601"),
        (Rule(expired_object_delete_marker=True, expiration_days=3), "cannot go"),
        (Rule(newer_noncurrent_versions=2, expiration_days=1), "needs noncurrentDays"),
        (Rule(noncurrent_days=1, newer_noncurrent_versions=101), "1 to 100"),
        (Rule(expiration_days=1, size_greater_than=10, size_less_than=10), "less than"),
        (Rule(expiration_days=1, size_less_than=-1), "not negative"),
        (Rule(abort_incomplete_multipart_upload_days=1, size_less_than=5), "size or tags"),
        (Rule(abort_incomplete_multipart_upload_days=1, tags={"a": "b"}), "size or tags"),
        (Rule(expiration_days=1, tags={"aws:x": "b"}), "reserved"),
        (Rule(id="x" * 256, expiration_days=1), "255"),
    ],
)
def test_invalid_rules_are_refused(rule: Rule, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        check_rules([rule])


def test_rules_get_ids_and_must_keep_them_unique() -> None:
    checked = check_rules([Rule(expiration_days=1), Rule(id="b", noncurrent_days=2)])
    assert [rule.id for rule in checked] == ["rule-1", "b"]
    with pytest.raises(InvalidInput, match="unique"):
        check_rules([Rule(id="a", expiration_days=1), Rule(id="a", expiration_days=2)])
    with pytest.raises(InvalidInput, match="1 to"):
        check_rules([])
    dated = check_rules([Rule(expiration_date="2030-01-01")])[0]
    assert dated.expiration_date == "2030-01-01T00:00:00Z"


def test_filters_match_prefix_and_size_strictly_and_skip_disabled_rules() -> None:
    rule = Rule(prefix="logs/", size_greater_than=10, size_less_than=20, expiration_days=1)
    assert matches(rule, "logs/a", 15)
    assert not matches(rule, "logs/a", 10) and not matches(rule, "logs/a", 20)
    assert not matches(rule, "other/a", 15)
    assert not matches(rule, "logs/a", None)  # a size filter never takes a delete marker
    assert not matches(Rule(enabled=False, expiration_days=1), "k", 1)


def test_ages_count_in_days_of_the_setting() -> None:
    rules = (Rule(expiration_days=2),)
    assert not expires_current(rules, "k", 1, 0.0, 2 * 10 - 0.1, 10.0)
    assert expires_current(rules, "k", 1, 0.0, 2 * 10, 10.0)
    dated = (Rule(expiration_date="2030-01-01T00:00:00Z"),)
    assert not expires_current(dated, "k", 1, 0.0, 1_893_455_999.0, DAY)
    assert expires_current(dated, "k", 1, 0.0, 1_893_456_000.0, DAY)
    keep_two = (Rule(noncurrent_days=1, newer_noncurrent_versions=2),)
    assert not expires_noncurrent(keep_two, "k", 1, 0.0, 1, 2 * DAY, DAY)
    assert expires_noncurrent(keep_two, "k", 1, 0.0, 2, 2 * DAY, DAY)
    assert not expires_noncurrent(keep_two, "k", 1, DAY * 1.5, 2, 2 * DAY, DAY)
    aborting = (Rule(prefix="tmp/", abort_incomplete_multipart_upload_days=1),)
    assert aborts_upload(aborting, "tmp/x", 0.0, DAY, DAY)
    assert not aborts_upload(aborting, "keep/x", 0.0, DAY, DAY)


# Passes on a real index


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    opened = await Engine.open(
        EngineConfig(data_dir=tmp_path / "data", lifecycle=LifecycleSettings(interval_seconds=0))
    )
    yield opened
    await opened.close()


async def _bucket(engine: Engine, **fields: Any) -> tuple[Actor, str]:
    org = await engine.orgs.create(unique_name("org"), "pro")
    actor = Actor(org_id=org.id)
    bucket = await engine.buckets.create(actor, unique_name("b"), "us-east-1", **fields)
    while (await engine.buckets.get(actor, bucket.id)).status != "active":
        await asyncio.sleep(0.001)
    return actor, bucket.id


async def _put(
    engine: Engine, actor: Actor, bucket_id: str, key: str, content: bytes, **options: Any
) -> str | None:
    record = await engine.files.put(
        actor, bucket_id, key, Attributes("text/plain", **options), chunks(content)
    )
    return record.version_id


async def _versions(engine: Engine, actor: Actor, bucket_id: str) -> list[tuple[str, bool]]:
    page = await engine.files.list_versions(actor, bucket_id)
    return [(record.key, record.delete_marker) for record, _ in page.versions]


@pytest.mark.anyio
async def test_current_versions_expire_by_age_and_filter(engine: Engine) -> None:
    actor, bucket_id = await _bucket(engine)
    rules = [
        Rule(id="logs", prefix="logs/", expiration_days=1),
        Rule(id="big", size_greater_than=3, expiration_days=3),
    ]
    await engine.buckets.update(actor, bucket_id, {"lifecycle": rules})
    for key, content in (("logs/a", b"1"), ("keep", b"1"), ("big", b"12345")):
        await _put(engine, actor, bucket_id, key, content)
    now = time.time()
    assert await engine.lifecycle.run_pass(now=now) == Report()
    report = await engine.lifecycle.run_pass(now=now + 1.5 * DAY)
    assert report.expired == 1
    assert await _versions(engine, actor, bucket_id) == [("big", False), ("keep", False)]
    report = await engine.lifecycle.run_pass(now=now + 3.5 * DAY)
    assert report.expired == 1
    assert await _versions(engine, actor, bucket_id) == [("keep", False)]
    bucket = await engine.buckets.get(actor, bucket_id)
    assert (bucket.file_count, bucket.size_bytes) == (1, 1)


@pytest.mark.anyio
async def test_in_a_versioned_bucket_expiry_writes_a_marker_and_noncurrent_versions_go(
    engine: Engine,
) -> None:
    actor, bucket_id = await _bucket(engine, versioning="Enabled")
    rules = [
        Rule(id="current", expiration_days=1),
        Rule(id="noncurrent", noncurrent_days=1, newer_noncurrent_versions=1),
        Rule(id="markers", expired_object_delete_marker=True),
    ]
    await engine.buckets.update(actor, bucket_id, {"lifecycle": rules})
    for content in (b"v1", b"v2", b"v3"):
        await _put(engine, actor, bucket_id, "doc", content)
    now = time.time()
    report = await engine.lifecycle.run_pass(now=now + 1.5 * DAY)
    assert (report.expired, report.noncurrent) == (1, 1)
    assert await _versions(engine, actor, bucket_id) == [
        ("doc", True),
        ("doc", False),
        ("doc", False),
    ]
    # The marker made v3 noncurrent: v2 is the second noncurrent version now and goes, the
    # newest noncurrent one stays (newerNoncurrentVersions=1), however old.
    report = await engine.lifecycle.run_pass(now=now + 1.6 * DAY)
    assert (report.expired, report.noncurrent) == (0, 1)
    assert await _versions(engine, actor, bucket_id) == [("doc", True), ("doc", False)]
    assert await engine.lifecycle.run_pass(now=time.time() + 30 * DAY) == Report()
    await engine.buckets.update(
        actor, bucket_id, {"lifecycle": [Rule(id="all", noncurrent_days=1), rules[2]]}
    )
    report = await engine.lifecycle.run_pass(now=time.time() + 3 * DAY)
    assert (report.noncurrent, report.markers) == (1, 1)
    assert await _versions(engine, actor, bucket_id) == []
    bucket = await engine.buckets.get(actor, bucket_id)
    assert (bucket.file_count, bucket.size_bytes) == (0, 0)


@pytest.mark.anyio
async def test_tag_filters_take_only_versions_with_every_tag(engine: Engine) -> None:
    actor, bucket_id = await _bucket(engine)
    rule = Rule(id="tmp", tags={"stage": "tmp", "team": "a"}, expiration_days=1)
    await engine.buckets.update(actor, bucket_id, {"lifecycle": [rule]})
    for key, tags in (
        ("both", {"stage": "tmp", "team": "a"}),
        ("more", {"stage": "tmp", "team": "a", "x": "y"}),
        ("one", {"stage": "tmp"}),
        ("none", None),
    ):
        await _put(engine, actor, bucket_id, key, b"x", tags=encode_tags(tags))
    report = await engine.lifecycle.run_pass(now=time.time() + 2 * DAY)
    assert report.expired == 2
    assert await _versions(engine, actor, bucket_id) == [("none", False), ("one", False)]


def test_s3_lifecycle_tag_filters_round_trip(s3: Any) -> None:
    bucket = unique_name("lc")
    s3.create_bucket(Bucket=bucket)
    rules = [
        {
            "ID": "one-tag",
            "Filter": {"Tag": {"Key": "stage", "Value": "tmp"}},
            "Status": "Enabled",
            "Expiration": {"Days": 3},
        },
        {
            "ID": "and",
            "Filter": {"And": {"Prefix": "logs/", "Tags": [{"Key": "team", "Value": "a"}]}},
            "Status": "Enabled",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 3},
        },
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == rules


@pytest.mark.anyio
async def test_expiry_never_removes_a_locked_version(engine: Engine) -> None:
    actor, bucket_id = await _bucket(engine, object_lock=BucketLock())
    await engine.buckets.update(
        actor, bucket_id, {"lifecycle": [Rule(expiration_days=1, noncurrent_days=1)]}
    )
    await _put(engine, actor, bucket_id, "held", b"x", lock=Lock(legal_hold=True))
    await _put(engine, actor, bucket_id, "held", b"y")
    later = time.time() + 10 * DAY
    first = await engine.lifecycle.run_pass(now=later)
    assert first.expired == 1 and first.locked == 1
    second = await engine.lifecycle.run_pass(now=later)
    assert (second.noncurrent, second.locked) == (1, 1)  # "y", noncurrent now, goes
    page = await engine.files.list_versions(actor, bucket_id)
    kept = [(r.delete_marker, r.legal_hold) for r, _ in page.versions]
    assert (False, True) in kept


@pytest.mark.anyio
async def test_incomplete_uploads_are_aborted_by_age(engine: Engine) -> None:
    actor, bucket_id = await _bucket(engine)
    await engine.buckets.update(
        actor,
        bucket_id,
        {"lifecycle": [Rule(prefix="tmp/", abort_incomplete_multipart_upload_days=2)]},
    )
    await engine.multipart.create(actor, bucket_id, "tmp/big", Attributes("text/plain"))
    kept = await engine.multipart.create(actor, bucket_id, "keep/big", Attributes("text/plain"))
    assert (await engine.lifecycle.run_pass(now=time.time() + DAY)).aborted == 0
    assert (await engine.lifecycle.run_pass(now=time.time() + 2.5 * DAY)).aborted == 1
    left = await engine.multipart.list_uploads(actor, bucket_id, "", None, 10)
    assert [upload.upload_id for upload in left] == [kept.upload_id]


@pytest.mark.anyio
async def test_one_gateway_holds_the_lifecycle_lease(engine: Engine) -> None:
    index = engine._index
    now = time.time()
    assert await index.run(leases.claim_lease, "lifecycle", "a", now, now + 30)
    assert not await index.run(leases.claim_lease, "lifecycle", "b", now + 1, now + 31)
    assert await index.run(leases.claim_lease, "lifecycle", "a", now + 2, now + 32)
    assert await index.run(leases.claim_lease, "lifecycle", "b", now + 33, now + 63)
    assert not await index.run(leases.claim_lease, "lifecycle", "a", now + 34, now + 64)


@pytest.mark.anyio
async def test_the_lease_is_exclusive_on_postgresql(postgres: Postgres, tmp_path: Path) -> None:
    config = EngineConfig(
        data_dir=tmp_path / "data",
        index=IndexSettings(url=postgres.new_database()),
        lifecycle=LifecycleSettings(interval_seconds=0),
    )
    engine = await Engine.open(config)
    try:
        now = time.time()
        claims = await asyncio.gather(
            *(
                engine._index.run(leases.claim_lease, "lifecycle", f"g{n}", now, now + 30)
                for n in range(8)
            )
        )
        assert sum(claims) == 1
    finally:
        await engine.close()


# The S3 and /v1 surfaces, with a half-second day


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("lifecycle") / "data",
        TEST_CONFIG + "\n[lifecycle]\nday_seconds = 0.5\ninterval_seconds = 0.25\n",
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3(live: LiveServer) -> Any:
    return live.s3()


def _wait_for(check: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the lifecycle worker did not act in time"
        time.sleep(0.2)


def test_s3_lifecycle_configuration_round_trips_and_acts(s3: Any) -> None:
    bucket = unique_name("lc")
    s3.create_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)
    assert exc.value.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"
    rules = [
        {
            "ID": "tmp",
            "Filter": {"Prefix": "tmp/"},
            "Status": "Enabled",
            "Expiration": {"Days": 2},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
        {
            "ID": "big-old",
            "Filter": {"And": {"Prefix": "data/", "ObjectSizeGreaterThan": 100}},
            "Status": "Disabled",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 3, "NewerNoncurrentVersions": 2},
        },
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert got == rules
    s3.put_object(Bucket=bucket, Key="tmp/scratch", Body=b"x")
    s3.put_object(Bucket=bucket, Key="keep", Body=b"x")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="tmp/part")["UploadId"]

    def gone() -> bool:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        return keys == ["keep"] and not uploads

    _wait_for(gone)
    with pytest.raises(ClientError):
        s3.list_parts(Bucket=bucket, Key="tmp/part", UploadId=upload)
    s3.delete_bucket_lifecycle(Bucket=bucket)
    with pytest.raises(ClientError):
        s3.get_bucket_lifecycle_configuration(Bucket=bucket)


@pytest.mark.parametrize(
    ("rule", "code"),
    [
        (
            {"ID": "t", "Filter": {"Prefix": ""}, "Status": "Enabled",
             "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]},
            "NotImplemented",
        ),
        (
            {"ID": "t", "Filter": {"Tag": {"Key": "a", "Value": "b"}}, "Status": "Enabled",
             "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
            "InvalidArgument",
        ),
        ({"ID": "t", "Filter": {"Prefix": ""}, "Status": "Enabled"}, "InvalidArgument"),
        (
            {"ID": "t", "Filter": {"Prefix": ""}, "Status": "Enabled",
             "Expiration": {"Days": 1, "ExpiredObjectDeleteMarker": True}},
            "InvalidArgument",
        ),
    ],
)  # fmt: skip
def test_s3_refuses_what_it_cannot_do_and_keeps_the_old_rules(
    s3: Any, rule: dict, code: str
) -> None:
    bucket = unique_name("lc")
    s3.create_bucket(Bucket=bucket)
    kept = [{"ID": "k", "Filter": {"Prefix": "x/"}, "Status": "Enabled", "Expiration": {"Days": 9}}]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": kept})
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration={"Rules": [rule]}
        )
    assert exc.value.response["Error"]["Code"] == code
    assert s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"] == kept


def test_v1_lifecycle_in_the_bucket_json(live: LiveServer) -> None:
    with live.client() as http:
        rules = [{"id": "old", "noncurrentDays": 1}]
        bucket = new_bucket(http, unique_name("lc"), versioning="enabled", lifecycle=rules)
        assert bucket["lifecycle"] == [{"id": "old", "noncurrentDays": 1}]
        url = f"/buckets/{bucket['id']}"
        for bad in ([], [{"id": "x"}], [{"expirationDays": "soon"}], [{"unknown": 1}]):
            answer = http.patch(url, json={"lifecycle": bad})
            assert answer.status_code == 400, (bad, answer.text)
        assert http.get(url).json()["data"]["lifecycle"] == rules
        files = f"{url}/files/doc"
        for content in (b"one", b"two"):
            http.put(files, content=content, headers={"Content-Type": "text/plain"})

        def pruned() -> bool:
            found = http.get(f"{url}/versions", params={"key": "doc"}).json()["data"]
            return len(found) == 1

        _wait_for(pruned)
        assert http.get(files).content == b"two"
        assert http.patch(url, json={"lifecycle": None}).status_code == 200
        assert http.get(url).json()["data"]["lifecycle"] is None


def test_an_object_under_a_one_day_rule_is_gone_within_two_days(live: LiveServer, s3: Any) -> None:
    bucket = unique_name("lc")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        LifecycleConfiguration={
            "Rules": [{"ID": "d", "Filter": {}, "Status": "Enabled", "Expiration": {"Days": 1}}]
        },
    )
    start = time.monotonic()
    s3.put_object(Bucket=bucket, Key="brief", Body=b"x")
    _wait_for(lambda: "Contents" not in s3.list_objects_v2(Bucket=bucket))
    assert time.monotonic() - start >= 0.5  # never before its day is over
    assert [name for name, _ in bucket_events(live, bucket, 2)] == [
        "ObjectCreated:Put",
        "LifecycleExpiration:Delete",  # an expiry is an event of its own kind
    ]


def bucket_events(live: LiveServer, name: str, count: int) -> list[tuple[str, str]]:
    """(name, key) of a bucket's first `count` events, from the outbox."""
    headers = {"Authorization": f"Bearer {live.admin_key}", "Last-Event-ID": "evt_0"}
    with live.client() as http:
        bucket_id = bucket_id_named(http, name)
    found = []
    with web.stream(
        "GET", f"{live.url}/v1/events", params={"bucketId": bucket_id}, headers=headers, timeout=10
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                record = json.loads(line[6:])["Records"][0]
                found.append((record["eventName"], record["s3"]["object"]["key"]))
                if len(found) == count:
                    return found
    raise AssertionError("the stream ended")


def test_an_expiration_date_the_worker_cannot_read_back_is_refused() -> None:
    with pytest.raises(InvalidInput):
        check_rules((Rule(prefix="", expiration_date="0001-01-01T00:00:00Z"),))
    assert check_rules((Rule(prefix="", expiration_date="1970-01-01T00:00:00Z"),))


@pytest.mark.anyio
async def test_one_buckets_broken_rules_stop_no_other_bucket(
    engine: Engine, tmp_path: Path
) -> None:
    """Rules the worker cannot apply (stored before they were refused, or broken by any
    bug) are logged and skipped; every other bucket's rules still run, and the pass counts
    the failure for /metrics."""
    actor, broken = await _bucket(engine)
    other, working = await _bucket(engine)
    for who, bucket_id in ((actor, broken), (other, working)):
        await engine.buckets.update(who, bucket_id, {"lifecycle": [Rule(expiration_days=1)]})
        await _put(engine, who, bucket_id, "old", b"x")
    bad = '[{"id": "x", "prefix": "", "expiration_date": "1-01-01T00:00:00Z"}]'
    with closing(sqlite3.connect(tmp_path / "data" / "index.db")) as db:  # as an old one
        db.execute("UPDATE buckets SET lifecycle = ? WHERE id = ?", (bad, broken))
        db.commit()
    report = await engine.lifecycle.run_pass(now=time.time() + 3 * DAY)
    assert report.failed == 1 and report.expired == 1
    assert await _versions(engine, other, working) == []
    assert engine.lifecycle.failures == 1 and engine.lifecycle.passes == 1


@pytest.mark.parametrize("date", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-01:00"])
def test_a_date_at_the_calendars_edge_is_refused_not_a_500(date: str) -> None:
    with pytest.raises(InvalidInput):
        check_rules((Rule(prefix="", expiration_date=date),))
