"""Three gateways behind HAProxy (round-robin per request, no stickiness) over PostgreSQL,
SeaweedFS and Redis: the S3 tools' parallel multipart uploads land their parts on every
gateway, complete, and every gateway serves the same bytes; a gateway killed during such
an upload costs the client a retry, not the upload."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support.balancer import Balancer
from tests.support.cluster import Cluster
from tests.support.commands import aws, rclone
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named

pytestmark = pytest.mark.slow  # a PostgreSQL, Redis, SeaweedFS cluster and 190 MB through it

MiB = 1024 * 1024
TEN_THREADS = TransferConfig(
    multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB, max_concurrency=10
)
"""boto3's upload_file in 8 MiB parts, 10 at a time."""


@pytest.fixture(scope="module")
def balanced(
    tmp_path_factory: pytest.TempPathFactory, scale_out_cluster: Cluster
) -> Iterator[tuple[Cluster, Balancer]]:
    """HAProxy in front of the session's scale-out cluster (test_scale_out.py's too)."""
    balancer = Balancer(tmp_path_factory.mktemp("haproxy"), scale_out_cluster.gateways)
    try:
        yield scale_out_cluster, balancer
    finally:
        balancer.stop()


@pytest.fixture(scope="module")
def credentials(balanced: tuple[Cluster, Balancer]) -> tuple[str, str]:
    return balanced[0].gateways[0].s3_credentials()


def client(endpoint: str, credentials: tuple[str, str], attempts: int = 1) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=credentials[0],
        aws_secret_access_key=credentials[1],
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": attempts, "mode": "standard"},
            max_pool_connections=16,
        ),
    )


def random_file(path: Path, size: int) -> str:
    """A file of `size` random bytes; its SHA-256."""
    digest = hashlib.sha256()
    with open(path, "wb") as handle:
        for start in range(0, size, 8 * MiB):
            piece = os.urandom(min(8 * MiB, size - start))
            digest.update(piece)
            handle.write(piece)
    return digest.hexdigest()


