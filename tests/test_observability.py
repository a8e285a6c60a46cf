"""Request ids, the JSON access log (and that no secret reaches it), and GET /metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from gateway.http.metrics import Metrics
from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.metrics import metrics
from tests.support.names import unique_name
from tests.support.rawhttp import connect, read_response, request_head

CONFIG = (
    TEST_CONFIG
    + """
[plans.free]
requests_per_minute = 4
max_storage_bytes = 1000

[uploads]
deadline_seconds = 1
"""
)
FILE_ROUTE = "/v1/buckets/{bucket_id}/files/{key:path}"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("observe") / "data", CONFIG).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def watcher(live: LiveServer) -> str:
    """A key with the metrics:read scope (the admin key has the API's scopes only)."""
    org = web.get(
        f"{live.url}/v1/organization", headers={"Authorization": f"Bearer {live.admin_key}"}
    ).json()["data"]["id"]
    out = live.cli("keys", "create", "--org", org, "--scopes", "metrics:read", "--name", "prom")
    return out.strip().splitlines()[-1]


def access_lines(live: LiveServer) -> list[dict]:
    return [
        json.loads(line)
        for line in live.log_path.read_text().splitlines()
        if line.startswith("{") and '"request_id"' in line
    ]


def test_every_response_carries_a_request_id(live: LiveServer) -> None:
    with live.client() as http:
        for response in (
            http.get("/organization"),
            http.get("/nope"),
            web.get(f"{live.url}/healthz"),
            web.get(f"{live.url}/v1/buckets"),
        ):
            assert len(response.headers["x-request-id"]) == 32
        kept = http.get("/organization", headers={"X-Request-Id": "trace-42.abc"})
        assert kept.headers["x-request-id"] == "trace-42.abc"
        for bad in ("has space", "x" * 200, "ü".encode()):
            replaced = http.get("/organization", headers={"X-Request-Id": bad})
            assert len(replaced.headers["x-request-id"]) == 32
    s3 = live.s3()
    answer = s3.list_buckets()["ResponseMetadata"]
    assert answer["HTTPHeaders"]["x-request-id"] == answer["RequestId"]


def test_access_log_has_one_json_line_per_request(live: LiveServer) -> None:
    with live.client() as http:
        bucket = new_bucket(http, unique_name())
        marker = f"trace-{unique_name()}"
        response = http.put(
            f"/buckets/{bucket['id']}/files/dir/x.txt",
            content=b"hello",
            headers={"Content-Type": "text/plain", "X-Request-Id": marker},
        )
        assert response.status_code == 201
    assert web.get(live.s3_url + "/").status_code == 403  # an S3 request of its own
    time.sleep(0.2)
    line = next(entry for entry in access_lines(live) if entry["request_id"] == marker)
    key_id = web.get(
        f"{live.url}/v1/keys", headers={"Authorization": f"Bearer {live.admin_key}"}
    ).json()["data"][0]["id"]
    assert line["method"] == "PUT" and line["route"] == FILE_ROUTE and line["status"] == 201
    assert line["bytes_in"] == 5 and line["bytes_out"] > 0 and line["duration_ms"] > 0
    assert line["org_id"].startswith("svc_") and line["key_id"] == key_id
    assert line["listener"] == "api" and line["time"].endswith("Z")
    s3_lines = [entry for entry in access_lines(live) if entry["listener"] == "s3"]
    assert s3_lines and all(entry["route"] for entry in s3_lines)


def test_no_secret_reaches_the_log(live: LiveServer) -> None:
    """Keys, S3 secrets, signatures and presigned URLs are used; none is ever logged."""
    with live.client() as http:
        created = http.post("/keys", json={"name": "leak", "scopes": ["files:read"]}).json()
        secret = created["data"]["secret"]
        web.get(f"{live.url}/v1/organization", headers={"Authorization": f"Bearer {secret}"})
        web.get(f"{live.url}/v1/organization", headers={"Authorization": "Bearer svc_wrong"})
        bucket = new_bucket(http, unique_name())
    access, s3_secret = live.s3_credentials()
    s3 = live.s3(access, s3_secret)
    s3.put_object(Bucket=bucket["name"], Key="secret-file-name.txt", Body=b"x")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket["name"], "Key": "secret-file-name.txt"}
    )
    assert web.get(url).status_code == 200
    query = parse_qs(urlsplit(url).query)
    signature = (query.get("X-Amz-Signature") or query["Signature"])[0]
    time.sleep(0.2)
    log = live.log_path.read_text()
    after_start = log.split("S3 endpoint at", 1)[1]  # the first start prints the admin key
    for leaked in (live.admin_key, secret, s3_secret, signature, "secret-file-name"):
        assert leaked not in after_start, leaked


