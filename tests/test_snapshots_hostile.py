"""Snapshots and forks attacked from outside (issue 35, the review of points 1 and 2): every
test talks to a real server over HTTP (/v1 or S3) and looks for a way around what the rest
of the server protects: object lock, bucket policies, organizations, keys and scopes, names
(the state side, and the fixture's reset: `test_snapshot_state_review.py`; quotas:
`test_quotas.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.orgs import make_key

TEXT = {"Content-Type": "text/plain"}
MISSING = "snap_01JBZZZZZZZZZZZZZZZZZZZZZZ"


@pytest.fixture
def admin(local_server: LiveServer) -> Iterator[httpx.Client]:
    with local_server.client() as http:
        yield http


def later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def put(client: httpx.Client, bucket: dict, key: str, content: bytes) -> dict:
    response = client.put(f"/buckets/{bucket['id']}/files/{key}", content=content, headers=TEXT)
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])


def snapshot(client: httpx.Client, bucket: dict) -> dict:
    made = client.post(f"/buckets/{bucket['id']}/snapshots")
    assert made.status_code == 201, made.text
    return dict(made.json()["data"])


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def test_a_restore_never_turns_compliance_back_into_governance(
    admin: httpx.Client, local_server: LiveServer
) -> None:
    """A snapshot taken while a version's retention was GOVERNANCE, restored after it became
    COMPLIANCE with the same end, would leave a retention that bypassGovernance removes:
    the protection shortened, which a restore must refuse."""
    bucket = new_bucket(admin, unique_name("lock"), objectLock={})
    version = put(admin, bucket, "ledger.csv", b"kept for years")["versionId"]
    url = f"/buckets/{bucket['id']}/versions/{version}"
    until = later(3600)
    governed = admin.patch(
        url, json={"key": "ledger.csv", "retention": {"mode": "governance", "retainUntil": until}}
    )
    assert governed.status_code == 200, governed.text
    taken = snapshot(admin, bucket)
    # Another mode is a bypass's to give (as S3 has it since issue 38).
    bypassing = make_key(local_server, "default", ["files:write", "files:bypass-governance"])
    with local_server.client(bypassing) as http:
        complied = http.patch(
            url,
            json={
                "key": "ledger.csv",
                "retention": {"mode": "compliance", "retainUntil": until},
                "bypassGovernance": True,
            },
        )
    assert complied.status_code == 200, complied.text

    refused = admin.post(f"/snapshots/{taken['id']}/restore")
    assert code(refused) == (409, "file_locked"), refused.text
    shown = admin.get(f"/buckets/{bucket['id']}/versions", params={"key": "ledger.csv"})
    assert shown.json()["data"][0]["retention"] == {"mode": "compliance", "retainUntil": until}


@pytest.mark.parametrize(
    "body",
    [
        b'{"dropLocked": false, "dropLocked": true}',
        b'{"dropLocked": "true"}',
        b'{"dropLocked": 1}',
        b'{"drop_locked": true}',
        b'{"DropLocked": true}',
    ],
)
def test_drop_locked_has_no_other_spelling_outside_test_mode(
    admin: httpx.Client, body: bytes
) -> None:
    """Every spelling is refused before the snapshot is even looked up: a 404 here would
    mean the flag got past the test-mode check."""
    refused = admin.post(
        f"/server/snapshots/{MISSING}/restore",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert refused.status_code == 400, refused.text
    for spelling in ("dropLocked=true", "drop_locked=1"):
        query = admin.post(f"/server/snapshots/{MISSING}/restore?{spelling}")
        assert code(query) == (404, "snapshot_not_found")  # the query is no way in either


def test_no_credential_but_an_api_key_reaches_snapshots(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    """Anonymous, a made-up key, and the S3 credential's secret (or its access key id) as a
    bearer token: each a 401, never a hint whether the snapshot exists."""
    bucket = new_bucket(admin, unique_name("snap"))
    taken = snapshot(admin, bucket)
    access, secret = local_server.s3_credentials()
    for token in (None, "bk_" + "0" * 40, secret, access):
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        with web.client(base_url=local_server.url + "/v1", headers=headers) as http:
            for method, path in (
                ("GET", f"/snapshots/{taken['id']}"),
                ("GET", f"/snapshots/{MISSING}"),
                ("POST", f"/snapshots/{taken['id']}/restore"),
                ("POST", f"/buckets/{bucket['id']}/snapshots"),
                ("POST", "/server/snapshots"),
            ):
                answer = http.request(method, path)
                assert answer.status_code == 401, (token, path, answer.text)
                assert taken["id"] not in answer.text
    assert admin.get(f"/snapshots/{taken['id']}").status_code == 200


def test_a_bucket_scoped_key_after_its_bucket_is_deleted(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    """The key still sees its bucket's snapshots (they are its bucket's), cannot restore
    them (no bucket) nor fork them (a fork makes a bucket), and sees no other's."""
    mine = new_bucket(admin, unique_name("mine"))
    put(admin, mine, "a.txt", b"mine")
    own = snapshot(admin, mine)
    foreign = snapshot(admin, new_bucket(admin, unique_name("other")))
    scopes = ["buckets:read", "buckets:write", "files:read", "files:write"]
    made = admin.post("/keys", json={"name": "t", "scopes": scopes, "bucketId": mine["id"]})
    assert made.status_code == 201, made.text
    assert admin.delete(f"/buckets/{mine['id']}", params={"force": "true"}).status_code == 200
    with local_server.client(made.json()["data"]["secret"]) as http:
        listed = {s["id"] for s in http.get("/snapshots", params={"limit": 100}).json()["data"]}
        assert listed == {own["id"]}
        assert code(http.post(f"/snapshots/{own['id']}/restore")) == (409, "invalid_bucket_state")
        fork = http.post(f"/snapshots/{own['id']}/fork", json={"name": unique_name("f")})
        assert code(fork) == (403, "forbidden")
        assert code(http.delete(f"/snapshots/{foreign['id']}")) == (404, "snapshot_not_found")
    assert admin.get(f"/snapshots/{foreign['id']}").status_code == 200


