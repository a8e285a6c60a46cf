"""Injected faults (storage/faults.py): a 500 and a full disk, in the envelope."""

from __future__ import annotations

from pathlib import Path

from tests.support.live import LiveServer, new_bucket


def test_an_unexpected_error_is_a_500_without_traceback(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", env={"BUCKETD_FAULTS": "list=raise"}).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, "boom")
            response = http.get(f"/buckets/{bucket['id']}/files")
            assert response.status_code == 500
            body = response.json()
            assert body["data"] is None and body["meta"] is None
            assert body["error"]["code"] == "internal_error"
            assert "Traceback" not in response.text and "injected" not in response.text
            assert response.headers["x-ratelimit-limit"].isdigit()
            assert http.get(f"/buckets/{bucket['id']}").status_code == 200
    finally:
        live.stop()
    assert "injected fault at list" in live.log_path.read_text()


def test_a_full_disk_fails_the_upload_cleanly_and_keeps_serving(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data").start()
    with live.client() as http:
        bucket = new_bucket(http, "full")
        http.put(
            f"/buckets/{bucket['id']}/files/k",
            content=b"before",
            headers={"Content-Type": "text/plain"},
        )
    live.stop()
    live.env = {"BUCKETD_FAULTS": "blob.write=enospc"}
    live.start()
    try:
        with live.client() as http:
            response = http.put(
                f"/buckets/{bucket['id']}/files/k",
                content=b"x" * 100_000,
                headers={"Content-Type": "text/plain"},
            )
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "storage_unavailable"
            assert "No space left" in response.json()["error"]["message"]
            assert response.headers["retry-after"] == "1"
            assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"before"
            assert list((live.data_dir / "tmp").iterdir()) == []
            assert http.get(f"/buckets/{bucket['id']}").json()["data"]["fileCount"] == 1
    finally:
        live.stop()
