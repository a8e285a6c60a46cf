"""Keys, scopes, organizations: 401, 403 and 404 exactly as decided."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from tests.support import web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.orgs import ALL_SCOPES, make_key, make_org
from tests.support.profiles import budget

MISSING_BUCKET = "svc_00000000000000000000000000"


@pytest.fixture(scope="module")
def server(local_server: LiveServer) -> LiveServer:
    """Authentication, routing and the envelope do not depend on the backend: one is enough."""
    return local_server


def get(server: LiveServer, path: str, authorization: str | None) -> httpx.Response:
    headers = {} if authorization is None else {"Authorization": authorization}
    return web.get(server.url + "/v1" + path, headers=headers)


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        (None, "missing_api_key"),
        ("", "missing_api_key"),
        ("Basic dXNlcjpwYXNz", "invalid_api_key"),  # user:pass, no such S3 credential
        ("Basic !!!", "malformed_api_key"),
        ("Basic dXNlcg==", "malformed_api_key"),  # user, no secret
        ("Bearer", "malformed_api_key"),
        ("Bearer svc_short", "malformed_api_key"),
        ("Bearer sk_" + "a" * 43, "malformed_api_key"),
        ("Bearer svc_" + "a" * 42, "malformed_api_key"),
        ("Bearer svc_" + "!" * 43, "malformed_api_key"),
        ("Bearer svc_" + "a" * 43, "invalid_api_key"),
        ("Token svc_" + "a" * 43, "malformed_api_key"),
    ],
)
def test_bad_keys_are_401(server: LiveServer, authorization: str | None, code: str) -> None:
    response = get(server, "/buckets", authorization)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code
    assert response.json()["data"] is None
    assert response.headers["x-ratelimit-limit"].isdigit()


def test_bearer_scheme_is_case_insensitive(server: LiveServer) -> None:
    assert get(server, "/organization", f"bearer {server.admin_key}").status_code == 200


def test_unknown_revoked_and_expired_keys_look_the_same(
    server: LiveServer, client: httpx.Client
) -> None:
    org = make_org(server)
    revoked = make_key(server, org, ["buckets:read"])
    expiring = make_key(server, org, ["buckets:read"], "--expires-in", "3")
    assert get(server, "/buckets", f"Bearer {revoked}").status_code == 200
    assert get(server, "/buckets", f"Bearer {expiring}").status_code == 200
    with server.client(make_key(server, org, ["keys:manage"])) as manager:
        key_id = next(
            k["id"] for k in manager.get("/keys").json()["data"] if k["last4"] == revoked[-4:]
        )
        assert manager.delete(f"/keys/{key_id}").status_code == 200
    deadline = time.monotonic() + 10
    while get(server, "/buckets", f"Bearer {expiring}").status_code == 200:
        assert time.monotonic() < deadline, "the key did not expire"
        time.sleep(0.2)
    bodies = [
        get(server, "/buckets", f"Bearer {secret}").json()
        for secret in (revoked, expiring, "svc_" + "Z" * 43)
    ]
    assert bodies[0] == bodies[1] == bodies[2]
    assert bodies[0]["error"]["code"] == "invalid_api_key"


def test_revocation_takes_effect_at_once(server: LiveServer) -> None:
    org = make_org(server)
    manager = make_key(server, org, ["keys:manage", "buckets:read"])
    with server.client(manager) as http:
        created = http.post("/keys", json={"name": "temp", "scopes": ["buckets:read"]}).json()[
            "data"
        ]
        secret = created["secret"]
        assert get(server, "/buckets", f"Bearer {secret}").status_code == 200
        assert http.delete(f"/keys/{created['id']}").status_code == 200
        assert get(server, "/buckets", f"Bearer {secret}").status_code == 401
        listed = http.get(f"/keys/{created['id']}").json()["data"]
        assert listed["revokedAt"] is not None
        assert http.delete(f"/keys/{created['id']}").status_code == 200


def test_keys_api_shows_the_secret_once(server: LiveServer) -> None:
    org = make_org(server)
    with server.client(make_key(server, org, ["keys:manage", "files:read"])) as http:
        response = http.post(
            "/keys",
            json={"name": "reader", "scopes": ["files:read"], "expiresAt": "2099-01-01T00:00:00Z"},
        )
        assert response.status_code == 201
        data = response.json()["data"]
        assert data["object"] == "key" and data["secret"].startswith("svc_")
        assert data["expiresAt"] == "2099-01-01T00:00:00Z" and data["scopes"] == ["files:read"]
        assert len(data["secret"]) >= 47 and data["last4"] == data["secret"][-4:]
        listed = http.get("/keys").json()
        assert all("secret" not in key for key in listed["data"])
        one = http.get(f"/keys/{data['id']}").json()["data"]
        assert "secret" not in one and one["name"] == "reader"
        assert data["secret"] not in http.get("/keys").text
        assert http.get("/keys/svc_00000000000000000000000000").status_code == 404
        for body in (
            {"name": "x", "scopes": ["root"]},
            {"name": "x", "scopes": "files:read"},
            {"scopes": ["files:read"]},
            {"name": "x", "scopes": ["files:read"], "expiresAt": "soon"},
            {"name": "x", "scopes": ["files:read"], "expiresAt": "2001-01-01T00:00:00Z"},
            {"name": "x", "scopes": []},
        ):
            assert http.post("/keys", json=body).status_code == 400, body


def test_a_key_cannot_grant_more_than_it_has(server: LiveServer) -> None:
    org = make_org(server)
    with server.client(make_key(server, org, ["keys:manage", "files:read"])) as http:
        response = http.post("/keys", json={"name": "x", "scopes": ["files:read", "files:write"]})
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "scope_escalation"


def test_bucket_scoped_keys(server: LiveServer) -> None:
    org = make_org(server)
    admin = make_key(server, org, ALL_SCOPES)
    with server.client(admin) as http:
        mine = new_bucket(http, "mine")
        other = new_bucket(http, "other")
        http.put(
            f"/buckets/{other['id']}/files/secret.txt",
            content=b"s",
            headers={"Content-Type": "text/plain"},
        )
    scoped = make_key(server, org, ALL_SCOPES, "--bucket", mine["id"])
    with server.client(scoped) as http:
        assert [b["id"] for b in http.get("/buckets").json()["data"]] == [mine["id"]]
        assert http.get(f"/buckets/{mine['id']}").status_code == 200
        missing = http.get(f"/buckets/{MISSING_BUCKET}").json()
        for path in (
            f"/buckets/{other['id']}",
            f"/buckets/{other['id']}/files",
            f"/buckets/{other['id']}/files/secret.txt",
        ):
            response = http.get(path)
            assert response.status_code == 404
            assert response.json()["error"] == missing["error"]
        assert (
            http.post("/buckets", json={"name": "new-one", "region": "us-east-1"}).status_code
            == 403
        )
        assert http.post("/keys", json={"name": "k", "scopes": ["files:read"]}).status_code == 403
        assert (
            http.post(
                "/keys", json={"name": "k", "scopes": ["files:read"], "bucketId": other["id"]}
            ).status_code
            == 403
        )
        narrow = http.post(
            "/keys", json={"name": "k", "scopes": ["files:read"], "bucketId": mine["id"]}
        )
        assert narrow.status_code == 201
        listed = http.get("/keys").json()["data"]
        assert {k["bucketId"] for k in listed} == {mine["id"]}


def test_two_organizations_cannot_see_each_other(server: LiveServer) -> None:
    org_a, org_b = make_org(server), make_org(server)
    key_a, key_b = make_key(server, org_a, ALL_SCOPES), make_key(server, org_b, ALL_SCOPES)
    with server.client(key_a) as a, server.client(key_b) as b:
        bucket = new_bucket(a, "shared-name")
        a.put(
            f"/buckets/{bucket['id']}/files/f",
            content=b"private",
            headers={"Content-Type": "text/plain"},
        )
        assert new_bucket(b, "shared-name")["name"] == "shared-name"  # names are per organization
        missing = b.get(f"/buckets/{MISSING_BUCKET}")
        base = f"/buckets/{bucket['id']}"
        for method, path, kwargs in [
            ("GET", base, {}),
            ("PATCH", base, {"json": {"name": "stolen"}}),
            ("DELETE", base, {}),
            ("GET", base + "/files", {}),
            ("GET", base + "/files/f", {}),
            ("HEAD", base + "/files/f", {}),
            (
                "PUT",
                base + "/files/f",
                {"content": b"x", "headers": {"Content-Type": "text/plain"}},
            ),
            ("PATCH", base + "/files/f", {"json": {"key": "g"}}),
            ("DELETE", base + "/files/f", {}),
        ]:
            response = b.request(method, path, **kwargs)
            assert response.status_code == 404, (method, path)
            if method != "HEAD":
                assert (
                    response.json()["error"] == missing.json()["error"]
                    or response.json()["error"]["code"] == "bucket_not_found"
                )
        assert bucket["id"] not in [x["id"] for x in b.get("/buckets").json()["data"]]
        a_keys = {k["id"] for k in a.get("/keys").json()["data"]}
        b_keys = {k["id"] for k in b.get("/keys").json()["data"]}
        assert not a_keys & b_keys
        assert b.get(f"/keys/{next(iter(a_keys))}").status_code == 404
        assert b.delete(f"/keys/{next(iter(a_keys))}").status_code == 404
        assert a.get(f"{base}/files/f").content == b"private"
        assert b.get("/organization").json()["data"]["id"] == org_b


ENDPOINTS = [
    ("GET", "/buckets", "buckets:read"),
    ("POST", "/buckets", "buckets:write"),
    ("GET", "/buckets/{b}", "buckets:read"),
    ("PATCH", "/buckets/{b}", "buckets:write"),
    ("DELETE", "/buckets/{b}", "buckets:write"),
    ("GET", "/buckets/{b}/files", "files:read"),
    ("PUT", "/buckets/{b}/files/k", "files:write"),
    ("GET", "/buckets/{b}/files/k", "files:read"),
    ("HEAD", "/buckets/{b}/files/k", "files:read"),
    ("PATCH", "/buckets/{b}/files/k", "files:write"),
    ("DELETE", "/buckets/{b}/files/k", "files:write"),
    ("GET", "/keys", "keys:manage"),
    ("POST", "/keys", "keys:manage"),
    ("GET", "/keys/{k}", "keys:manage"),
    ("DELETE", "/keys/{k}", "keys:manage"),
]


@pytest.fixture(scope="module")
def scoped_org(server: LiveServer) -> dict:
    org = make_org(server)
    admin = make_key(server, org, ALL_SCOPES)
    with server.client(admin) as http:
        bucket = new_bucket(http, "scopes")
        http.put(
            f"/buckets/{bucket['id']}/files/k", content=b"k", headers={"Content-Type": "text/plain"}
        )
        key_id = http.get("/keys").json()["data"][0]["id"]
    lacking = {
        scope: make_key(server, org, [s for s in ALL_SCOPES if s != scope]) for scope in ALL_SCOPES
    }
    return {"bucket": bucket["id"], "key": key_id, "lacking": lacking}


@pytest.mark.parametrize(("method", "path", "scope"), ENDPOINTS)
def test_every_endpoint_needs_its_scope(
    server: LiveServer, scoped_org: dict, method: str, path: str, scope: str
) -> None:
    url = server.url + "/v1" + path.format(b=scoped_org["bucket"], k=scoped_org["key"])
    secret = scoped_org["lacking"][scope]
    response = web.request(
        method,
        url,
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "text/plain"},
        content=b"{}",
    )
    assert response.status_code == 403
    if method != "HEAD":
        assert response.json()["error"]["code"] == "insufficient_scope"
        assert scope in response.json()["error"]["message"]
    with server.client(scoped_org["lacking"][scope]) as http:
        assert http.get("/organization").status_code == 200


@settings(max_examples=budget(150))
@given(
    value=st.one_of(
        st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),
        st.builds(
            lambda s: "Bearer " + s,
            st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),
        ),
        st.builds(
            lambda s: "Bearer svc_" + s,
            st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), max_size=60),
        ),
        st.binary(max_size=60).map(lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F)),
    )
)
def test_arbitrary_authorization_headers_never_500(server: LiveServer, value: str | bytes) -> None:
    raw = value if isinstance(value, bytes) else value.encode("latin-1")
    response = web.get(
        server.url + "/v1/buckets", headers=[(b"Authorization", raw.strip() or b"x")]
    )
    assert response.status_code in (400, 401), response.text
    if response.status_code == 401:
        assert response.json()["error"]["code"] in {
            "missing_api_key",
            "malformed_api_key",
            "invalid_api_key",
        }


HOUR_WINDOWS = TEST_CONFIG + "\n[ratelimit]\nwindow_seconds = 3600\n"
"""Rate-limit windows an hour long: a test's hundred requests never straddle two windows, so
it never waits for the next one."""


def test_free_plan_gets_100_requests_a_minute(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", HOUR_WINDOWS).start()
    try:
        org = make_org(live, "free")
        secret = make_key(live, org, ["buckets:read"])
        with live.client(secret) as http:
            statuses = []
            remaining = []
            for _ in range(100):
                response = http.get("/buckets")
                statuses.append(response.status_code)
                remaining.append(int(response.headers["x-ratelimit-remaining"]))
            assert statuses == [200] * 100
            assert remaining == list(range(99, -1, -1))
            refused = http.get("/buckets")
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "rate_limited"
            retry = int(refused.headers["retry-after"])
            reset = int(refused.headers["x-ratelimit-reset"])
            assert reset % 3600 == 0 and 0 < reset - time.time() <= 3601
            assert 1 <= retry <= 3601
            assert refused.headers["x-ratelimit-remaining"] == "0"
            assert refused.headers["x-ratelimit-limit"] == "100"
        with live.client() as pro:  # another organization has its own window
            assert pro.get("/buckets").status_code == 200
    finally:
        live.stop()


def test_requests_without_a_valid_key_are_limited_per_address(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", HOUR_WINDOWS + "anonymous_rpm = 100\n").start()
    try:
        bad = {"Authorization": "Bearer svc_" + "q" * 43}
        statuses = [web.get(live.url + "/v1/buckets", headers=bad).status_code for _ in range(100)]
        assert statuses == [401] * 100
        response = web.get(live.url + "/v1/buckets", headers=bad)
        assert response.status_code == 429 and "retry-after" in response.headers
        assert web.get(live.url + "/v1/openapi.json").status_code == 429
        with live.client() as http:
            assert http.get("/buckets").status_code == 200
        assert web.get(live.url + "/healthz").status_code == 200
    finally:
        live.stop()
