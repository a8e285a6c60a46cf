"""Test mode's control surface attacked from outside (issue 35, point 6): every route under
`/_bucketd/test/` and every spelling of it, by everyone but the operator, on both
listeners, with test mode on and off; the journal read for every kind of secret a client
sends; fault rules that would stall the listener; and a SIGHUP asked to turn test mode on.
Each test checks that nothing changed, not only the status."""

from __future__ import annotations

import base64
import hashlib
import signal
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name

TEST = "/_bucketd/test"
ROUTES = [
    ("GET", "/clock", b""),
    ("POST", "/clock", b'{"advanceSeconds": 86400}'),
    ("DELETE", "/clock", b""),
    ("POST", "/lifecycle", b""),
    ("GET", "/faults", b""),
    ("POST", "/faults", b'{"operation": "*", "fault": "SlowDown", "times": 5}'),
    ("DELETE", "/faults", b""),
    ("GET", "/journal", b""),
    ("DELETE", "/journal", b""),
    ("HEAD", "/clock", b""),
    ("HEAD", "/faults", b""),
    ("HEAD", "/journal", b""),
]
SPELLINGS = [TEST, "/%5Fbucketd/test", "/_bucketd%2Ftest", "/%5f%62ucketd/%74est"]
"""The prefix as sent: each decodes to the one path, and so must meet the one guard."""
NOT_THE_PREFIX = ["/_BUCKETD/test", "/_bucketd/TEST", "//_bucketd/test", "/_bucketd//test"]


def _workers(live: LiveServer) -> set[int]:
    """The server's worker pids (the delivery process, forked first, is the lowest)."""
    assert live.process is not None
    pid = live.process.pid
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return set(sorted(int(child) for child in found)[1:])


