"""Test mode and its clock through a real server: the control surface under
`/_bucketd/test/` answers nothing when test mode is off, is the operator's when on, and
moving the clock makes what expires by it expire at once (keys, /v1 signed links, S3
presigned URLs, rate-limit windows) on every worker."""

from __future__ import annotations

import base64
import logging
import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from botocore.exceptions import ClientError

from gateway.api.testmode import MOST_SECONDS
from gateway.runtime.server import Sockets, announce
from gateway.settings import SettingsError, load_settings
from storage.rules.clock import Clock, ClockLimit
from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name

CLOCK = "/_bucketd/test/clock"
CONFIG = (
    TEST_CONFIG
    + """
[plans.free]
requests_per_minute = 3

[uploads]
cleanup_interval_seconds = 0.2
"""
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server of its own (its clock is the whole server's), with two workers: they must
    read one offset; its janitor runs five times a second (abandoned multipart uploads)."""
    server = LiveServer(
        tmp_path_factory.mktemp("clock") / "data",
        CONFIG,
        env={"BUCKETD_TEST_MODE": "true"},
        workers=2,
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3(live: LiveServer) -> Any:
    """One S3 credential of the admin key's organization for the module (making one runs
    the CLI)."""
    return live.s3()


@pytest.fixture
def operator(live: LiveServer) -> Iterator[httpx.Client]:
    """The admin key (orgs:manage) on the API listener's root; the clock put back after."""
    headers = {"Authorization": f"Bearer {live.admin_key}"}
    with web.client(base_url=live.url, headers=headers) as http:
        yield http
        assert http.delete(CLOCK).status_code == 200


def advance(http: httpx.Client, seconds: float) -> dict:
    answer = http.post(CLOCK, json={"advanceSeconds": seconds})
    assert answer.status_code == 200, answer.text
    shown: dict = answer.json()["data"]
    return shown


def test_off_the_surface_is_any_unknown_path(local_server: LiveServer) -> None:
    """The shared server runs `bucketd serve` without test mode: a request to the surface,
    with the admin key or none, gets exactly what a path that never existed gets."""
    headers = {"Authorization": f"Bearer {local_server.admin_key}"}
    for method in ("GET", "POST", "DELETE"):
        for sent in (headers, {}):
            unknown = web.request(method, local_server.url + "/_bucketd/nothing", headers=sent)
            answer = web.request(
                method, local_server.url + CLOCK, headers=sent, json={"advanceSeconds": 1}
            )
            assert unknown.status_code == answer.status_code == 404
            assert answer.content == unknown.content.replace(b"/_bucketd/nothing", CLOCK.encode())
            assert answer.headers.get("content-type") == unknown.headers.get("content-type")


def test_the_clock_is_the_operators(live: LiveServer, operator: httpx.Client) -> None:
    assert web.get(live.url + CLOCK).status_code == 401
    assert web.get(live.url + CLOCK, headers={"Authorization": "Bearer nope"}).status_code == 401
    with live.client() as http:
        made = http.post(
            "/keys", json={"name": unique_name("k"), "scopes": ["keys:manage", "buckets:read"]}
        )
        assert made.status_code == 201, made.text
        manager = made.json()["data"]["secret"]
    refused = web.request(
        "POST",
        live.url + CLOCK,
        json={"advanceSeconds": 60},
        headers={"Authorization": f"Bearer {manager}"},
    )
    assert refused.status_code == 403, refused.text
    assert operator.get(CLOCK).json()["data"]["offsetSeconds"] == 0


def test_moving_setting_and_resetting_the_clock(operator: httpx.Client) -> None:
    before = operator.get(CLOCK).json()["data"]
    assert before["offsetSeconds"] == 0
    moved = advance(operator, 86400)
    assert moved["offsetSeconds"] == 86400
    assert moved["nowUnix"] - before["nowUnix"] >= 86400
    assert advance(operator, 30)["offsetSeconds"] == 86430
    behind = operator.post(CLOCK, json={"offsetSeconds": -3600}).json()["data"]
    assert behind["offsetSeconds"] == -3600
    assert datetime.fromisoformat(behind["now"]) < datetime.now(UTC) - timedelta(minutes=59)
    assert operator.delete(CLOCK).json()["data"]["offsetSeconds"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"advanceSeconds": 1, "offsetSeconds": 1},
        {"advanceSeconds": -1},
        {"offsetSeconds": 1e12},
        {"advanceSeconds": "soon"},
        {"advanceSeconds": 1, "when": "now"},
    ],
)
def test_bad_changes_are_refused_and_change_nothing(operator: httpx.Client, body: dict) -> None:
    advance(operator, 5)
    answer = operator.post(CLOCK, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"]
    assert operator.get(CLOCK).json()["data"]["offsetSeconds"] == 5


def test_every_worker_reads_the_one_offset(live: LiveServer, operator: httpx.Client) -> None:
    """Two workers share the listener; fresh connections reach either (16 of them all
    reaching one worker is a 2**-15 chance), and each reads the offset one of them set."""
    advance(operator, 7200)
    headers = {"Authorization": f"Bearer {live.admin_key}"}
    for _ in range(16):
        with web.client(headers=headers) as fresh:
            assert fresh.get(live.url + CLOCK).json()["data"]["offsetSeconds"] == 7200


def test_a_key_expires_when_its_time_comes(live: LiveServer, operator: httpx.Client) -> None:
    expiry = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with live.client() as http:
        made = http.post(
            "/keys",
            json={"name": unique_name("k"), "scopes": ["buckets:read"], "expiresAt": expiry},
        )
        assert made.status_code == 201, made.text
        secret = made.json()["data"]["secret"]
    with live.client(secret) as http:
        assert http.get("/buckets").status_code == 200
        advance(operator, 2 * 3600)
        assert http.get("/buckets").status_code == 401
        operator.delete(CLOCK)
        assert http.get("/buckets").status_code == 200
    with live.client() as http:  # an expiry the moved clock has passed is refused
        advance(operator, 2 * 3600)
        late = http.post(
            "/keys",
            json={"name": unique_name("k"), "scopes": ["buckets:read"], "expiresAt": expiry},
        )
        assert late.status_code == 400, late.text


def test_a_signed_link_expires(live: LiveServer, operator: httpx.Client) -> None:
    with live.client() as http:
        bucket = new_bucket(http, unique_name("clk"))
        put = http.put(
            f"/buckets/{bucket['id']}/files/a.txt",
            content=b"hello",
            headers={"Content-Type": "text/plain"},
        )
        assert put.status_code == 201, put.text
        signed = http.post(f"/buckets/{bucket['id']}/sign/a.txt", json={"expiresIn": 600})
        assert signed.status_code == 200, signed.text
    url = signed.json()["data"]["url"]
    assert web.get(url).content == b"hello"
    advance(operator, 601)
    expired = web.get(url)
    assert expired.status_code == 401, expired.text
    assert "expired" in expired.json()["error"]["message"]


def test_an_s3_presigned_url_expires_and_signed_requests_still_work(
    s3: Any, operator: httpx.Client
) -> None:
    """The presigned URL's expiry is read by the server's clock; a request signed now is
    judged for skew by the wall's (boto3 signs with the real time), so it still works a
    day later."""
    name = unique_name("clk")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="a.txt", Body=b"hello")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": name, "Key": "a.txt"}, ExpiresIn=600
    )
    assert web.get(url).content == b"hello"
    advance(operator, 86400)
    expired = web.get(url)
    assert expired.status_code == 403
    assert b"Request has expired" in expired.content
    assert s3.get_object(Bucket=name, Key="a.txt")["Body"].read() == b"hello"