def test_metrics_need_the_scope(live: LiveServer, watcher: str) -> None:
    assert web.get(f"{live.url}/metrics").status_code == 401
    admin = web.get(f"{live.url}/metrics", headers={"Authorization": f"Bearer {live.admin_key}"})
    assert admin.status_code == 403
    assert admin.json()["error"]["code"] == "insufficient_scope"
    banner = next(line for line in live.log_path.read_text().splitlines() if "first start" in line)
    assert "every /v1 scope" in banner and "--scopes metrics:read" in banner  # what it says
    with live.client() as http:
        escalation = http.post("/keys", json={"name": "m", "scopes": ["metrics:read"]})
        assert escalation.status_code == 403
    assert metrics(live, watcher)


def test_metrics_count_requests_bytes_and_storage(live: LiveServer, watcher: str) -> None:
    before = metrics(live, watcher)
    with live.client() as http:
        bucket = new_bucket(http, unique_name())
        for key in ("a", "b"):  # the same content twice: one blob
            http.put(
                f"/buckets/{bucket['id']}/files/{key}",
                content=b"x" * 1000,
                headers={"Content-Type": "text/plain"},
            )
        http.get(f"/buckets/{bucket['id']}/files/a")
        org = http.get("/organization").json()["data"]
    after = metrics(live, watcher)
    created = (
        "bucketd_requests_total",
        (("listener", "api"), ("method", "PUT"), ("route", FILE_ROUTE), ("status", "201")),
    )
    assert after[created] - before.get(created, 0) == 2
    latency = (
        "bucketd_request_duration_seconds_count",
        (("listener", "api"), ("route", FILE_ROUTE)),
    )
    assert after[latency] - before.get(latency, 0) >= 3
    received = ("bucketd_received_bytes_total", (("listener", "api"),))
    assert after[received] - before.get(received, 0) >= 2000
    sent = ("bucketd_sent_bytes_total", (("listener", "api"),))
    assert after[sent] - before.get(sent, 0) >= 1000
    assert after[("bucketd_stored_bytes", ())] >= org["usage"]["storedBytes"]
    assert after[("bucketd_files", ())] >= org["usage"]["files"]
    assert after[("bucketd_blobs", ())] < after[("bucketd_files", ())]
    assert after[("bucketd_dedupe_ratio", ())] > 1
    assert after[("bucketd_index_write_seconds_count", ())] > before.get(
        ("bucketd_index_write_seconds_count", ()), 0
    )


def refused(live: LiveServer, watcher: str) -> dict[str, float]:
    return {
        dict(labels)["reason"]: value
        for (name, labels), value in metrics(live, watcher).items()
        if name == "bucketd_uploads_refused_total"
    }


