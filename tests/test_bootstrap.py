"""From nothing to a working bucket with environment variables: the credential, buckets and
plan made on start (and kept, or rotated, on a restart), the ready file and /readyz, and
both listeners over TLS with a certificate the tests make, for boto3, the aws CLI and
rclone."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import trustme
from botocore.config import Config
from botocore.exceptions import ClientError

import bucketd_client
from tests.support import web
from tests.support.commands import CI, Served, aws, bootstrap_env, rclone, serve, serve_command
from tests.support.live import TEST_CONFIG, free_port

pytestmark = pytest.mark.slow  # real `bucketd serve` processes, the aws CLI and rclone


def s3_client(served: Served, credentials: tuple[str, str], verify: Any = None) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=served.s3,
        aws_access_key_id=credentials[0],
        aws_secret_access_key=credentials[1],
        region_name="us-east-1",
        verify=verify,
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
    )


def test_two_variables_and_a_bucket_list_are_all_a_ci_job_needs(tmp_path: Path) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"from CI")
    env = bootstrap_env(BUCKETD_BUCKETS="demo,logs")
    with serve(tmp_path, env) as served:
        assert web.get(served.api + "/readyz").json()["data"] == {"status": "ready"}
        copied = aws(served.s3, CI, "s3", "cp", str(source), "s3://demo/f")
        assert copied.returncode == 0, copied.stderr
        listed = aws(served.s3, CI, "s3", "ls", "s3://logs")
        assert listed.returncode == 0, listed.stderr
        basic = web.get(served.api + "/v1/buckets", auth=CI).json()["data"]
        assert {(b["name"], b["status"]) for b in basic} == {("demo", "active"), ("logs", "active")}
        organization = web.get(served.api + "/v1/organization", auth=CI).json()["data"]
        assert (organization["name"], organization["plan"]) == ("default", "pro")
        wrong = web.get(served.api + "/v1/buckets", auth=("ci", "not-the-secret"))
        assert wrong.status_code == 401
        keys = web.get(served.api + "/v1/keys", auth=CI).json()["data"]
        first = [k["id"] for k in keys if k["name"] == "bootstrap" and not k["revokedAt"]]
    assert CI[1] not in served.log.read_text()  # never printed or logged
    with serve(tmp_path, env) as served:  # the same values: nothing changes
        assert s3_client(served, CI).get_object(Bucket="demo", Key="f")["Body"].read() == (
            b"from CI"
        )
        keys = web.get(served.api + "/v1/keys", auth=CI).json()["data"]
        assert [k["id"] for k in keys if k["name"] == "bootstrap" and not k["revokedAt"]] == first
    rotated = ("ci", "a-new-secret-456")
    with serve(tmp_path, bootstrap_env(rotated, BUCKETD_PLAN="free")) as served:
        with pytest.raises(ClientError):
            s3_client(served, CI).list_objects_v2(Bucket="demo")
        assert s3_client(served, rotated).list_objects_v2(Bucket="demo")["KeyCount"] == 1
        keys = web.get(served.api + "/v1/keys", auth=rotated).json()["data"]
        active = [k for k in keys if k["name"] == "bootstrap" and not k["revokedAt"]]
        assert len(active) == 1 and active[0]["id"] not in first
        organization = web.get(served.api + "/v1/organization", auth=rotated).json()["data"]
        assert organization["plan"] == "free"
    assert rotated[1] not in served.log.read_text()


def test_a_bucket_a_stopped_run_left_provisioning_is_active_when_the_next_is_ready(
    tmp_path: Path,
) -> None:
    slow = "provisioning_delay_seconds = 60.0\n" + TEST_CONFIG
    with serve(tmp_path, bootstrap_env(), config=slow) as served:
        made = web.post(
            served.api + "/v1/buckets", auth=CI, json={"name": "later", "region": "us-east-1"}
        )
        assert made.json()["data"]["status"] == "provisioning"
    with serve(tmp_path, bootstrap_env(BUCKETD_BUCKETS="later"), config=slow) as served:
        buckets = web.get(served.api + "/v1/buckets", auth=CI).json()["data"]
        assert [(b["name"], b["status"]) for b in buckets] == [("later", "active")]


def test_a_bucket_name_the_environment_gives_that_is_not_valid_stops_the_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "bucketd.toml").write_text(TEST_CONFIG)
    started = subprocess.run(
        serve_command(tmp_path, tmp_path / "bucketd.toml", free_port(), 0),
        env={**os.environ, "BUCKETD_BUCKETS": "ok-name,Not_A_Bucket"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert started.returncode != 0
    assert "BUCKETD_BUCKETS (bootstrap.buckets): 'Not_A_Bucket': name must be" in started.stderr
    assert not (tmp_path / "data").exists()  # refused before anything was made


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def test_both_listeners_over_tls_for_boto3_the_aws_cli_and_rclone(
    tmp_path: Path, authority: trustme.CA
) -> None:
    certificate = authority.issue_cert("127.0.0.1", "localhost")
    cert, key, ca = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    certificate.cert_chain_pems[0].write_to_path(str(cert))
    for blob in certificate.cert_chain_pems[1:]:
        blob.write_to_path(str(cert), append=True)
    certificate.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(ca))
    source = tmp_path / "f.txt"
    source.write_bytes(b"over TLS")
    env = bootstrap_env(BUCKETD_BUCKETS="secure")
    with serve(tmp_path, env, "--tls-cert", str(cert), "--tls-key", str(key)) as served:
        assert served.api.startswith("https://") and served.s3.startswith("https://")
        trusting = ssl.create_default_context(cafile=str(ca))
        assert web.get(served.api + "/readyz", verify=trusting).status_code == 200
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the CA
            web.get(served.api + "/readyz")
        s3 = s3_client(served, CI, verify=str(ca))
        s3.put_object(Bucket="secure", Key="boto3.txt", Body=b"boto3")
        copied = aws(
            served.s3, CI, "s3", "cp", str(source), "s3://secure/cli.txt", "--ca-bundle", str(ca)
        )
        assert copied.returncode == 0, copied.stderr
        synced = rclone(
            served.s3, CI, "copyto", str(source), "bkd:secure/rclone.txt", "--ca-cert", str(ca)
        )
        assert synced.returncode == 0, synced.stderr
        listed = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="secure")["Contents"])
        assert listed == ["boto3.txt", "cli.txt", "rclone.txt"]
        files = web.get(served.api + "/v1/buckets", auth=CI, verify=trusting).json()["data"]
        assert [b["name"] for b in files] == ["secure"]
        # The typed client trusts as httpx does (SSL_CERT_FILE, else certifi): past the
        # handshake, the server refuses its key; short of it, the connection fails.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SSL_CERT_FILE", str(ca))
            with (
                bucketd_client.Client(served.api, "bk_unknown", retry=None) as typed,
                pytest.raises(bucketd_client.Unauthorized),
            ):
                typed.list_buckets()
        with (
            bucketd_client.Client(served.api, "bk_unknown", retry=None) as typed,
            pytest.raises(bucketd_client.ConnectionFailed),
        ):
            typed.list_buckets()

        renewed, new_ca = trustme.CA(), tmp_path / "new-ca.pem"  # renewed in place, SIGHUP
        certificate = renewed.issue_cert("127.0.0.1", "localhost")
        certificate.private_key_and_cert_chain_pem.write_to_path(str(cert))
        certificate.private_key_pem.write_to_path(str(key))
        renewed.cert_pem.write_to_path(str(new_ca))
        os.kill(served.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "TLS certificates" not in served.log.read_text():
            assert time.monotonic() < deadline, served.log.read_text()
            time.sleep(0.02)
        trusting_new = ssl.create_default_context(cafile=str(new_ca))
        assert web.get(served.api + "/readyz", verify=trusting_new).status_code == 200
        with pytest.raises(httpx.ConnectError):
            web.get(served.s3, verify=trusting)


@pytest.mark.anyio
async def test_serving_a_dev_data_dir_revokes_the_published_credential(tmp_path: Path) -> None:
    """`bucketd dev`'s credential is published in the docs: a data dir it made, later run
    by `bucketd serve` without asking for that credential, no longer accepts it."""
    import io

    from gateway.runtime.bootstrap import DEV_CREDENTIALS, apply_bootstrap
    from gateway.settings import BootstrapSettings
    from storage.config import EngineConfig
    from storage.engine import Engine

    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    try:
        dev = BootstrapSettings(
            access_key_id=DEV_CREDENTIALS[0], secret_access_key=DEV_CREDENTIALS[1]
        )
        await apply_bootstrap(engine, dev, io.StringIO())
        await apply_bootstrap(engine, dev, io.StringIO())  # dev again: kept
        found = await engine.keys.find_s3(DEV_CREDENTIALS[0])
        assert found is not None and found[0].revoked_at is None
        said = io.StringIO()
        await apply_bootstrap(engine, BootstrapSettings(), said)  # bucketd serve
        found = await engine.keys.find_s3(DEV_CREDENTIALS[0])
        assert found is not None and found[0].revoked_at is not None
        assert "revoked the development S3 credential" in said.getvalue()
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_a_revoked_credential_is_not_made_valid_by_a_restart(tmp_path: Path) -> None:
    """`bucketd keys revoke` of the environment's credential (a leaked secret, say), then a
    restart that still has the old environment: the start stops in one line rather than
    make the secret valid again (it failed on the index's unique access key id before); a
    new secret for the same access key id makes a new credential. `bucketd dev` makes its
    own again after `bucketd serve` revoked it, as the message that revokes it says."""
    import io

    from gateway.runtime.bootstrap import DEV_CREDENTIALS, apply_bootstrap
    from gateway.settings import BootstrapSettings
    from storage.config import EngineConfig
    from storage.engine import Engine
    from storage.errors import InvalidInput
    from storage.models import Actor

    ci, rotated = BootstrapSettings(*CI), BootstrapSettings(CI[0], "a-new-secret-456")
    dev = BootstrapSettings(*DEV_CREDENTIALS)
    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    try:
        for settings in (ci, dev):
            await apply_bootstrap(engine, settings, io.StringIO())
            found = await engine.keys.find_s3(settings.access_key_id)
            assert found is not None
            await engine.keys.revoke(Actor(org_id=found[0].org_id), found[0].id)
        await apply_bootstrap(engine, dev, io.StringIO())  # bucketd dev: made again
        again = await engine.keys.find_s3(DEV_CREDENTIALS[0])
        assert again is not None and again[0].revoked_at is None
        with pytest.raises(InvalidInput, match="a revoked secret is not made valid again"):
            await apply_bootstrap(engine, ci, io.StringIO())
    finally:
        await engine.close()
    (tmp_path / "bucketd.toml").write_text(TEST_CONFIG)
    started = subprocess.run(  # the same, through the program
        serve_command(tmp_path, tmp_path / "bucketd.toml", free_port(), free_port()),
        env={**os.environ, **bootstrap_env(CI)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 1, started.stdout + started.stderr
    (line,) = started.stderr.splitlines()
    assert f"the one of the S3 credential {CI[0]} (" in line and ", revoked at " in line
    engine = await Engine.open(EngineConfig(data_dir=tmp_path / "data"))
    try:
        said = io.StringIO()
        await apply_bootstrap(engine, rotated, said)
        assert "gives its access key id to the new secret" in said.getvalue()
        found = await engine.keys.find_s3(CI[0])
        assert found is not None and found[0].revoked_at is None
        assert found[1] == rotated.secret_access_key
    finally:
        await engine.close()


@pytest.mark.anyio
async def test_a_dev_credential_that_does_not_unseal_stops_no_start(tmp_path: Path) -> None:
    """A data dir restored without its secrets.key (or behind a gateway with another):
    `bucketd serve` starts, and says it left the credential."""
    import io

    from gateway.runtime.bootstrap import DEV_CREDENTIALS, apply_bootstrap
    from gateway.settings import BootstrapSettings
    from storage.config import EngineConfig
    from storage.engine import Engine
    from storage.sealing import KEY_FILE

    config = EngineConfig(data_dir=tmp_path / "data")
    engine = await Engine.open(config)
    dev = BootstrapSettings(access_key_id=DEV_CREDENTIALS[0], secret_access_key=DEV_CREDENTIALS[1])
    await apply_bootstrap(engine, dev, io.StringIO())
    await engine.close()
    (tmp_path / "data" / KEY_FILE).write_bytes(os.urandom(32))
    engine = await Engine.open(config)
    try:
        said = io.StringIO()
        await apply_bootstrap(engine, BootstrapSettings(), said)
        assert "does not unseal" in said.getvalue()
    finally:
        await engine.close()


TIGHT = TEST_CONFIG.replace("requests_per_minute = 10000000", "requests_per_minute = 3")
"""The default organization's plan at 3 requests a minute: any count would show."""


@pytest.mark.parametrize("plan", ["", "pro"])
def test_the_environments_credential_is_not_rate_limited_unless_a_plan_is_asked_for(
    tmp_path: Path, plan: str
) -> None:
    """Issue 34 point 6: a CI job's own credential got SlowDown at its 1,001st PUT of a
    minute. From the environment it is the operator's, counted by no limit, on both
    listeners; with BUCKETD_PLAN the plan's limits apply to it again. Another key of the
    same organization is counted as before."""
    env = bootstrap_env(**({"BUCKETD_PLAN": plan} if plan else {}))
    with serve(tmp_path, env, config=TIGHT) as served:
        s3 = s3_client(served, CI)
        answers = []
        for _ in range(6):
            try:
                s3.list_buckets()
                answers.append(200)
            except ClientError as exc:
                answers.append(exc.response["ResponseMetadata"]["HTTPStatusCode"])
        statuses = [web.get(served.api + "/v1/buckets", auth=CI).status_code for _ in range(6)]
        admin = (tmp_path / "data" / "admin.key").read_text().strip()
        bearer = {"Authorization": f"Bearer {admin}"}
        admins = [web.get(served.api + "/v1/buckets", headers=bearer).status_code for _ in range(4)]
        s3.close()
    if plan:
        assert 503 in answers and 429 in statuses  # SlowDown, rate_limited: counted again
    else:
        assert answers == [200] * 6 and statuses == [200] * 6
        assert admins == [200, 200, 200, 429]  # another key of the organization: counted