def check_served_by_each(
    gateways: list[LiveServer],
    credentials: tuple[str, str],
    bucket: str,
    key: str,
    source: Path,
    digest: str,
) -> None:
    """Each gateway serves the object, straight from its S3 port: the first one whole (its
    SHA-256 is the source's), every one with one ETag, the length and three ranges equal
    to the source's bytes there. Whole copies from each would triple the largest transfer
    of the suite for no more certainty: every gateway reads the one object of the cluster."""
    size = source.stat().st_size
    etags = set()
    for n, gateway in enumerate(gateways):
        s3 = client(gateway.s3_url, credentials)
        head = s3.head_object(Bucket=bucket, Key=key)
        assert head["ContentLength"] == size
        etags.add(head["ETag"])
        with open(source, "rb") as original:
            for start in (0, size // 2 - 1000, size - MiB):
                span = f"bytes={start}-{start + MiB - 1}"
                read = s3.get_object(Bucket=bucket, Key=key, Range=span)["Body"].read()
                original.seek(start)
                assert read == original.read(MiB), (gateway.url, start)
        if n == 0:
            whole = hashlib.sha256()
            for chunk in s3.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(MiB):
                whole.update(chunk)
            assert whole.hexdigest() == digest
    assert len(etags) == 1


def parts_taken(gateways: list[LiveServer]) -> list[int]:
    """How many parts each gateway has stored so far, from its access log."""
    counts = []
    for gateway in gateways:
        lines = gateway.log_path.read_text().splitlines()
        counts.append(
            sum(
                1
                for line in lines
                if line.startswith("{")
                and '"UploadPart"' in line
                and json.loads(line).get("status") == 200
            )
        )
    return counts


def test_aws_cli_cp_of_64_mb_in_8_concurrent_parts(
    balanced: tuple[Cluster, Balancer], credentials: tuple[str, str], tmp_path: Path
) -> None:
    """One part for each of the 8 requests the aws CLI sends at once (its last one shorter),
    round-robin over three gateways: each stores two or three of them. What it shows
    (parts of one upload stored concurrently by different gateways, completed, served
    alike by each) needs 8 parts, not more: 200 MB (24 parts) took three times the data."""
    cluster, balancer = balanced
    source = tmp_path / "big.bin"
    digest = random_file(source, 64 * 1000 * 1000)
    config = tmp_path / "aws.config"
    config.write_text(
        "[default]\ns3 =\n  max_concurrent_requests = 8\n  multipart_chunksize = 8MB\n"
    )
    before = parts_taken(cluster.gateways)
    made = aws(balancer.s3_url, credentials, "s3", "mb", "s3://lb-aws", config=str(config))
    assert made.returncode == 0, made.stderr
    copied = aws(
        balancer.s3_url,
        credentials,
        "s3",
        "cp",
        str(source),
        "s3://lb-aws/big.bin",
        config=str(config),
    )
    assert copied.returncode == 0, copied.stderr
    taken = [after - was for after, was in zip(parts_taken(cluster.gateways), before, strict=True)]
    assert sum(taken) == 8 and all(count >= 2 for count in taken), taken  # 64 MB / 8 MiB
    check_served_by_each(cluster.gateways, credentials, "lb-aws", "big.bin", source, digest)


def test_boto3_upload_file_with_10_threads(
    balanced: tuple[Cluster, Balancer], credentials: tuple[str, str], tmp_path: Path
) -> None:
    cluster, balancer = balanced
    source = tmp_path / "boto.bin"
    digest = random_file(source, 40 * MiB + 123)
    s3 = client(balancer.s3_url, credentials)
    s3.create_bucket(Bucket="lb-boto3")
    s3.upload_file(str(source), "lb-boto3", "boto.bin", Config=TEN_THREADS)
    check_served_by_each(cluster.gateways, credentials, "lb-boto3", "boto.bin", source, digest)
    listed = s3.list_multipart_uploads(Bucket="lb-boto3")
    assert listed.get("Uploads", []) == []


def test_rclone_copy_in_parallel_chunks(
    balanced: tuple[Cluster, Balancer], credentials: tuple[str, str], tmp_path: Path
) -> None:
    cluster, balancer = balanced
    source = tmp_path / "rclone.bin"
    digest = random_file(source, 30 * MiB + 7)
    assert rclone(balancer.s3_url, credentials, "mkdir", "bkd:lb-rclone").returncode == 0
    copied = rclone(
        balancer.s3_url,
        credentials,
        "copyto",
        str(source),
        "bkd:lb-rclone/rclone.bin",
        "--s3-upload-cutoff",
        "5M",
        "--s3-chunk-size",
        "5M",
        "--s3-upload-concurrency",
        "6",
    )
    assert copied.returncode == 0, copied.stderr
    checked = rclone(
        balancer.s3_url,
        credentials,
        "check",
        str(tmp_path),
        "bkd:lb-rclone",
        "--include",
        "rclone.bin",
    )
    assert checked.returncode == 0, checked.stderr
    check_served_by_each(cluster.gateways, credentials, "lb-rclone", "rclone.bin", source, digest)


def test_a_gateway_killed_during_an_upload_costs_a_retry_not_the_upload(
    balanced: tuple[Cluster, Balancer], credentials: tuple[str, str], tmp_path: Path
) -> None:
    cluster, balancer = balanced
    source = tmp_path / "survivor.bin"
    digest = random_file(source, 48 * MiB)
    s3 = client(balancer.s3_url, credentials, attempts=6)
    s3.create_bucket(Bucket="lb-killed")
    victim = cluster.gateways[2]
    failures: list[BaseException] = []

    def upload() -> None:
        try:
            s3.upload_file(str(source), "lb-killed", "survivor.bin", Config=TEN_THREADS)
        except BaseException as exc:
            failures.append(exc)

    before = parts_taken([victim])[0]
    uploader = threading.Thread(target=upload)
    uploader.start()
    try:
        deadline = time.monotonic() + 60
        while parts_taken([victim])[0] == before:  # the victim is taking parts: kill it now
            assert time.monotonic() < deadline and uploader.is_alive()
            time.sleep(0.02)
        victim.kill()
        assert uploader.is_alive()  # killed mid-upload, with parts of it in flight
        uploader.join(120)
        assert not uploader.is_alive() and failures == []
        alive = cluster.gateways[:2]
        check_served_by_each(alive, credentials, "lb-killed", "survivor.bin", source, digest)
    finally:
        victim.start()
    check_served_by_each([victim], credentials, "lb-killed", "survivor.bin", source, digest)


def test_parts_on_different_gateways_count_together_against_the_bucket_limit(
    balanced: tuple[Cluster, Balancer], credentials: tuple[str, str]
) -> None:
    """Part 1 through one gateway, part 2 through another: the third part, through the
    third gateway, passes the bucket's limit with them and is refused; the upload still
    completes with the two, through any gateway."""
    cluster, _ = balanced
    s3 = [client(gateway.s3_url, credentials) for gateway in cluster.gateways]
    s3[0].create_bucket(Bucket="lb-limited")
    with cluster.gateways[1].client(cluster.key) as http:
        bucket_id = bucket_id_named(http, "lb-limited")
        limited = http.patch(f"/buckets/{bucket_id}", json={"maxUploadBytes": 12 * MiB})
        assert limited.status_code == 200, limited.text
    upload = s3[0].create_multipart_upload(Bucket="lb-limited", Key="big")["UploadId"]
    part = os.urandom(5 * MiB)
    sent = [
        s3[n].upload_part(
            Bucket="lb-limited", Key="big", UploadId=upload, PartNumber=n + 1, Body=part
        )
        for n in (0, 1)
    ]
    with pytest.raises(ClientError) as refused:
        s3[2].upload_part(Bucket="lb-limited", Key="big", UploadId=upload, PartNumber=3, Body=part)
    assert refused.value.response["Error"]["Code"] == "EntityTooLarge"
    listed = s3[2].list_parts(Bucket="lb-limited", Key="big", UploadId=upload)["Parts"]
    assert [p["PartNumber"] for p in listed] == [1, 2]
    s3[1].complete_multipart_upload(
        Bucket="lb-limited",
        Key="big",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": sent[n]["ETag"]} for n in (0, 1)]},
    )
    assert s3[2].get_object(Bucket="lb-limited", Key="big")["Body"].read() == part + part