def test_server_and_bucket_snapshot_ids_do_not_cross(admin: httpx.Client) -> None:
    """A server snapshot's id on the organization's routes, a bucket snapshot's on the
    operator's: the same 404 as a missing one, and nothing restored or deleted."""
    bucket = new_bucket(admin, unique_name("snap"))
    own = snapshot(admin, bucket)
    server = admin.post("/server/snapshots").json()["data"]
    for method, path in (
        ("GET", f"/snapshots/{server['id']}"),
        ("POST", f"/snapshots/{server['id']}/restore"),
        ("POST", f"/snapshots/{server['id']}/fork"),
        ("DELETE", f"/snapshots/{server['id']}"),
        ("GET", f"/server/snapshots/{own['id']}"),
        ("POST", f"/server/snapshots/{own['id']}/restore"),
        ("DELETE", f"/server/snapshots/{own['id']}"),
    ):
        body = {"name": unique_name("f")} if path.endswith("/fork") else None
        answer = admin.request(method, path, json=body)
        assert code(answer) == (404, "snapshot_not_found"), (path, answer.text)
    assert admin.get(f"/snapshots/{own['id']}").status_code == 200
    assert admin.delete(f"/server/snapshots/{server['id']}").status_code == 204


def public_read(name: str) -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{name}/*",
            }
        ],
    }


def test_a_renamed_buckets_restore_and_fork_serve_s3_as_the_snapshot_had_it(
    local_server: LiveServer, admin: httpx.Client, anonymous: object
) -> None:
    """The policy names the bucket it belongs to after a restore (the bucket's current
    name) and after a fork (the fork's), never the name the snapshot was taken under."""
    name = unique_name("pub")
    bucket = new_bucket(admin, name, versioning="enabled")
    made_public = admin.patch(f"/buckets/{bucket['id']}", json={"policy": public_read(name)})
    assert made_public.status_code == 200, made_public.text
    put(admin, bucket, "cat.txt", b"meow")
    taken = snapshot(admin, bucket)
    renamed = unique_name("renamed")
    changes = {"name": renamed, "policy": None, "versioning": "suspended"}
    changed = admin.patch(f"/buckets/{bucket['id']}", json=changes)
    assert changed.status_code == 200, changed.text
    put(admin, bucket, "cat.txt", b"woof")

    assert admin.post(f"/snapshots/{taken['id']}/restore").status_code == 200
    shown = admin.get(f"/buckets/{bucket['id']}").json()["data"]
    assert (shown["name"], shown["versioning"]) == (renamed, "enabled")
    assert anonymous.get_object(Bucket=renamed, Key="cat.txt")["Body"].read() == b"meow"  # type: ignore[attr-defined]
    assert f"arn:aws:s3:::{renamed}/*" in str(shown["policy"])

    fork_name = unique_name("forked")
    fork = admin.post(f"/snapshots/{taken['id']}/fork", json={"name": fork_name})
    assert fork.status_code == 201, fork.text
    assert anonymous.get_object(Bucket=fork_name, Key="cat.txt")["Body"].read() == b"meow"  # type: ignore[attr-defined]
    policy = str(fork.json()["data"]["policy"])
    assert f"arn:aws:s3:::{fork_name}/*" in policy and renamed not in policy and name not in policy


def test_labels_and_fork_names_that_no_index_stores_are_refused(admin: httpx.Client) -> None:
    """A NUL in a label is no text PostgreSQL stores (it would be a 500 there): refused on
    every index alike. A fork's name in another Unicode form than the one S3 allows (full
    width, a dotless i, a combining accent) is no bucket name."""
    bucket = new_bucket(admin, unique_name("snap"))
    path = f"/buckets/{bucket['id']}/snapshots"
    for label in ("before\x00after", "\x00"):
        assert code(admin.post(path, json={"name": label})) == (400, "invalid_request")
    assert admin.post(path, json={"name": "před migrací ✓"}).status_code == 201
    taken = admin.get(path).json()["data"][0]
    fullwidth, dotless = "\uff46\uff4f\uff52\uff4b-name", "fork-\u0131-name"
    for name in (fullwidth, dotless, "fork-\u00e9-name", "fork-e\u0301-name"):
        fork = admin.post(f"/snapshots/{taken['id']}/fork", json={"name": name})
        assert code(fork) == (400, "invalid_bucket_name"), name
    assert len(admin.get(path).json()["data"]) == 1


def test_a_restore_keeps_what_is_protected_on_both_backends(client: httpx.Client) -> None:
    """A version under retention and a legal hold that the snapshot holds as it is now is
    not dropped by the restore, so the restore goes ahead (on the S3 backend the snapshot
    names copies of the contents, not the objects themselves); one written since is."""
    bucket = new_bucket(client, unique_name("lock"), objectLock={})
    kept = put(client, bucket, "kept.txt", b"kept")["versionId"]
    url = f"/buckets/{bucket['id']}/versions/{kept}"
    held = client.patch(url, json={"key": "kept.txt", "legalHold": True})
    assert held.status_code == 200, held.text
    retention = {"mode": "compliance", "retainUntil": later(600)}
    retained = client.patch(url, json={"key": "kept.txt", "retention": retention})
    assert retained.status_code == 200, retained.text
    taken = snapshot(client, bucket)
    put(client, bucket, "later.txt", b"unprotected, since")

    restored = client.post(f"/snapshots/{taken['id']}/restore")
    assert restored.status_code == 200, restored.text
    listed = client.get(f"/buckets/{bucket['id']}/versions").json()["data"]
    assert [(v["key"], v["versionId"], v["legalHold"]) for v in listed] == [
        ("kept.txt", kept, True)
    ]
    assert client.get(f"/buckets/{bucket['id']}/files/kept.txt").content == b"kept"

    since = put(client, bucket, "since.txt", b"held since")["versionId"]
    hold = client.patch(
        f"/buckets/{bucket['id']}/versions/{since}", json={"key": "since.txt", "legalHold": True}
    )
    assert hold.status_code == 200, hold.text
    assert code(client.post(f"/snapshots/{taken['id']}/restore")) == (409, "file_locked")


SINGLE_SCOPE_ANSWERS = {
    # scope: the routes it opens (any other answers 403); a missing id then answers 404
    "buckets:read": {"get", "list", "list bucket"},
    "buckets:write": {"take", "delete", "fork"},
    "files:read": set(),
    "files:write": set(),
    "keys:manage": set(),
    "orgs:manage": {"server get", "server restore"},
}


@pytest.mark.parametrize("scope", list(SINGLE_SCOPE_ANSWERS))
def test_a_key_with_one_scope_opens_exactly_its_routes(
    local_server: LiveServer, admin: httpx.Client, scope: str
) -> None:
    """Restore needs two scopes, so no single one opens it. A route a scope opens answers
    about the snapshot (404 for a missing one); the others answer 403 before looking."""
    bucket = new_bucket(admin, unique_name("scope"))
    made = admin.post("/keys", json={"name": "one", "scopes": [scope]})
    assert made.status_code == 201, made.text
    routes = {
        "get": ("GET", f"/snapshots/{MISSING}", None, 404),
        "list": ("GET", "/snapshots", None, 200),
        "list bucket": ("GET", f"/buckets/{bucket['id']}/snapshots", None, 200),
        "take": ("POST", f"/buckets/{bucket['id']}/snapshots", None, 201),
        "delete": ("DELETE", f"/snapshots/{MISSING}", None, 404),
        "restore": ("POST", f"/snapshots/{MISSING}/restore", None, 404),
        "fork": ("POST", f"/snapshots/{MISSING}/fork", {"name": unique_name("f")}, 404),
        "server get": ("GET", f"/server/snapshots/{MISSING}", None, 404),
        "server restore": ("POST", f"/server/snapshots/{MISSING}/restore", None, 404),
    }
    opened = SINGLE_SCOPE_ANSWERS[scope]
    with local_server.client(made.json()["data"]["secret"]) as http:
        for route, (method, path, body, allowed) in routes.items():
            answer = http.request(method, path, json=body)
            expected = allowed if route in opened else 403
            assert answer.status_code == expected, (scope, route, answer.text)


def deny(name: str, action: str, resource: str) -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": action, "Resource": resource}],
    }


@pytest.mark.parametrize(
    ("action", "resource"),
    [
        ("s3:DeleteObject", "/*"),
        ("s3:PutObject", "/*"),
        ("s3:PutObjectAcl", "/*"),
        ("s3:PutBucketVersioning", ""),
    ],
)
def test_a_bucket_policys_deny_binds_a_restore(
    admin: httpx.Client, action: str, resource: str
) -> None:
    """A restore deletes and writes every object and rewrites every setting: a Deny in the
    bucket's policy of any of those, which binds the organization's own keys on /v1 and S3,
    refuses it too (decided for every key at once, as a forced deletion is)."""
    name = unique_name("denied")
    bucket = new_bucket(admin, name)
    taken = snapshot(admin, bucket)
    put(admin, bucket, "a.txt", b"protected by the policy")
    policy = deny(name, action, f"arn:aws:s3:::{name}{resource}")
    assert admin.patch(f"/buckets/{bucket['id']}", json={"policy": policy}).status_code == 200
    direct = {  # the Deny binds the organization's own key when it asks directly
        "s3:DeleteObject": ("DELETE", f"/buckets/{bucket['id']}/files/a.txt", None),
        "s3:PutObject": ("PUT", f"/buckets/{bucket['id']}/files/b.txt", None),
        "s3:PutBucketVersioning": ("PATCH", f"/buckets/{bucket['id']}", {"versioning": "enabled"}),
    }.get(action)
    if direct is not None:
        assert admin.request(direct[0], direct[1], json=direct[2]).status_code == 403

    refused = admin.post(f"/snapshots/{taken['id']}/restore")
    assert refused.status_code == 403, refused.text
    assert admin.get(f"/buckets/{bucket['id']}/files/a.txt").content == b"protected by the policy"
    assert admin.get(f"/buckets/{bucket['id']}").json()["data"]["policy"] is not None


def test_another_organizations_snapshot_answers_byte_for_byte_as_a_missing_one(
    local_server: LiveServer, admin: httpx.Client
) -> None:
    """Same status, same body, same headers that matter, on every route: nothing tells
    the tenant the id exists."""
    bucket = new_bucket(admin, unique_name("snap"))
    taken = snapshot(admin, bucket)
    org = admin.post("/orgs", json={"name": unique_name("tenant"), "plan": "pro"}).json()["data"]
    scopes = ["buckets:read", "buckets:write", "files:read", "files:write"]
    key = admin.post(f"/orgs/{org['id']}/keys", json={"name": "t", "scopes": scopes})
    with local_server.client(key.json()["data"]["secret"]) as tenant:
        for method, suffix, body in (
            ("GET", "", None),
            ("DELETE", "", None),
            ("POST", "/restore", None),
            ("POST", "/fork", {"name": "same-name-both-times"}),
        ):
            theirs = tenant.request(method, f"/snapshots/{taken['id']}{suffix}", json=body)
            missing = tenant.request(method, f"/snapshots/{MISSING}{suffix}", json=body)
            assert (theirs.status_code, theirs.content) == (missing.status_code, missing.content)
            for header in ("content-type", "content-length", "cache-control"):
                assert theirs.headers.get(header) == missing.headers.get(header)
    assert admin.get(f"/snapshots/{taken['id']}").status_code == 200