def test_the_rate_limit_window_resets(live: LiveServer, operator: httpx.Client) -> None:
    made = operator.post("/v1/orgs", json={"name": unique_name("org"), "plan": "free"})
    assert made.status_code == 201, made.text
    org = made.json()["data"]["id"]
    key = operator.post(
        f"/v1/orgs/{org}/keys", json={"name": "k", "scopes": ["buckets:read"]}
    ).json()["data"]["secret"]
    now = advance(operator, 0)["nowUnix"]
    advance(operator, 61 - now % 60)  # the window's start: the four requests share it
    with live.client(key) as http:
        answers = [http.get("/buckets").status_code for _ in range(4)]
        assert answers[-1] == 429, answers
        advance(operator, 60)
        assert http.get("/buckets").status_code == 200


def test_a_retention_ends_when_the_clock_passes_it(s3: Any, operator: httpx.Client) -> None:
    """COMPLIANCE: nothing but time ends it; the moved clock is that time."""
    name = unique_name("lck")
    s3.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    version = s3.put_object(
        Bucket=name,
        Key="doc",
        Body=b"kept",
        ObjectLockMode="COMPLIANCE",
        ObjectLockRetainUntilDate=datetime.now(UTC) + timedelta(days=1),
    )["VersionId"]
    with pytest.raises(ClientError) as refused:
        s3.delete_object(Bucket=name, Key="doc", VersionId=version)
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    advance(operator, 86400 + 60)
    s3.delete_object(Bucket=name, Key="doc", VersionId=version)
    assert "Versions" not in s3.list_object_versions(Bucket=name)


