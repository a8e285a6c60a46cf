"""A Hypothesis state machine drives the real HTTP API with keys of two organizations and
compares every answer, refusals included, with an in-memory model."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.support.live import TEST_CONFIG, LiveServer, new_bucket, wait_active
from tests.support.names import BACKENDS, with_backend
from tests.support.profiles import budget

ALL = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"]
READ = ["buckets:read", "files:read"]
NAMES = st.sampled_from(["alpha", "beta", "gamma", "Bad_Name", "xy"])
FILE_KEYS = st.sampled_from(["a", "b/c", "ü x"])
CONTENTS = st.sampled_from([b"", b"one", b"two" * 100, b"\x00\xff" * 700])
TEXT = {"Content-Type": "application/octet-stream"}
WHO = st.sampled_from(["a-admin", "a-admin", "a-scoped", "a-read", "b-admin"])


@dataclass
class Key:
    org: str
    secret: str
    scopes: list[str]
    bucket: str | None = None


@dataclass
class Bucket:
    org: str
    name: str
    files: dict[str, bytes] = field(default_factory=dict)


class ApiMachine(RuleBasedStateMachine):
    def __init__(
        self, live: LiveServer, keys: dict[str, Key], seed_buckets: dict[str, Bucket]
    ) -> None:
        super().__init__()
        self.live = live
        self.keys = keys
        self.http = {name: live.client(key.secret) for name, key in keys.items()}
        self.buckets = dict(seed_buckets)
        self.created: list[str] = []
        self.buckets_touched = True

    def teardown(self) -> None:
        try:
            if sys.exception() is None:  # a run that failed reports its own error
                self.check_bucket_lists()  # what the steps since the last check changed
        finally:
            self.clean_up()

    def clean_up(self) -> None:
        admin = {
            org: name
            for name, key in self.keys.items()
            if key.scopes == ALL and key.bucket is None
            for org in [key.org]
        }
        for bucket_id in self.created:
            if bucket_id in self.buckets:
                self.http[admin[self.buckets[bucket_id].org]].delete(
                    f"/buckets/{bucket_id}", params={"force": "true"}
                )
        for bucket_id, bucket in self.buckets.items():
            if bucket_id not in self.created:
                for key in list(bucket.files):
                    self.http[admin[bucket.org]].delete(f"/buckets/{bucket_id}/files/{key}")
        for client in self.http.values():
            client.close()

    def visible(self, key: Key, bucket_id: str) -> bool:
        bucket = self.buckets.get(bucket_id)
        return bucket is not None and bucket.org == key.org and key.bucket in (None, bucket_id)

    def bucket_ids(self) -> st.SearchStrategy[str]:
        return st.sampled_from([*sorted(self.buckets), "svc_00000000000000000000000000"])

    def file_target(self, data: st.DataObject) -> tuple[str, str]:
        """Mostly a file that exists (so renames and reads reach their interesting cases)."""
        existing = [
            (b, k) for b, bucket in sorted(self.buckets.items()) for k in sorted(bucket.files)
        ]
        if existing and data.draw(st.integers(0, 3)) > 0:
            return data.draw(st.sampled_from(existing))
        return data.draw(self.bucket_ids()), data.draw(FILE_KEYS)

    @initialize()
    def seed_files(self) -> None:
        """Every run starts with two files in the seed bucket, so renames can collide."""
        (seed,) = [b for b in self.buckets if b not in self.created]
        for file_key in ("a", "b/c"):
            response = self.http["a-admin"].put(
                f"/buckets/{seed}/files/{file_key}", content=b"seed", headers=TEXT
            )
            assert response.status_code == 201
            self.buckets[seed].files[file_key] = b"seed"

    # rules

    @rule(who=WHO, name=NAMES)
    def create_bucket(self, who: str, name: str) -> None:
        self.buckets_touched = True
        key = self.keys[who]
        response = self.http[who].post("/buckets", json={"name": name, "region": "us-east-1"})
        if "buckets:write" not in key.scopes or key.bucket is not None:
            expected = 403
        elif len(name) < 3 or not name.islower():
            expected = 400
        elif any(b.org == key.org and b.name == name for b in self.buckets.values()):
            expected = 409
        else:
            expected = 201
        assert response.status_code == expected, response.text
        if expected == 201:
            bucket_id = response.json()["data"]["id"]
            wait_active(self.http[who], bucket_id)
            self.buckets[bucket_id] = Bucket(key.org, name)
            self.created.append(bucket_id)

    @rule(
        data=st.data(),
        who=WHO,
        force=st.booleans(),
    )
    def delete_bucket(self, data: st.DataObject, who: str, force: bool) -> None:
        self.buckets_touched = True
        bucket_id = data.draw(self.bucket_ids())
        key = self.keys[who]
        if bucket_id in self.buckets and bucket_id not in self.created:
            return  # the seed buckets stay
        response = self.http[who].delete(
            f"/buckets/{bucket_id}", params={"force": str(force).lower()}
        )
        if "buckets:write" not in key.scopes:
            expected = 403
        elif not self.visible(key, bucket_id):
            expected = 404
        elif self.buckets[bucket_id].files and not force:
            expected = 409
        else:
            expected = 200
        assert response.status_code == expected, response.text
        if expected == 200:
            del self.buckets[bucket_id]

    @rule(
        data=st.data(),
        who=WHO,
        file_key=FILE_KEYS,
        content=CONTENTS,
    )
    def put_file(self, data: st.DataObject, who: str, file_key: str, content: bytes) -> None:
        bucket_id = data.draw(self.bucket_ids())
        key = self.keys[who]
        response = self.http[who].put(
            f"/buckets/{bucket_id}/files/{file_key}", content=content, headers=TEXT
        )
        expected = (
            403
            if "files:write" not in key.scopes
            else 404
            if not self.visible(key, bucket_id)
            else 201
        )
        assert response.status_code == expected, response.text
        if expected == 201:
            self.buckets[bucket_id].files[file_key] = content

    @rule(data=st.data(), who=WHO)
    def get_file(self, data: st.DataObject, who: str) -> None:
        bucket_id, file_key = self.file_target(data)
        key = self.keys[who]
        response = self.http[who].get(f"/buckets/{bucket_id}/files/{file_key}")
        if "files:read" not in key.scopes:
            assert response.status_code == 403
        elif not self.visible(key, bucket_id):
            assert (
                response.status_code == 404
                and response.json()["error"]["code"] == "bucket_not_found"
            )
        elif file_key not in self.buckets[bucket_id].files:
            assert (
                response.status_code == 404 and response.json()["error"]["code"] == "file_not_found"
            )
        else:
            assert response.status_code == 200
            assert response.content == self.buckets[bucket_id].files[file_key]

    @rule(data=st.data(), who=WHO)
    def delete_file(self, data: st.DataObject, who: str) -> None:
        bucket_id, file_key = self.file_target(data)
        key = self.keys[who]
        response = self.http[who].delete(f"/buckets/{bucket_id}/files/{file_key}")
        if "files:write" not in key.scopes:
            expected = 403
        elif not self.visible(key, bucket_id) or file_key not in self.buckets[bucket_id].files:
            expected = 404
        else:
            expected = 200
        assert response.status_code == expected, response.text
        if expected == 200:
            del self.buckets[bucket_id].files[file_key]

    @rule(data=st.data(), who=WHO, new_key=FILE_KEYS)
    def rename_file(self, data: st.DataObject, who: str, new_key: str) -> None:
        bucket_id, file_key = self.file_target(data)
        key = self.keys[who]
        response = self.http[who].patch(
            f"/buckets/{bucket_id}/files/{file_key}", json={"key": new_key}
        )
        if "files:write" not in key.scopes:
            expected = 403
        elif not self.visible(key, bucket_id) or file_key not in self.buckets[bucket_id].files:
            expected = 404
        elif new_key != file_key and new_key in self.buckets[bucket_id].files:
            expected = 409
        else:
            expected = 200
        assert response.status_code == expected, response.text
        if expected == 200:
            files = self.buckets[bucket_id].files
            files[new_key] = files.pop(file_key)

    @rule(
        data=st.data(),
        who=WHO,
        limit=st.integers(1, 3),
    )
    def list_files(self, data: st.DataObject, who: str, limit: int) -> None:
        bucket_id = data.draw(self.bucket_ids())
        key = self.keys[who]
        response = self.http[who].get(f"/buckets/{bucket_id}/files", params={"limit": limit})
        if "files:read" not in key.scopes:
            assert response.status_code == 403
            return
        if not self.visible(key, bucket_id):
            assert response.status_code == 404
            return
        listed = []
        while True:
            assert response.status_code == 200
            body = response.json()
            listed += [(f["key"], f["size"]) for f in body["data"]]
            if body["meta"]["nextCursor"] is None:
                break
            response = self.http[who].get(
                f"/buckets/{bucket_id}/files",
                params={"limit": limit, "cursor": body["meta"]["nextCursor"]},
            )
        expected = sorted((k, len(v)) for k, v in self.buckets[bucket_id].files.items())
        assert listed == expected

    @invariant()
    @precondition(lambda self: self.buckets_touched)
    def bucket_lists_match(self) -> None:
        """After each step that asked for a bucket to be made or deleted (refused or not),
        and at the end of the run (`teardown`): a file's step that changed a bucket list
        is found at the next of those, since nothing in the model changes it back. Listing
        with each of the four keys after every step was two thirds of the test's CPU."""
        self.check_bucket_lists()
        self.buckets_touched = False

    def check_bucket_lists(self) -> None:
        for who, key in self.keys.items():
            if "buckets:read" not in key.scopes:
                continue
            listed = {
                b["id"]
                for b in self.http[who].get("/buckets", params={"limit": 100}).json()["data"]
            }
            assert listed == {
                bucket_id for bucket_id in self.buckets if self.visible(key, bucket_id)
            }


