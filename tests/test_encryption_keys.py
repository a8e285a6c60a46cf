"""The master key (issue 37 point 1): configured from the environment, rotated by
`bucketd rotate-master-key` without rewriting a content, and a rotation SIGKILLed halfway
leaves every object readable, `check --deep` consistent, and finishes when run again."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from storage.encryption import key_id
from tests.support import launch
from tests.support.live import LiveServer, free_port

pytestmark = pytest.mark.slow  # four server starts


def _key() -> tuple[bytes, str]:
    raw = os.urandom(32)
    return raw, base64.b64encode(raw).decode()


def _readable(live: LiveServer, bucket: str, bodies: dict[str, bytes]) -> None:
    live.start()
    try:
        s3: Any = live.s3()
        for key, body in bodies.items():
            got = s3.get_object(Bucket=bucket, Key=key)
            assert (key, got["Body"].read()) == (key, body)
    finally:
        live.stop()


def test_a_rotation_rewraps_every_key_and_survives_a_sigkill(tmp_path: Path) -> None:
    old_raw, old = _key()
    new_raw, new = _key()
    live = LiveServer(tmp_path / "data", env={"BUCKETD_STORAGE__MASTER_KEY": old})
    live.start()
    bodies = {f"k{n}": os.urandom(n * 50_000 + 10) for n in range(5)}
    try:
        s3: Any = live.s3()
        s3.create_bucket(Bucket="vault")
        for key, body in bodies.items():
            s3.put_object(Bucket="vault", Key=key, Body=body, ServerSideEncryption="AES256")
        s3.copy_object(Bucket="vault", Key="copy", CopySource="vault/k3")
        s3.put_object(Bucket="vault", Key="plain", Body=b"plain")
    finally:
        live.stop()
    bodies |= {"copy": bodies["k3"], "plain": b"plain"}
    assert not (live.data_dir / "master.key").exists()  # the configured key, not the data dir's
    index = (live.data_dir / "index.db").read_bytes()
    assert old.encode() not in index and old_raw not in index

    # The new key, the old one kept to read; the rotation is killed after its first batch.
    live.env |= {"BUCKETD_STORAGE__MASTER_KEY": new, "BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS": old}
    argv = ["rotate-master-key", "--batch", "2", "--data-dir", str(live.data_dir)]
    argv += ["--config", str(live.config_path)]
    killed = launch.run(
        argv, env={**os.environ, **live.env, "BUCKETD_FAULTS": "rotate.after_batch=kill"}
    )
    assert killed.returncode != 0
    _readable(live, "vault", bodies)
    assert live.cli("check", "--deep").strip().endswith("consistent")

    # Run again: what the first run rewrapped is skipped, the rest rewrapped (the copy shares
    # its source's key: five content keys in all).
    finished = live.cli("rotate-master-key", "--batch", "2")
    assert f"under master key {key_id(new_raw)}" in finished
    rewrapped = int(finished.split("rewrapped ")[-1].split(" of ")[0])
    assert 0 < rewrapped < 5
    assert "\nrewrapped 0 of 5 content keys" in live.cli("rotate-master-key")

    # The old key gone: everything still reads.
    del live.env["BUCKETD_STORAGE__PREVIOUS_MASTER_KEYS"]
    _readable(live, "vault", bodies)
    assert live.cli("check", "--deep").strip().endswith("consistent")
    # And without the master key that wraps them, encrypted objects do not read.
    live.env["BUCKETD_STORAGE__MASTER_KEY"] = old
    live.start()
    try:
        s3 = live.s3()
        assert s3.get_object(Bucket="vault", Key="plain")["Body"].read() == b"plain"
        with pytest.raises(Exception, match="master key"):
            s3.get_object(Bucket="vault", Key="k1")["Body"].read()
    finally:
        live.stop()


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]])
def test_a_missing_master_key_file_ends_the_server_at_start(
    tmp_path: Path, workers: list[str]
) -> None:
    """The server says what is wrong and exits: the index it had opened is closed again
    (`--workers 2` used to print the error and hang for ever, SIGTERM included, on the
    SQLite index's threads)."""
    env = dict(os.environ, BUCKETD_STORAGE__MASTER_KEY=f"@{tmp_path / 'no-such-key'}")
    command = [sys.executable, "-m", "gateway", "serve", "--data-dir", str(tmp_path / "data")]
    ports = ["--port", str(free_port()), "--s3-port", str(free_port())]
    ended = subprocess.run(
        [*command, *ports, *workers], env=env, capture_output=True, text=True, timeout=60
    )
    assert ended.returncode != 0
    assert "master_key" in ended.stderr + ended.stdout