def test_a_lifecycle_expiration_acts_once_the_clock_passes_it(
    s3: Any, operator: httpx.Client
) -> None:
    """An object under a 30-day expiration rule (the real day, not a short `day_seconds`)
    is gone after the clock moves 31 days and a pass runs; one written after the move is
    as new as the moved clock says, and stays."""
    name = unique_name("lcy")
    s3.create_bucket(Bucket=name)
    s3.put_bucket_lifecycle_configuration(
        Bucket=name,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "old",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "Expiration": {"Days": 30},
                }
            ]
        },
    )
    s3.put_object(Bucket=name, Key="old.txt", Body=b"old")
    assert operator.post(CLOCK.replace("clock", "lifecycle")).json()["data"]["expired"] == 0
    advance(operator, 31 * 86400)
    s3.put_object(Bucket=name, Key="new.txt", Body=b"new")
    ran = operator.post(CLOCK.replace("clock", "lifecycle"))
    assert ran.status_code == 200, ran.text
    assert ran.json()["data"]["expired"] == 1
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=name).get("Contents", [])]
    assert keys == ["new.txt"]


def test_test_mode_is_off_by_default_and_refused_over_postgresql() -> None:
    """Several gateways over one PostgreSQL index would each keep an offset of their own."""
    assert not load_settings(None, {}, {}).test_mode
    assert load_settings(None, {"BUCKETD_TEST_MODE": "true"}, {}).test_mode
    environ = {"BUCKETD_TEST_MODE": "true", "BUCKETD_INDEX__URL": "postgresql://db/bucketd"}
    with pytest.raises(SettingsError, match="test_mode needs a SQLite index"):
        load_settings(None, environ, {})


def test_an_abandoned_multipart_upload_expires_by_the_clock(
    s3: Any, operator: httpx.Client
) -> None:
    """Uploads not completed within `uploads.multipart_expiry_seconds` (7 days) of their
    start, stamped by the clock, are aborted by the janitor once the clock passes it."""
    name = unique_name("mpu")
    s3.create_bucket(Bucket=name)
    s3.create_multipart_upload(Bucket=name, Key="big.bin")
    advance(operator, 8 * 86400)
    deadline = time.monotonic() + 10
    while s3.list_multipart_uploads(Bucket=name).get("Uploads"):
        assert time.monotonic() < deadline, "the janitor did not expire the upload"
        time.sleep(0.05)


def test_the_century_is_checked_under_the_lock_of_the_move() -> None:
    """The route checked the bound against the offset it had read, then moved the clock
    under the lock: two workers moving it at once could each pass the check and together
    pass the century (a few dozen, past datetime's year 9999, after which every request
    that reads the clock as a datetime fails). The check is now the move's, under its lock."""
    clock = Clock()
    far = 90 * 366 * 86400.0
    clock.set_offset(far, MOST_SECONDS)
    with pytest.raises(ClockLimit):
        clock.advance(20 * 366 * 86400.0, MOST_SECONDS)  # as if another worker moved first
    assert clock.offset() == far
    for bad in (math.nan, math.inf, -math.inf, -2 * MOST_SECONDS, 1e308):
        with pytest.raises(ClockLimit):
            clock.set_offset(bad, MOST_SECONDS)
        assert clock.offset() == far
    assert clock.advance(86400.0, MOST_SECONDS) == far + 86400.0
    clock.set_offset(-0.0, MOST_SECONDS)
    assert clock.offset() == 0