def make_key(live: LiveServer, org: str, scopes: list[str], bucket: str | None = None) -> str:
    extra = ["--bucket", bucket] if bucket else []
    return (
        live.cli("keys", "create", "--org", org, "--scopes", ",".join(scopes), *extra)
        .strip()
        .splitlines()[-1]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_api_against_model(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> None:
    live = LiveServer(tmp_path / "data", with_backend(request, backend, TEST_CONFIG)).start()
    try:
        org_a = live.cli("orgs", "create", "a", "--plan", "pro").strip().splitlines()[-1]
        org_b = live.cli("orgs", "create", "b", "--plan", "pro").strip().splitlines()[-1]
        admin_a = make_key(live, org_a, ALL)
        with live.client(admin_a) as http:
            seed = new_bucket(http, "seed")["id"]
        keys = {
            "a-admin": Key(org_a, admin_a, ALL),
            "a-read": Key(org_a, make_key(live, org_a, READ), READ),
            "a-scoped": Key(org_a, make_key(live, org_a, ALL, seed), ALL, seed),
            "b-admin": Key(org_b, make_key(live, org_b, ALL), ALL),
        }
        run_state_machine_as_test(
            lambda: ApiMachine(live, keys, {seed: Bucket(org_a, "seed")}),
            settings=settings(
                max_examples=budget(50 if backend == "local" else 20),
                stateful_step_count=25,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        live.stop()
    if backend == "local":
        assert live.cli("check").strip().endswith("consistent")
