"""The container image and the compose file (issue 34 point 10), built from the repository's
Dockerfile and run with podman as docs/operations.md says: a volume for the data dir, the
credential and buckets from the environment, the health check on /readyz, boto3 and the aws
CLI on the published ports, and the data still there after the container is stopped and
started again."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.config import Config

from tests.support import web
from tests.support.commands import CI, aws
from tests.support.containers import (
    Podman,
    base_image,
    build_image,
    published,
    wait_healthy,
    wheelhouse,
)
from tests.support.live import ROOT, free_port

pytestmark = [
    pytest.mark.slow,  # an image build (seconds once cached) and containers
    # A machine's first run makes the base image and the wheels (80 s on a quiet machine,
    # 210 s on a loaded one), inside the first test's set-up: past the suite's 300 s.
    pytest.mark.timeout(900),
]

BIN = Path(sys.executable).parent


@dataclass
class Image:
    podman: Podman
    id: str


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    folder = tmp_path_factory.mktemp("containers")
    podman = Podman(folder)
    base = base_image(podman)
    return Image(podman, build_image(podman, base, wheelhouse(podman, base), folder / "image-id"))


def s3_client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=CI[0],
        aws_secret_access_key=CI[1],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
    )


def test_the_image_declares_its_user_volume_ports_command_and_health_check(
    image: Image,
) -> None:
    config = image.podman.inspect("image", "inspect", image.id)
    assert config["Config"]["User"] == "10001:10001"
    assert set(config["Config"]["Volumes"]) == {"/data"}
    assert set(config["Config"]["ExposedPorts"]) == {"8080/tcp", "9000/tcp"}
    assert (config["Config"]["Entrypoint"], config["Config"]["Cmd"]) == (["bucketd"], ["serve"])
    assert {"BUCKETD_HOST=0.0.0.0", "BUCKETD_DATA_DIR=/data"} <= set(config["Config"]["Env"])
    check = config["Healthcheck"]["Test"]
    assert check[0] == "CMD" and "/readyz" in check[-1]


@pytest.fixture
def volume(image: Image) -> Iterator[str]:
    name = f"bucketd-test-{uuid.uuid4().hex[:8]}"
    image.podman.run("volume", "create", name)
    yield name
    image.podman.run("rm", "--force", "--time=0", name, check=False)
    image.podman.run("volume", "rm", "--force", name, check=False)


def test_run_it_with_a_volume_use_it_with_boto3_and_the_aws_cli_and_restart_it(
    image: Image, volume: str, tmp_path: Path
) -> None:
    podman, name = image.podman, volume
    # ports of this worker's share, below the range the kernel hands to outgoing connections,
    # one of which could take a port podman chose while the container is stopped
    api_port, s3_port = free_port(), free_port()
    podman.run(
        *("run", "--detach", f"--name={name}", f"--volume={name}:/data"),
        *(f"--publish=127.0.0.1:{api_port}:8080", f"--publish=127.0.0.1:{s3_port}:9000"),
        *(f"--env=BUCKETD_ACCESS_KEY_ID={CI[0]}", f"--env=BUCKETD_SECRET_ACCESS_KEY={CI[1]}"),
        *("--env=BUCKETD_BUCKETS=demo", image.id),
    )
    wait_healthy(podman, name)
    api, s3 = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{s3_port}"
    assert published(podman, name, 9000) == f"127.0.0.1:{s3_port}"
    assert web.get(api + "/readyz").json()["data"] == {"status": "ready"}
    client = s3_client(s3)
    client.put_object(Bucket="demo", Key="from-boto3.txt", Body=b"boto3 in a container")
    source = tmp_path / "hello.txt"
    source.write_text("hello from the aws CLI\n")
    copied = aws(s3, CI, "s3", "cp", str(source), "s3://demo/from-aws.txt")
    assert copied.returncode == 0, copied.stderr
    top = podman.run("top", name, "pid", "user", "args").stdout.splitlines()[1:]
    processes = [(pid, user, args.strip()) for pid, user, args in (p.split(None, 2) for p in top)]
    assert {user for _, user, _ in processes} == {"bucketd"}  # the server's processes, all
    assert processes[0][0::2] == ("1", "/opt/bucketd/bin/python3 /opt/bucketd/bin/bucketd serve")
    backup = podman.run("exec", name, "bucketd", "backup", "/tmp/backup")  # the docs' way
    assert "backed up the index" in backup.stdout, backup.stdout
    stored = Path(podman.inspect("volume", "inspect", name)["Mountpoint"])
    digest = hashlib.sha256(b"boto3 in a container").hexdigest()
    index = stored / "index.db"  # the content, on the volume: small ones live in the index
    with closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT inline_data FROM blobs WHERE id = ?", (digest,)).fetchone()
    assert row == (b"boto3 in a container",) and index.stat().st_uid == 10001

    started = time.monotonic()
    podman.run("stop", "--time=15", name)
    stopped_in = time.monotonic() - started
    state = podman.inspect("container", "inspect", name)["State"]
    assert state["ExitCode"] == 0 and stopped_in < 10, (state, stopped_in)  # SIGTERM, no kill
    podman.run("start", name)
    wait_healthy(podman, name)
    body = client.get_object(Bucket="demo", Key="from-boto3.txt")["Body"].read()
    assert body == b"boto3 in a container"
    listed = client.list_objects_v2(Bucket="demo")["Contents"]
    assert sorted(o["Key"] for o in listed) == ["from-aws.txt", "from-boto3.txt"]
    logs = podman.run("logs", name)
    output = logs.stdout + logs.stderr
    assert output.count("first start") == 1  # the second start found its data dir
    assert "Traceback" not in output and CI[1] not in output


def _compose(
    podman: Podman, project: str, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """podman-compose with `env` and none of the BUCKETD_* variables of the test's own."""
    inherited = {k: v for k, v in podman.env.items() if not k.startswith("BUCKETD_")}
    return subprocess.run(
        [str(BIN / "podman-compose"), "--project-name", project, *args],
        cwd=ROOT,
        env=inherited | env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_compose_file_serves_the_image_with_its_volume_and_needs_a_secret(
    image: Image,
) -> None:
    document = yaml.safe_load((ROOT / "compose.yaml").read_text())
    service = document["services"]["bucketd"]
    assert service["build"] == "." and "data" in document["volumes"]
    assert service["volumes"] == ["data:/data"]
    built = image.podman.inspect("image", "inspect", image.id)["Healthcheck"]
    assert service["healthcheck"]["test"] == built["Test"]  # the Dockerfile's, word for word
    for field, nanoseconds in (("interval", "Interval"), ("timeout", "Timeout")):
        assert service["healthcheck"][field] == f"{built[nanoseconds] // 10**9}s"
    project = f"bucketd-test-{uuid.uuid4().hex[:8]}"
    refused = _compose(image.podman, project, {}, "config")
    assert refused.returncode != 0
    assert "BUCKETD_SECRET_ACCESS_KEY" in refused.stdout + refused.stderr
    ports = {"BUCKETD_PORT": str(free_port()), "BUCKETD_S3_PORT": str(free_port())}
    env = {
        "BUCKETD_IMAGE": image.id,
        "BUCKETD_ACCESS_KEY_ID": CI[0],
        "BUCKETD_SECRET_ACCESS_KEY": CI[1],
        "BUCKETD_BUCKETS": "composed",
        **ports,
    }
    try:
        up = _compose(image.podman, project, env, "up", "--detach", "--no-build")
        assert up.returncode == 0, up.stdout + up.stderr
        (container,) = image.podman.run(
            "ps", f"--filter=label=io.podman.compose.project={project}", "--format={{.Names}}"
        ).stdout.split()
        wait_healthy(image.podman, container)
        client = s3_client(f"http://127.0.0.1:{ports['BUCKETD_S3_PORT']}")
        client.put_object(Bucket="composed", Key="k", Body=b"composed")
        api = f"http://127.0.0.1:{ports['BUCKETD_PORT']}"
        buckets = web.get(api + "/v1/buckets", auth=CI).json()["data"]
        assert [b["name"] for b in buckets] == ["composed"]
    finally:
        down = _compose(image.podman, project, env, "down", "--volumes", "--timeout=15")
    assert down.returncode == 0, down.stdout + down.stderr
    assert image.podman.run("volume", "exists", f"{project}_data", check=False).returncode == 1
