"""Running bucketd and the S3 tools (aws, rclone) as processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import launch
from tests.support.aws_forks import AwsForks
from tests.support.live import TEST_CONFIG, LiveServer, free_port

BIN = Path(sys.executable).parent
"""Where this venv keeps aws and rclone."""


@dataclass
class Served:
    api: str
    s3: str | None
    log: Path
    pid: int


def aws(
    live: LiveServer | str, credentials: tuple[str, str], *args: str, config: str = "/nonexistent"
) -> subprocess.CompletedProcess[str]:
    """The aws CLI against a server's S3 endpoint (or the endpoint URL given), with `config`
    as its configuration file."""
    endpoint = live if isinstance(live, str) else live.s3_url
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": credentials[0],
        "AWS_SECRET_ACCESS_KEY": credentials[1],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": config,
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }
    argv = ["--endpoint-url", endpoint, *args]
    if launch.forkable(env) and _AWS.takes(env):
        return _AWS.run(argv, env, timeout=120)
    return subprocess.run(
        [str(BIN / "aws"), *argv], capture_output=True, text=True, env=env, timeout=120
    )


_AWS = AwsForks()
"""This worker's aws commands: forks of one process with awscli imported
(`tests/support/aws_forks.py`)."""


def rclone(
    live: LiveServer | str, credentials: tuple[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """rclone with the remote `bkd:` on a server's S3 endpoint (or the endpoint URL given)."""
    env = {
        **os.environ,
        "RCLONE_CONFIG": "/nonexistent",
        "RCLONE_CONFIG_BKD_TYPE": "s3",
        "RCLONE_CONFIG_BKD_PROVIDER": "Other",
        "RCLONE_CONFIG_BKD_ENDPOINT": live if isinstance(live, str) else live.s3_url,
        "RCLONE_CONFIG_BKD_ACCESS_KEY_ID": credentials[0],
        "RCLONE_CONFIG_BKD_SECRET_ACCESS_KEY": credentials[1],
        "RCLONE_CONFIG_BKD_REGION": "us-east-1",
        "RCLONE_CONFIG_BKD_FORCE_PATH_STYLE": "true",
    }
    return subprocess.run(
        [str(BIN / "rclone"), *args], capture_output=True, text=True, env=env, timeout=180
    )


def bucketd(
    live: LiveServer | None, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BUCKETD_")}
    if live is not None:
        environ |= {"BUCKETD_URL": live.url, "BUCKETD_KEY": live.admin_key}
    environ |= env or {}
    return launch.run(args, env=environ, stdin=stdin)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


CI = ("ci", "cisecret123")


def serve_command(
    base: Path, config: Path, port: int, s3_port: int | None, *flags: str
) -> list[str]:
    """`bucketd serve` as one process, on a data dir under `base` (`s3_port` None: the
    default port)."""
    s3 = [] if s3_port is None else ["--s3-port", str(s3_port)]
    return [
        sys.executable,
        "-m",
        "gateway",
        "serve",
        "--data-dir",
        str(base / "data"),
        "--config",
        str(config),
        "--port",
        str(port),
        *s3,
        "--workers",
        "1",
        *flags,
    ]


@contextmanager
def serve(
    base: Path,
    env: dict[str, str],
    *flags: str,
    config: str = TEST_CONFIG,
    ports: tuple[int, int] | None = None,
) -> Iterator[Served]:
    """`bucketd serve --ready-file` with `env` on a data dir under `base`, until the block
    ends; the ready file says where it serves. `ports`: (API, S3), free ones by default."""
    ready = base / "ready.json"
    (base / "bucketd.toml").write_text(config)
    log = base / "serve.log"
    process = launch.start(
        serve_command(
            base,
            base / "bucketd.toml",
            *(ports or (free_port(), free_port())),
            "--ready-file",
            str(ready),
            *flags,
        )[3:],
        env={**os.environ, "BUCKETD_STORAGE__FSYNC": "false", **env},
        log=log,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        urls = json.loads(ready.read_text())
        assert urls["pid"] == process.pid
        yield Served(urls["api"], urls["s3"], log, process.pid)
    finally:
        process.terminate()
        process.wait(15)
    assert not ready.exists()  # removed on the way out


def bootstrap_env(credentials: tuple[str, str] = CI, **more: str) -> dict[str, str]:
    return {
        "BUCKETD_ACCESS_KEY_ID": credentials[0],
        "BUCKETD_SECRET_ACCESS_KEY": credentials[1],
        **more,
    }
