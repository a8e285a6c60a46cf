"""Events: every change to a file produces exactly one event (S3's message format, signed),
delivered to a real receiver on loopback; retries, parking and redelivery; refused targets;
the live stream resumed after a disconnect with no gap."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.delivery.posting import CheckedResolver
from gateway.delivery.targets import Refused, check_literal
from tests.support import web
from tests.support.live import SHARED_CONFIG, LiveServer, new_bucket
from tests.support.metrics import metrics, metrics_key
from tests.support.names import unique_name
from tests.support.orgs import make_org
from tests.support.receiver import Receiver

TEXT = {"Content-Type": "text/plain"}


def verify(secret: str, header: str, body: bytes, tolerance: float = 300) -> bool:
    """The receiver's check, as docs/api.md shows it."""
    parts = dict(item.split("=", 1) for item in header.split(","))
    timestamp = int(parts["t"])
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    return hmac.compare_digest(expected, parts["v1"]) and abs(time.time() - timestamp) < tolerance


@pytest.fixture
def http(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as client:
        yield client


def webhook(http: httpx.Client, bucket: dict, url: str, **fields: Any) -> dict:
    made = http.post(f"/buckets/{bucket['id']}/webhooks", json={"url": url, **fields})
    assert made.status_code == 201, made.text
    return made.json()["data"]


def test_every_change_is_one_signed_event_in_s3s_format(
    local_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    bucket = new_bucket(http, unique_name("ev"), versioning="enabled")
    name = bucket["name"]
    hook = webhook(http, bucket, receiver.url)
    assert hook["secret"].startswith("whsec_") and hook["events"] == ["s3:*"]
    assert "secret" not in http.get(f"/buckets/{bucket['id']}/webhooks/{hook['id']}").json()["data"]
    s3 = local_server.s3(signature_version="s3v4")
    files = f"/buckets/{bucket['id']}/files"
    assert http.put(f"{files}/a.txt", content=b"aa", headers=TEXT).status_code == 201
    first_b = s3.put_object(Bucket=name, Key="b b.txt", Body=b"bbb")["VersionId"]
    s3.put_object(Bucket=name, Key="b b.txt", Body=b"bbbb")
    s3.copy_object(Bucket=name, Key="c.txt", CopySource=f"{name}/b b.txt")
    upload = s3.create_multipart_upload(Bucket=name, Key="d.bin")["UploadId"]
    part = s3.upload_part(Bucket=name, Key="d.bin", UploadId=upload, PartNumber=1, Body=b"d")
    s3.complete_multipart_upload(
        Bucket=name,
        Key="d.bin",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    post = s3.generate_presigned_post(Bucket=name, Key="e.txt")
    assert (
        web.post(post["url"], data=post["fields"], files={"file": ("e", b"e")}).status_code == 204
    )
    assert http.patch(f"{files}/a.txt", json={"key": "a2.txt"}).status_code == 200
    s3.delete_object(Bucket=name, Key="c.txt")
    s3.delete_object(Bucket=name, Key="b b.txt", VersionId=first_b)
    versions = http.get(f"/buckets/{bucket['id']}/versions", params={"key": "c.txt"}).json()
    old = next(v for v in versions["data"] if not v["deleteMarker"])["versionId"]
    restored = http.post(f"/buckets/{bucket['id']}/versions/{old}/restore", json={"key": "c.txt"})
    assert restored.status_code == 201
    expected = [
        ("ObjectCreated:Put", "a.txt"),
        ("ObjectCreated:Put", "b+b.txt"),
        ("ObjectCreated:Put", "b+b.txt"),
        ("ObjectCreated:Copy", "c.txt"),
        ("ObjectCreated:CompleteMultipartUpload", "d.bin"),
        ("ObjectCreated:Post", "e.txt"),
        ("ObjectRemoved:DeleteMarkerCreated", "a.txt"),
        ("ObjectCreated:Copy", "a2.txt"),
        ("ObjectRemoved:DeleteMarkerCreated", "c.txt"),
        ("ObjectRemoved:Delete", "b+b.txt"),
        ("ObjectCreated:Copy", "c.txt"),
    ]
    records = receiver.wait_for(len(expected))
    time.sleep(0.3)  # nothing more arrives
    # Order is kept per key; across keys, deliveries run side by side: compare in seq order.
    records = sorted(receiver.records(), key=lambda r: r["s3"]["object"]["sequencer"])
    assert [(r["eventName"], r["s3"]["object"]["key"]) for r in records] == expected
    first = records[1]
    assert first["eventSource"] == "aws:s3" and first["eventVersion"] == "2.1"
    assert first["s3"]["bucket"]["name"] == name
    assert first["s3"]["object"]["size"] == 3
    assert first["s3"]["object"]["eTag"] == hashlib.md5(b"bbb").hexdigest()
    assert first["s3"]["object"]["versionId"] == first_b
    assert first["bucketd"]["bucketId"] == bucket["id"]
    assert first["s3"]["configurationId"] == hook["id"]
    sequencers = [r["s3"]["object"]["sequencer"] for r in records]
    assert len(set(sequencers)) == len(sequencers)
    assert len({r["bucketd"]["eventId"] for r in records}) == len(records)
    for delivery in receiver.received:
        assert verify(hook["secret"], delivery.headers["Bucketd-Signature"], delivery.body)
        assert delivery.headers["Bucketd-Event-Id"] == delivery.record["bucketd"]["eventId"]
        organization = delivery.record["bucketd"]["organizationId"]
        assert delivery.headers["Bucketd-Organization-Id"] == organization
        assert not verify(
            hook["secret"], delivery.headers["Bucketd-Signature"], delivery.body + b" "
        )
    listed = http.get(f"/buckets/{bucket['id']}/webhooks/{hook['id']}/deliveries").json()
    assert {d["status"] for d in listed["data"]} == {"delivered"}
    assert listed["data"][0]["lastStatus"] == 200


def test_filters_narrow_what_a_webhook_gets(http: httpx.Client, receiver: Receiver) -> None:
    bucket = new_bucket(http, unique_name("evf"))
    webhook(http, bucket, receiver.url, events=["s3:ObjectRemoved:*"], prefix="logs/", suffix=".gz")
    files = f"/buckets/{bucket['id']}/files"
    for key in ("logs/a.gz", "logs/b.txt", "other/c.gz"):
        http.put(f"{files}/{key}", content=b"x", headers=TEXT)
        http.delete(f"{files}/{key}")
    records = receiver.wait_for(1)
    time.sleep(0.3)
    assert [(r["eventName"], r["s3"]["object"]["key"]) for r in receiver.records()] == [
        ("ObjectRemoved:Delete", "logs/a.gz")
    ]
    assert records


def test_a_receiver_down_gets_everything_in_order_once_up(
    http: httpx.Client, receiver: Receiver
) -> None:
    bucket = new_bucket(http, unique_name("evd"))
    hook = webhook(http, bucket, receiver.url)
    receiver.status = 503
    files = f"/buckets/{bucket['id']}/files"
    for n in range(5):
        for key in ("x", "y"):
            http.put(f"{files}/{key}", content=f"{key}{n}".encode(), headers=TEXT)
    time.sleep(0.5)
    pending = http.get(f"/buckets/{bucket['id']}/webhooks/{hook['id']}/deliveries").json()["data"]
    assert pending and all(d["status"] == "pending" for d in pending)
    assert any(d["attempts"] >= 1 and d["lastStatus"] == 503 for d in pending)
    receiver.status = 200
    records = receiver.wait_for(10)
    for key in ("x", "y"):
        sizes = [r["s3"]["object"]["sequencer"] for r in records if r["s3"]["object"]["key"] == key]
        assert sizes == sorted(sizes) and len(sizes) == 5


@pytest.mark.slow  # waits out the retry period
def test_failures_are_parked_and_redelivered(http: httpx.Client, receiver: Receiver) -> None:
    bucket = new_bucket(http, unique_name("evp"))
    hook = webhook(http, bucket, receiver.url)
    receiver.status = 500
    for key in ("k", "k2"):
        http.put(f"/buckets/{bucket['id']}/files/{key}", content=b"k", headers=TEXT)
    path = f"/buckets/{bucket['id']}/webhooks/{hook['id']}"
    deadline = time.monotonic() + 15
    while len(http.get(f"{path}/deliveries", params={"status": "failed"}).json()["data"]) < 2:
        assert time.monotonic() < deadline, "the deliveries were never parked"
        time.sleep(0.1)
    failed = http.get(f"{path}/deliveries", params={"status": "failed"}).json()["data"][-1]
    assert failed["lastStatus"] == 500 and failed["attempts"] >= 2 and failed["doneAt"]
    receiver.status = 200
    again = http.post(f"{path}/redeliver", json={"eventId": failed["id"]})
    assert again.json()["data"]["count"] == 1
    assert receiver.wait_for(1)[0]["bucketd"]["eventId"] == failed["id"]
    every = http.post(f"{path}/redeliver", json={})  # every failed one: the other
    assert every.json()["data"]["count"] == 1
    assert len({r["bucketd"]["eventId"] for r in receiver.wait_for(2)}) == 2
    assert http.post(f"{path}/redeliver", json={"eventId": "evt_" + "9" * 16}).status_code == 404
    assert http.delete(f"/buckets/{bucket['id']}", params={"force": "true"}).status_code == 200
    assert http.get(path).status_code == 404  # a bucket's webhooks go with it


@pytest.mark.anyio
async def test_targets_must_be_public_or_allowed(http: httpx.Client) -> None:
    bucket = new_bucket(http, unique_name("evr"))
    for url in ("http://10.0.0.1/hook", "http://localhost:9/hook", "http://[::1]/x", "ftp://x/"):
        refused = http.post(f"/buckets/{bucket['id']}/webhooks", json={"url": url})
        assert refused.status_code == 400, url
    with pytest.raises(Refused):  # a name checked at delivery, by what it resolves to
        await CheckedResolver([]).resolve("localhost", 9)
    assert await CheckedResolver(["127.0.0.1"]).resolve("localhost", 9)
    with pytest.raises(Refused):
        check_literal("http://10.1.2.3/hook", [])
    check_literal("http://10.1.2.3/hook", ["10.0.0.0/8"])


def test_the_stream_resumes_after_a_disconnect_with_no_gap(
    local_server: LiveServer, http: httpx.Client
) -> None:
    bucket = new_bucket(http, unique_name("evs"))
    files = f"/buckets/{bucket['id']}/files"
    headers = {"Authorization": f"Bearer {local_server.admin_key}"}
    url = f"{local_server.url}/v1/events"
    params = {"bucketId": bucket["id"], "types": "s3:ObjectCreated:*"}

    def read(stream: Any, count: int) -> list[tuple[str, dict]]:
        frames, current = [], {}
        for line in stream.iter_lines():
            if line.startswith("id: "):
                current["id"] = line[4:]
            elif line.startswith("data: "):
                current["data"] = json.loads(line[6:])
            elif line == "" and "data" in current:
                frames.append((current["id"], current["data"]))
                current = {}
                if len(frames) == count:
                    return frames
        raise AssertionError("the stream ended")

    with web.stream("GET", url, params=params, headers=headers, timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        for n in range(3):
            http.put(f"{files}/s{n}", content=b"s", headers=TEXT)
        http.delete(f"{files}/s0")  # not an ObjectCreated event: filtered out
        got = read(stream, 3)
    assert [d["Records"][0]["s3"]["object"]["key"] for _, d in got] == ["s0", "s1", "s2"]
    for n in range(3, 6):  # while nobody listens
        http.put(f"{files}/s{n}", content=b"s", headers=TEXT)
    resumed = {**headers, "Last-Event-ID": got[-1][0]}
    with web.stream("GET", url, params=params, headers=resumed, timeout=10) as stream:
        again = read(stream, 3)
    assert [d["Records"][0]["s3"]["object"]["key"] for _, d in again] == ["s3", "s4", "s5"]
    assert http.get("/events", params={"bucketId": "svc_nope"}).status_code == 404


@pytest.mark.slow  # a server of its own, killed and restarted
def test_events_survive_a_sigkill_between_commit_and_delivery(
    tmp_path: Any, receiver: Receiver
) -> None:
    # SIGKILL keeps the page cache
    live = LiveServer(tmp_path / "data", SHARED_CONFIG, workers=1).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, unique_name("evk"))
            webhook(http, bucket, receiver.url)
            receiver.status = 503
            for n in range(20):
                http.put(f"/buckets/{bucket['id']}/files/k{n % 4}", content=b"x", headers=TEXT)
        deliverer = delivery_process(live)
        live.kill()
        assert gone(deliverer)  # killed with the gateway, not left posting beside the next one
        receiver.status = 200
        live.start()
        receiver.wait_for(20)
        time.sleep(0.2)
        records = receiver.records()
        ids = [r["bucketd"]["eventId"] for r in records]
        assert len(set(ids)) == 20  # every event, each once here (at least once in general)
        for key in ("k0", "k1", "k2", "k3"):
            order = [
                r["s3"]["object"]["sequencer"] for r in records if r["s3"]["object"]["key"] == key
            ]
            assert order == sorted(order) and len(order) == 5
    finally:
        live.stop()


@pytest.mark.slow  # bucketd processes
def test_the_cli_tails_events_and_manages_webhooks(
    local_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    import os
    import queue
    import subprocess
    import sys
    import threading

    from tests.support.commands import bucketd, ok
    from tests.support.live import ROOT

    bucket = new_bucket(http, unique_name("evc"))
    env = {**os.environ, "BUCKETD_URL": local_server.url, "BUCKETD_KEY": local_server.admin_key}
    tail = subprocess.Popen(
        [sys.executable, "-m", "gateway", "events", "tail", bucket["name"]],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert tail.stdout is not None
    stdout = tail.stdout
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout])
    reader.start()
    try:
        # The tail follows events from the moment it is connected, which a loaded machine
        # delays: a probe is written until the tail shows one, then the two that are checked.
        deadline = time.monotonic() + 60
        while True:
            http.put(f"/buckets/{bucket['id']}/files/probe", content=b"x", headers=TEXT)
            try:
                assert "probe" in lines.get(timeout=0.5)
                break
            except queue.Empty:
                assert time.monotonic() < deadline, "the tail never showed an event"
        for key in ("one.txt", "two.txt"):
            http.put(f"/buckets/{bucket['id']}/files/{key}", content=b"x", headers=TEXT)
        seen = [lines.get(timeout=30) for _ in range(2)]
        while "probe" in seen[0]:  # probes written before the first was read
            seen = [seen[1], lines.get(timeout=30)]
    finally:
        tail.terminate()
        tail.wait(10)
        reader.join(10)  # at the end of the stream the tail's exit closed
        stdout.close()
    assert "ObjectCreated:Put" in seen[0] and "one.txt" in seen[0] and "two.txt" in seen[1]
    made = ok(bucketd(local_server, "webhooks", "create", bucket["name"], receiver.url))
    hook_id = made.split()[0]
    assert "whsec_" in made
    assert hook_id in ok(bucketd(local_server, "webhooks", "list", bucket["name"]))
    http.put(f"/buckets/{bucket['id']}/files/three.txt", content=b"x", headers=TEXT)
    receiver.wait_for(1)
    listed = ok(bucketd(local_server, "webhooks", "deliveries", bucket["name"], hook_id))
    assert "three.txt" in listed and "delivered" in listed
    again = ok(bucketd(local_server, "webhooks", "redeliver", bucket["name"], hook_id))
    assert again.startswith("0 ")
    off = ok(bucketd(local_server, "webhooks", "disable", bucket["name"], hook_id))
    assert off.strip() == f"{hook_id} disabled"
    http.put(f"/buckets/{bucket['id']}/files/four.txt", content=b"x", headers=TEXT)
    assert "False" in ok(bucketd(local_server, "webhooks", "list", bucket["name"]))
    assert ok(bucketd(local_server, "webhooks", "enable", bucket["name"], hook_id)).strip() == (
        f"{hook_id} enabled"
    )
    http.put(f"/buckets/{bucket['id']}/files/five.txt", content=b"x", headers=TEXT)
    delivered = [r["s3"]["object"]["key"] for r in receiver.wait_for(2)]
    assert delivered == ["three.txt", "five.txt"]  # four came while it was off
    ok(bucketd(local_server, "webhooks", "delete", bucket["name"], hook_id))
    assert hook_id not in ok(bucketd(local_server, "webhooks", "list", bucket["name"]))
    gone = bucketd(local_server, "webhooks", "delete", bucket["name"], hook_id)
    assert gone.returncode == 1 and "404" in gone.stderr


def test_s3_notification_configuration_drives_the_webhooks(
    local_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    from botocore.exceptions import ClientError

    bucket = new_bucket(http, unique_name("evn"))
    hook = webhook(http, bucket, receiver.url, enabled=False)
    spare = webhook(http, bucket, receiver.url + "?spare")
    s3 = local_server.s3()
    config = {
        "QueueConfigurations": [
            {
                "QueueArn": hook["arn"],
                "Events": ["s3:ObjectCreated:*"],
                "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "img/"}]}},
            }
        ]
    }
    s3.put_bucket_notification_configuration(
        Bucket=bucket["name"], NotificationConfiguration=config
    )
    got = s3.get_bucket_notification_configuration(Bucket=bucket["name"])
    assert got["QueueConfigurations"][0]["QueueArn"] == hook["arn"]
    assert got["QueueConfigurations"][0]["Events"] == ["s3:ObjectCreated:*"]
    assert got["QueueConfigurations"][0]["Filter"]["Key"]["FilterRules"] == [
        {"Name": "Prefix", "Value": "img/"}
    ]
    spare_now = http.get(f"/buckets/{bucket['id']}/webhooks/{spare['id']}").json()["data"]
    assert spare_now["enabled"] is False  # a PUT replaces the whole configuration
    s3.put_object(Bucket=bucket["name"], Key="img/cat.jpg", Body=b"c")
    s3.put_object(Bucket=bucket["name"], Key="doc/a.txt", Body=b"a")
    assert receiver.wait_for(1)[0]["s3"]["object"]["key"] == "img/cat.jpg"
    bad = {"QueueConfigurations": [{"QueueArn": "arn:aws:sqs:us-east-1:1:q", "Events": ["s3:*"]}]}
    with pytest.raises(ClientError) as refused:
        s3.put_bucket_notification_configuration(
            Bucket=bucket["name"], NotificationConfiguration=bad
        )
    assert refused.value.response["Error"]["Code"] == "InvalidArgument"


@pytest.mark.anyio
async def test_the_outbox_keeps_what_a_webhook_still_owes_and_prunes_the_rest(
    tmp_path: Any,
) -> None:
    """Engine-level: past their retention, events every webhook has had are pruned; those
    with a delivery pending, or not yet handed to an enabled webhook, stay."""
    import asyncio

    from storage.attributes import Attributes
    from storage.config import EngineConfig, EventSettings, LifecycleSettings
    from storage.engine import Engine
    from storage.models import Actor

    async def one(data: bytes) -> Any:
        yield data

    config = EngineConfig(
        data_dir=tmp_path / "data",
        lifecycle=LifecycleSettings(interval_seconds=0),
        events=EventSettings(retention_seconds=0, allowed_hosts=["127.0.0.1"]),
    )
    engine = await Engine.open(config)
    try:
        org = await engine.orgs.create("outbox", "pro")
        actor = Actor(org_id=org.id)
        made = await engine.buckets.create(actor, "outbox", "us-east-1")
        while (await engine.buckets.get(actor, made.id)).status != "active":
            await asyncio.sleep(0.001)
        for key in ("a", "b"):
            await engine.files.put(actor, made.id, key, Attributes("text/plain"), one(b"x"))
        assert len(await engine.events.after(actor, made.id, 0, 10)) == 2
        assert await engine.webhooks.prune() == 2  # nobody owes them anything
        hook, _ = await engine.webhooks.create(actor, made.id, "http://127.0.0.1:9/h", ["s3:*"])
        await engine.files.put(actor, made.id, "c", Attributes("text/plain"), one(b"x"))
        assert await engine.webhooks.prune() == 0  # not handed to the webhook yet
        await engine.webhooks.hand_out()
        assert await engine.webhooks.prune() == 0  # its delivery is pending
        ((_, delivery, _),) = await engine.webhooks.due(10)
        await engine.webhooks.settle([engine.webhooks.attempt(delivery, 200, None)])
        assert await engine.webhooks.prune() == 1
        assert hook.enabled
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_the_async_client_has_webhooks_and_the_stream_too(
    local_server: LiveServer, receiver: Receiver
) -> None:
    import bucketd_client as bc

    async with bc.AsyncClient(local_server.url, local_server.admin_key) as client:
        bucket = await client.wait_until_active(
            await client.create_bucket(unique_name("eva"), "us-east-1")
        )
        hook = await client.webhooks.create(bucket.id, receiver.url, ["s3:ObjectCreated:*"])
        assert [h.id for h in await client.webhooks.of_bucket(bucket.id)] == [hook.id]
        await client.upload(bucket.id, "a.txt", b"a")
        stream = client.webhooks.stream(bucket.id, after="evt_0")  # from the outbox's start
        event_id, record = await stream.__anext__()
        assert record["s3"]["object"]["key"] == "a.txt" and event_id.startswith("evt_")
        await stream.aclose()


def delivery_process(live: LiveServer) -> int:
    """The pid of the gateway's one child, its webhook delivery process (in the
    single-process mode, which these tests pin: `--workers` has tests of its own)."""
    assert live.process is not None
    pid = live.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":  # dead, waiting for its parent to reap it
            return True
        time.sleep(0.02)
    return False


def deliveries(live: LiveServer, key: str, outcome: str = "delivered") -> float:
    found = metrics(live, key)
    return found.get(("bucketd_webhook_deliveries_total", (("outcome", outcome),)), 0.0)


def counted(live: LiveServer, key: str, at_least: float) -> float:
    """The deliveries counted once they reach `at_least` (or after 10 s): a receiver has an
    event before its deliverer has settled the batch and counted it."""
    deadline = time.monotonic() + 10
    while (found := deliveries(live, key)) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


@pytest.mark.slow  # a server of its own, whose delivery process is killed
def test_a_process_of_its_own_delivers_and_the_gateway_takes_over_if_it_dies(
    tmp_path: Any, receiver: Receiver
) -> None:
    live = LiveServer(tmp_path / "data", SHARED_CONFIG, workers=1).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, unique_name("evp"))
            webhook(http, bucket, receiver.url)
            deliverer = delivery_process(live)
            key = metrics_key(live)
            for n in range(3):
                http.put(f"/buckets/{bucket['id']}/files/a{n}", content=b"x", headers=TEXT)
            receiver.wait_for(3)
            assert counted(live, key, 3) == 3  # counted by the delivery process
            os.kill(deliverer, signal.SIGKILL)
            assert gone(deliverer)
            for n in range(3):
                http.put(f"/buckets/{bucket['id']}/files/b{n}", content=b"x", headers=TEXT)
            records = receiver.wait_for(6)
            assert sorted(r["s3"]["object"]["key"] for r in records) == [
                "a0",
                "a1",
                "a2",
                "b0",
                "b1",
                "b2",
            ]
            assert counted(live, key, 6) == 6
        assert "this process delivers from now on" in live.log_path.read_text()
    finally:
        live.stop()


@pytest.mark.slow  # a server of its own
def test_the_serving_process_delivers_when_told_to(tmp_path: Any, receiver: Receiver) -> None:
    config = SHARED_CONFIG.replace("[events]", "[events]\nprocess = false")
    assert config != SHARED_CONFIG
    live = LiveServer(tmp_path / "data", config, workers=1).start()
    try:
        assert live.process is not None
        assert not Path(f"/proc/{live.process.pid}/task/{live.process.pid}/children").read_text()
        with live.client() as http:
            bucket = new_bucket(http, unique_name("evi"))
            webhook(http, bucket, receiver.url)
            http.put(f"/buckets/{bucket['id']}/files/k", content=b"x", headers=TEXT)
            assert [r["s3"]["object"]["key"] for r in receiver.wait_for(1)] == ["k"]
        assert counted(live, metrics_key(live), 1) == 1
    finally:
        live.stop()


def test_event_ids_count_one_organizations_writes_only(
    local_server: LiveServer, http: httpx.Client, receiver: Receiver
) -> None:
    """Ids were one server-wide sequence: the gaps between an organization's ids showed it
    how much every other organization wrote (issue 32 point 10). They are numbered per
    organization now, and so is S3's `sequencer`; the stream resumes from one."""
    bucket = new_bucket(http, unique_name("evn"))
    webhook(http, bucket, receiver.url)
    files = f"/buckets/{bucket['id']}/files"
    theirs = local_server.s3(*local_server.s3_credentials(make_org(local_server)))
    other = unique_name("evo")
    theirs.create_bucket(Bucket=other)
    for n in range(3):
        http.put(f"{files}/k{n}", content=b"k", headers=TEXT)
        for m in range(4):  # another organization writes between each of ours
            theirs.put_object(Bucket=other, Key=f"o{n}{m}", Body=b"o")
    records = sorted(receiver.wait_for(3), key=lambda r: r["s3"]["object"]["key"])
    numbers = [int(r["bucketd"]["eventId"].removeprefix("evt_")) for r in records]
    assert numbers == [numbers[0], numbers[0] + 1, numbers[0] + 2]
    sequencers = [int(r["s3"]["object"]["sequencer"], 16) for r in records]
    assert sequencers == numbers
    headers = {
        "Authorization": f"Bearer {local_server.admin_key}",
        "Last-Event-ID": f"evt_{numbers[0]:016d}",
    }
    params = {"bucketId": bucket["id"]}
    seen: list[str] = []
    url = f"{local_server.url}/v1/events"
    with web.stream("GET", url, params=params, headers=headers, timeout=10) as stream:
        for line in stream.iter_lines():
            if line.startswith("id: "):
                seen.append(line[4:])
            if len(seen) == 2:
                break
    assert seen == [r["bucketd"]["eventId"] for r in records[1:]]