def test_the_start_says_loudly_that_test_mode_is_on(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """`bucketd serve` given BUCKETD_TEST_MODE (a line copied into a unit's environment,
    a config key) printed the same start as a production server."""
    sockets = cast(Sockets, SimpleNamespace(s3=None))
    with caplog.at_level(logging.WARNING, logger="bucketd.server"):
        announce(load_settings(None, {}, {}), sockets)
        assert "TEST MODE" not in capsys.readouterr().out
        assert not caplog.records
        announce(load_settings(None, {"BUCKETD_TEST_MODE": "true"}, {}), sockets, workers=2)
    out = capsys.readouterr().out
    assert "bucketd: TEST MODE IS ON" in out and "/_bucketd/test/" in out
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "TEST MODE IS ON" in caplog.records[0].getMessage()


def test_the_guide_says_what_test_mode_gives_up() -> None:
    """A COMPLIANCE-locked version deletable early, expired keys and links made valid by a
    clock set back: acceptable in test mode only because the guide says so."""
    guide = (Path(__file__).resolve().parent.parent / "docs" / "testing.md").read_text()
    section = guide.split("### What test mode gives up", 1)[1].split("\n## ", 1)[0]
    for said in ("COMPLIANCE", "Expired keys", "Revoked keys stay", "Stamps stay"):
        assert said in section, said


def test_keys_guessed_on_the_surface_are_counted_as_on_v1(tmp_path: Path) -> None:
    """The guard middleware counts requests without a valid key per client address on /v1
    and /metrics only; the surface looked keys up itself, uncounted, so with test mode on
    it was a way around `ratelimit.anonymous_rpm` for guessing keys. The guard now looks
    them up there too. The server here is `bucketd serve` with BUCKETD_TEST_MODE, as a
    stray line in a unit's environment would make it: its start says so."""
    config = TEST_CONFIG + "\n[ratelimit]\nanonymous_rpm = 3\n"
    server = LiveServer(tmp_path / "data", config, env={"BUCKETD_TEST_MODE": "true"}).start()
    try:
        headers = {"Authorization": f"Bearer {server.admin_key}"}
        with web.client(base_url=server.url, headers=headers) as http:
            now = http.get(CLOCK).json()["data"]["nowUnix"]
            # the window's start, so the requests below share one window
            assert http.post(CLOCK, json={"offsetSeconds": 61 - now % 60}).status_code == 200
            guesses = [
                web.get(server.url + CLOCK, headers={"Authorization": f"Bearer guess{n}"})
                for n in range(5)
            ]
            assert [answer.status_code for answer in guesses] == [401, 401, 401, 429, 429]
            assert http.get(CLOCK).status_code == 200  # the operator's key is its org's
        assert "bucketd: TEST MODE IS ON" in server.log_path.read_text()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("HEAD", CLOCK),
        ("OPTIONS", CLOCK),
        ("PUT", CLOCK),
        ("PATCH", CLOCK),
        ("GET", CLOCK + "/"),
        ("GET", "/" + CLOCK),
        ("GET", "/%5Fbucketd/test/%63lock"),
        ("POST", "/_bucketd/test/lifecycle"),
        ("GET", "/_bucketd/test/"),
    ],
)
def test_off_no_method_or_spelling_reaches_the_surface(
    local_server: LiveServer, method: str, path: str
) -> None:
    """Other methods and other spellings of the prefix, with the operator's key, get what
    the same request to a path that never existed gets (a browser's preflight, with an
    Origin, is answered by the CORS layer alike for every path)."""
    headers = {"Authorization": f"Bearer {local_server.admin_key}"}
    unknown = web.request(method, local_server.url + "/_nothing/at/all", headers=headers)
    answer = web.request(method, local_server.url + path, headers=headers)
    assert answer.status_code == unknown.status_code == 404
    assert answer.headers.get("content-type") == unknown.headers.get("content-type")
    assert ("allow" in answer.headers) == ("allow" in unknown.headers)
    if method != "HEAD":
        assert answer.json()["error"]["code"] == unknown.json()["error"]["code"]