def test_refused_uploads_are_counted_by_reason(live: LiveServer, watcher: str) -> None:
    with live.client() as http:
        bucket = new_bucket(
            http, unique_name(), maxUploadBytes=10, allowedContentTypes=["text/plain"]
        )
        path = f"/buckets/{bucket['id']}/files/f"
        assert (
            http.put(path, content=b"x" * 11, headers={"Content-Type": "text/plain"}).status_code
            == 413
        )
        assert (
            http.put(path, content=b"x", headers={"Content-Type": "image/png"}).status_code == 415
        )
    with connect(live.url) as sock:
        sock.sendall(
            request_head(
                "PUT",
                f"/v1{path}",
                {
                    "Authorization": f"Bearer {live.admin_key}",
                    "Content-Type": "text/plain",
                    "Content-Length": "5",
                },
            )
            + b"ab"
        )
        assert read_response(sock).status == 408
    # A free organization's 5 requests: over its quota (402), then over its 4 a minute
    # (429). The limit's window is the clock minute: a run that crossed into the next one
    # (its first and last answers name two resets) is done again with a new organization.
    for attempt in range(3):
        name = f"small-{attempt}"  # an organization's name is unique
        org = live.cli("orgs", "create", name, "--plan", "free").strip().splitlines()[-1]
        scopes = "buckets:write,buckets:read,files:write"
        secret = live.cli("keys", "create", "--org", org, "--scopes", scopes).split()[-1]
        with live.client(secret) as tiny:
            made = tiny.post("/buckets", json={"name": unique_name(), "region": "us-east-1"})
            time.sleep(0.2)
            puts = [
                tiny.put(
                    f"/buckets/{made.json()['data']['id']}/files/big",
                    content=b"x" * 2000,
                    headers={"Content-Type": "text/plain"},
                )
                for _ in range(4)
            ]
        if made.headers["X-RateLimit-Reset"] == puts[-1].headers["X-RateLimit-Reset"]:
            break
    answers = [put.status_code for put in puts]
    assert 402 in answers and 429 in answers
    counts = refused(live, watcher)
    assert counts["too_large"] >= 1 and counts["unsupported_type"] >= 1
    assert counts["timeout"] >= 1 and counts["quota"] >= 1 and counts["rate"] >= 1


def test_metrics_public_needs_no_key(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", "metrics_public = true\n" + TEST_CONFIG).start()
    try:
        response = web.get(f"{live.url}/metrics")
        assert response.status_code == 200 and "bucketd_requests_total" in response.text
    finally:
        live.stop()


def test_access_log_can_be_turned_off(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", "access_log = false\n" + TEST_CONFIG).start()
    try:
        with live.client() as http:
            assert http.get("/organization").status_code == 200
    finally:
        live.stop()
    assert not access_lines(live)


def test_metrics_keep_each_label_set_apart_after_the_first_request() -> None:
    """`Metrics.record` keeps the labelled children it looked up: a request with a label set
    seen before must still count under its own labels, never a neighbour's."""
    counted = Metrics()
    for method, status in (("PUT", 200), ("GET", 200), ("PUT", 200), ("PUT", 403)):
        counted.record("s3", "PutObject", method, status, 0.001, 10, 1, 0, method == "PUT")
    counted.record("api", "PutObject", "PUT", 200, 0.001, 5, 0, 0, True)

    def sample(name: str, **labels: str) -> float | None:
        return counted.registry.get_sample_value(name, labels)

    assert (
        sample(
            "bucketd_requests_total", listener="s3", route="PutObject", method="PUT", status="200"
        )
        == 2
    )
    assert (
        sample(
            "bucketd_requests_total", listener="s3", route="PutObject", method="GET", status="200"
        )
        == 1
    )
    assert (
        sample(
            "bucketd_requests_total", listener="s3", route="PutObject", method="PUT", status="403"
        )
        == 1
    )
    assert (
        sample(
            "bucketd_requests_total", listener="api", route="PutObject", method="PUT", status="200"
        )
        == 1
    )
    assert sample("bucketd_request_duration_seconds_count", listener="s3", route="PutObject") == 4
    assert sample("bucketd_received_bytes_total", listener="s3") == 40
    assert sample("bucketd_received_bytes_total", listener="api") == 5
    assert sample("bucketd_sent_bytes_total", listener="s3") == 4
