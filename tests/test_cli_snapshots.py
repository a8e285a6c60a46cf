"""`bucketd snapshots ...` as a person types it: real `bucketd` processes against the
shared server's API (BUCKETD_URL and its admin key), a bucket's snapshot taken, listed,
restored, forked and deleted, and the operator's `--server` ones."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.commands import bucketd, ok
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

pytestmark = pytest.mark.slow  # a bucketd process per command


def _files(http: httpx.Client, bucket: dict) -> list[str]:
    listed = http.get(f"/buckets/{bucket['id']}/files").json()["data"]
    return [found["key"] for found in listed]


def test_a_bucket_snapshot_from_the_command_line(local_server: LiveServer) -> None:
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("cli"))
        http.put(
            f"/buckets/{bucket['id']}/files/a.txt",
            content=b"a",
            headers={"Content-Type": "text/plain"},
        )
        taken = ok(bucketd(local_server, "snapshots", "create", bucket["name"], "--name", "first"))
        snapshot_id = taken.strip().splitlines()[-1]
        assert snapshot_id.startswith("snap_") and "1 version," in taken
        http.put(
            f"/buckets/{bucket['id']}/files/b.txt",
            content=b"b",
            headers={"Content-Type": "text/plain"},
        )

        listed = ok(bucketd(local_server, "snapshots", "list", bucket["name"]))
        header, *rows = listed.splitlines()
        assert header.split() == ["ID", "CREATED", "BUCKET", "NAME", "VERSIONS", "SIZE"]
        assert len(rows) == 1 and rows[0].split()[:5:2] == [snapshot_id, bucket["name"], "1"]

        restored = ok(bucketd(local_server, "snapshots", "restore", snapshot_id))
        assert f"restored bucket {bucket['name']}" in restored
        assert _files(http, bucket) == ["a.txt"]

        name = unique_name("fork")
        forked = json.loads(
            ok(bucketd(local_server, "snapshots", "fork", snapshot_id, name, "--json"))
        )
        assert forked["name"] == name and forked["fileCount"] == 1
        assert _files(http, forked) == ["a.txt"]

        ok(bucketd(local_server, "snapshots", "delete", snapshot_id))
        again = bucketd(local_server, "snapshots", "delete", snapshot_id)
        assert again.returncode == 1 and "snapshot not found" in again.stderr


def test_server_snapshots_and_usage_errors(local_server: LiveServer) -> None:
    taken = ok(bucketd(local_server, "snapshots", "create", "--server", "--name", "nightly"))
    snapshot_id = taken.strip().splitlines()[-1]
    assert "of the server" in taken
    listed = json.loads(ok(bucketd(local_server, "snapshots", "list", "--server", "--json")))
    assert snapshot_id in [s["id"] for s in listed]
    ok(bucketd(local_server, "snapshots", "delete", "--server", snapshot_id))

    both = bucketd(local_server, "snapshots", "create", "photos", "--server")
    assert both.returncode == 2 and "--server" in both.stderr
    neither = bucketd(local_server, "snapshots", "create")
    assert neither.returncode == 2 and "bucket" in neither.stderr