def raw(port: int, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> int:
    """The status of one request sent byte for byte (httpx would normalize the target)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"Content-Length: {len(body)}", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = sock.recv(65536).split(b"\r\n", 1)[0]
    return int(head.split(b" ")[1])


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(
        tmp_path_factory.mktemp("hostile") / "data", env={"BUCKETD_TEST_MODE": "true"}
    ).start()
    yield server
    server.stop()


@pytest.fixture
def operator(live: LiveServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {live.admin_key}"}
    with web.client(base_url=live.url + TEST, headers=headers) as http:
        yield http
        assert http.delete("/clock").status_code == 200
        assert http.delete("/faults").status_code == 200


def _state(operator: httpx.Client) -> tuple[Any, ...]:
    """What any route could change: the clock, the rules and their counts, the journal."""
    clock = operator.get("/clock").json()["data"]["offsetSeconds"]
    rules = operator.get("/faults").json()["data"]["rules"]
    journal = operator.get("/journal", params={"protocol": "v1"}).json()["data"]["entries"]
    return clock, rules, len(journal)


def _outsiders(live: LiveServer, operator: httpx.Client) -> dict[str, dict[str, str]]:
    """Every kind of caller but the operator, as the Authorization header each sends."""
    with live.client() as admin:
        tenant = admin.post("/orgs", json={"name": unique_name("tenant"), "plan": "free"})
        tenant_keys = f"/orgs/{tenant.json()['data']['id']}/keys"
        scopes = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"]
        made = {
            "tenant admin": admin.post(tenant_keys, json={"name": "t", "scopes": scopes}),
            "own org, no orgs:manage": admin.post("/keys", json={"name": "o", "scopes": scopes}),
        }
        bucket = new_bucket(admin, unique_name("scoped"))["id"]
        made["bucket-scoped"] = admin.post(
            "/keys", json={"name": "b", "scopes": ["files:read"], "bucketId": bucket}
        )
        made["revoked operator"] = admin.post(
            "/keys", json={"name": "r", "scopes": ["orgs:manage"]}
        )
        revoked = made["revoked operator"].json()["data"]["id"]
        assert admin.delete(f"/keys/{revoked}").status_code == 200
        soon = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        made["expired operator"] = admin.post(
            "/keys", json={"name": "e", "scopes": ["orgs:manage"], "expiresAt": soon}
        )
    assert all(answer.status_code == 201 for answer in made.values()), made
    callers = {name: "Bearer " + answer.json()["data"]["secret"] for name, answer in made.items()}
    access, secret = live.s3_credentials()
    callers["S3 credential (Basic)"] = (
        "Basic " + base64.b64encode(f"{access}:{secret}".encode()).decode()
    )
    callers["S3 signature"] = (
        f"AWS4-HMAC-SHA256 Credential={access}/20260101/us-east-1/s3/aws4_request"
    )
    callers["a guessed key"] = "Bearer " + live.admin_key[:-4] + "AAAA"
    assert operator.post("/clock", json={"advanceSeconds": 2 * 3600}).status_code == 200
    return {"nobody": {}} | {name: {"Authorization": value} for name, value in callers.items()}


def test_on_no_one_but_the_operator_reaches_any_route_by_any_spelling(
    live: LiveServer, operator: httpx.Client
) -> None:
    outsiders = _outsiders(live, operator)  # the clock moved past the expiring key's time
    assert operator.post(
        "/faults", json={"operation": "HeadBucket", "fault": "SlowDown", "times": 1}
    )
    with live.client() as admin:
        assert admin.get("/buckets").status_code == 200  # one entry in the journal
    before = _state(operator)
    refused = {}
    for who, headers in outsiders.items():
        for method, route, body in ROUTES:
            for prefix in SPELLINGS:
                refused[who, method, prefix + route] = raw(
                    live.port, method, prefix + route, headers, body
                )
            for prefix in NOT_THE_PREFIX:
                assert raw(live.port, method, prefix + route, headers, body) == 404
            options = raw(live.port, "OPTIONS", TEST + route, headers)
            assert options == 405  # the route exists (test mode is on), and that is all
    holes = {request: status for request, status in refused.items() if status not in (401, 403)}
    assert holes == {}
    assert _state(operator) == before
    assert refused["tenant admin", "GET", TEST + "/clock"] == 403
    assert refused["nobody", "GET", TEST + "/journal"] == 401
    assert refused["expired operator", "GET", TEST + "/faults"] == 401


def test_the_s3_listener_serves_no_part_of_the_surface(
    live: LiveServer, operator: httpx.Client
) -> None:
    """There `/_bucketd/...` is an object of a bucket named "_bucketd": whoever asks, and
    however it is signed, the clock, the rules and the journal stay as they were."""
    access, secret = live.s3_credentials()
    before = _state(operator)
    bearer = {"Authorization": f"Bearer {live.admin_key}"}
    for method, route, body in ROUTES:
        for headers in ({}, bearer):
            status = raw(live.s3_port, method, TEST + route, headers, body)
            assert status >= 400, (method, route, headers)
    s3 = live.s3(access, secret)
    with pytest.raises(ClientError):
        s3.put_object(Bucket="_bucketd", Key="test/clock", Body=b'{"advanceSeconds": 86400}')
    with pytest.raises(ClientError):
        s3.delete_object(Bucket="_bucketd", Key="test/faults")
    assert _state(operator) == before


def test_off_every_route_method_and_spelling_is_an_unknown_path(local_server: LiveServer) -> None:
    operator = {"Authorization": f"Bearer {local_server.admin_key}"}
    preflight = {"Origin": "http://allowed.test:1", "Access-Control-Request-Method": "POST"}
    for method in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"):
        for headers in ({}, operator, preflight):
            unknown = raw(local_server.port, method, "/_nothing/at/all", headers)
            for _, route, body in ROUTES:
                for prefix in [*SPELLINGS, TEST + "/"]:
                    sent = raw(local_server.port, method, prefix + route, headers, body)
                    assert sent == unknown, (method, prefix + route, headers)
    assert not (local_server.data_dir / "test-journal.db").exists()


def test_the_journal_never_holds_a_secret(live: LiveServer, operator: httpx.Client) -> None:
    """Every secret a client sends, by every means it has: the journal holds none of them,
    in any encoding, and none of the headers that carry them."""
    access, secret = live.s3_credentials()
    s3 = live.s3(access, secret)
    bucket = unique_name("secrets")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a", Body=b"x")
    customer = b"c" * 32
    secrets = {secret, live.admin_key, customer.decode()}
    secrets |= {
        base64.b64encode(customer).decode(),
        base64.b64encode(hashlib.md5(customer).digest()).decode(),
    }
    with pytest.raises(ClientError):
        s3.copy_object(
            Bucket=bucket,
            Key="b",
            CopySource={"Bucket": bucket, "Key": "a"},
            CopySourceSSECustomerAlgorithm="AES256",
            CopySourceSSECustomerKey=customer.decode(),
        )
    token = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN" + "z" * 40
    secrets.add(token)
    tokened = boto3.client(
        "s3",
        endpoint_url=live.s3_url,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        aws_session_token=token,
        region_name="us-east-1",
    )
    try:
        tokened.head_object(Bucket=bucket, Key="a")
    except ClientError:
        pass  # whether the server takes a session token or not, it was sent
    tokened.close()
    urls = [
        s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "a"}),
        live.s3(access, secret, signature_version="s3").generate_presigned_url(
            "get_object", Params={"Bucket": bucket, "Key": "a"}
        ),
        s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "p"}),
    ]
    for url in urls:
        secrets |= {value for name, value in parse_qsl(urlsplit(url).query) if "ignature" in name}
    assert web.get(urls[0], headers={"Cookie": "session=COOKIE-SECRET-1"}).status_code == 200
    assert web.get(urls[1]).status_code == 200
    assert web.request("PUT", urls[2], content=b"y").status_code == 200
    secrets.add("COOKIE-SECRET-1")
    form = s3.generate_presigned_post(bucket, "form.txt")
    signed_form = {n: v for n, v in form["fields"].items() if n.endswith(("policy", "signature"))}
    assert len(signed_form) == 2, form
    secrets |= set(signed_form.values())
    posted = web.request("POST", form["url"], data=form["fields"], files={"file": b"z"})
    assert posted.status_code in (200, 204), posted.text
    basic = base64.b64encode(f"{access}:{secret}".encode()).decode()
    with web.client(base_url=live.url + "/v1") as v1:
        bucket_id = v1.get("/buckets", headers={"Authorization": "Basic " + basic}).json()
        bucket_id = next(b["id"] for b in bucket_id["data"] if b["name"] == bucket)
        signed = v1.post(
            f"/buckets/{bucket_id}/sign/a",
            json={"expiresIn": 600},
            headers={"Authorization": f"Bearer {live.admin_key}", "Cookie": "s=COOKIE-SECRET-2"},
        )
        assert signed.status_code in (200, 201), signed.text
        link = signed.json()["data"]["url"]
        query = dict(parse_qsl(urlsplit(link).query))
        secrets |= {value for name, value in query.items() if "sig" in name or "token" in name}
        assert len(secrets) >= 11, query  # the link carries a signature or a token
        secrets.add("COOKIE-SECRET-2")
        assert web.get(link).status_code == 200
    journal = operator.get("/journal").text
    assert len(operator.get("/journal").json()["data"]["entries"]) >= 10
    leaked = sorted(s for s in secrets if len(s) >= 8 and s in journal)
    assert leaked == []
    for header in ("authorization", "cookie", "security-token", "customer-key", "signature"):
        assert header not in journal.lower()


@pytest.mark.parametrize(
    ("field", "pattern"),
    [("key", "[" * 1025), ("bucket", "*" * 256), ("key", "[" * 60_000)],
)
def test_a_pattern_long_enough_to_stall_the_listener_is_refused(
    operator: httpx.Client, field: str, pattern: str
) -> None:
    """`fnmatch` translates a pattern of many `[` in time quadratic in its length, on the
    event loop of the worker that matches it, under the table's lock: 20,000 of them took
    10 s, and a rule of 60,000 (a /v1 JSON body holds 64 KiB) was taken, to stall every S3
    request for over a minute."""
    refused = operator.post(
        "/faults", json={"operation": "HeadObject", "fault": "SlowDown", "times": 1, field: pattern}
    )
    assert refused.status_code == 400, refused.text
    assert f"{field} must be a pattern of at most" in refused.json()["error"]["message"]
    assert operator.get("/faults").json()["data"]["rules"] == []


def test_the_longest_patterns_cost_the_listener_little(
    live: LiveServer, operator: httpx.Client
) -> None:
    for n in range(10):
        rule = {"operation": "HeadBucket", "fault": "SlowDown", "times": 1}
        added = operator.post("/faults", json=rule | {"key": "[" * 1023 + str(n)})
        assert added.status_code == 201, added.text
    s3 = live.s3(*live.s3_credentials())
    bucket = unique_name("patterns")
    s3.create_bucket(Bucket=bucket)
    began = time.monotonic()
    s3.head_bucket(Bucket=bucket)  # names no key: no key pattern fires
    assert time.monotonic() - began < 5


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sighup_does_not_turn_test_mode_on(tmp_path: Path, workers: int) -> None:
    live = LiveServer(tmp_path / "data", workers=workers).start()
    try:
        headers = {"Authorization": f"Bearer {live.admin_key}"}
        assert web.get(live.url + TEST + "/clock", headers=headers).status_code == 404
        live.config_path.write_text("test_mode = true\n" + TEST_CONFIG)
        old = _workers(live)
        assert live.process is not None
        live.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        if workers > 1:  # each worker replaced by one built from the settings read again
            while len(now := _workers(live)) != workers or now & old:
                assert time.monotonic() < deadline, live.log_path.read_text()
                time.sleep(0.05)
        else:
            while "SIGHUP: settings read again" not in live.log_path.read_text():
                assert time.monotonic() < deadline, live.log_path.read_text()
                time.sleep(0.05)
        for _ in range(4):  # fresh connections: each worker
            answer = web.get(live.url + TEST + "/clock", headers=headers)
            assert answer.status_code == 404, answer.text
        assert not (live.data_dir / "test-journal.db").exists()
    finally:
        live.stop()