def test_on_only_a_valid_operator_key_reaches_the_surface(
    live: LiveServer, operator: httpx.Client
) -> None:
    """A tenant's admin key (every scope of its organization), a bucket-scoped key, an S3
    credential as HTTP Basic, a revoked operator key and an expired one are all refused;
    the expired one works again once the clock is set back before its expiry, as
    docs/testing.md ("What test mode gives up") says, and a revoked one never does."""
    with live.client() as admin:
        tenant = admin.post("/orgs", json={"name": unique_name("tenant"), "plan": "free"})
        assert tenant.status_code == 201, tenant.text
        tenant_keys = f"/orgs/{tenant.json()['data']['id']}/keys"
        scopes = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"]
        tenant_admin = admin.post(tenant_keys, json={"name": "t", "scopes": scopes})
        bucket = new_bucket(admin, unique_name("scoped"))
        scoped = admin.post(
            "/keys",
            json={"name": "b", "scopes": ["files:read"], "bucketId": bucket["id"]},
        )
        revoked = admin.post("/keys", json={"name": "r", "scopes": ["orgs:manage"]})
        revoked_id = revoked.json()["data"]["id"]
        assert admin.delete(f"/keys/{revoked_id}").status_code == 200
        expiry = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        expiring = admin.post(
            "/keys", json={"name": "e", "scopes": ["orgs:manage"], "expiresAt": expiry}
        )
    access, secret = live.s3_credentials()

    def status(authorization: str) -> int:
        return web.get(live.url + CLOCK, headers={"Authorization": authorization}).status_code

    def bearer(made: httpx.Response) -> str:
        assert made.status_code == 201, made.text
        return "Bearer " + made.json()["data"]["secret"]

    assert status(bearer(tenant_admin)) == 403
    assert status(bearer(scoped)) == 403
    assert status("Basic " + base64.b64encode(f"{access}:{secret}".encode()).decode()) == 403
    assert status(bearer(revoked)) == 401
    assert status(bearer(expiring)) == 200
    advance(operator, 2 * 3600)
    assert status(bearer(expiring)) == 401
    assert operator.post(CLOCK, json={"offsetSeconds": -3600}).status_code == 200
    assert status(bearer(expiring)) == 200  # the clock set back: test mode's price
    assert status(bearer(revoked)) == 401


def test_presigned_urls_signed_now_work_with_the_clock_set_back(
    live: LiveServer, s3: Any, operator: httpx.Client
) -> None:
    """A client signs with its real clock. SigV4 judges a URL's date against the wall's
    time, but SigV2's 7-day reach (`Expires` at most 7 days ahead) was judged against the
    server's clock: set back more than a week, every SigV2 URL signed now was refused as
    reaching too far, though it expires within the hour. Its expiry stays on the clock."""
    name = unique_name("clk")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="a.txt", Body=b"hello")
    access, secret = live.s3_credentials()
    v2 = live.s3(access, secret, signature_version="s3")
    for client in (s3, v2):
        url = client.generate_presigned_url(
            "get_object", Params={"Bucket": name, "Key": "a.txt"}, ExpiresIn=600
        )
        assert operator.post(CLOCK, json={"offsetSeconds": -30 * 86400}).status_code == 200
        answer = web.get(url)
        assert answer.content == b"hello", answer.text
        advance(operator, 30 * 86400 + 3600)  # an hour after the real time: expired
        assert b"Request has expired" in web.get(url).content


def test_a_post_policy_written_now_works_with_the_clock_set_back(
    s3: Any, operator: httpx.Client
) -> None:
    """The same for a browser form's POST policy: its `expiration` at most 7 days ahead was
    judged by the server's clock, so a clock set back a month refused every policy written
    now; its expiry itself stays on the clock."""
    name = unique_name("clk")
    s3.create_bucket(Bucket=name)
    post = s3.generate_presigned_post(name, "posted.txt", ExpiresIn=600)

    def send() -> httpx.Response:
        return web.post(post["url"], data=post["fields"], files={"file": ("f", b"x")})

    assert operator.post(CLOCK, json={"offsetSeconds": -30 * 86400}).status_code == 200
    sent = send()
    assert sent.status_code == 204, sent.text
    advance(operator, 30 * 86400 + 3600)
    refused = send()
    assert refused.status_code == 403 and b"Policy expired" in refused.content, refused.text
