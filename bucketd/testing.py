"""A real bucketd for an application's tests: `pytest` finds these fixtures by itself once
bucketd is installed (a `pytest11` plugin), like moto's mocks but a real server on loopback.

    def test_upload(bucketd_s3):
        bucketd_s3.create_bucket(Bucket="photos")
        bucketd_s3.put_object(Bucket="photos", Key="cat.jpg", Body=b"...")

- `bucketd_server` (session): one `bucketd serve` on free ports with a temporary data dir
  and its own S3 credential; buckets named in `BUCKETD_TEST_BUCKETS` (comma-separated)
  exist from the start. Its `.endpoint`, `.access_key_id`, `.secret_access_key`,
  `.region` and `.api` (the /v1 URL) configure any client. Once they exist, it takes a
  server snapshot: the clean state every test starts from.
- `bucketd_reset`: before the test, the server back to that clean state (the snapshot
  restored, its clock put back, its faults and journal cleared); the server itself stays.
  Every per-test fixture below uses it; a test that takes only `bucketd_server` asks for
  it by name (or `pytest.mark.usefixtures("bucketd_reset")`).
- `bucketd_s3`: a boto3 S3 client of it (boto3 is the application's own dependency).
- `bucketd_clock`: the server's clock (test mode, docs/testing.md), put back after the
  test: `bucketd_clock.advance(days=31)` and what expires in 30 days has expired.
- `bucketd_faults`: the server's fault rules (test mode), cleared after the test:
  `bucketd_faults.add("PutObject", "SlowDown", times=2)` and the next two uploads get 503.
- `bucketd_server.journal(...)` and `.clear_journal()`: test mode's journal of the
  requests the server answered (docs/testing.md, "A journal of requests").
- `running_bucketd(...)`: the same as a context manager, outside pytest.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bucketd.clean_state import CleanState, record, undo

REGION = "us-east-1"


@dataclass(frozen=True)
class BucketdServer:
    api: str
    endpoint: str
    access_key_id: str
    secret_access_key: str
    data_dir: Path
    region: str = REGION
    clean_snapshot: str | None = None
    """The server snapshot `reset` restores (the plugin takes it once the server is up)."""
    clean_extras: CleanState | None = None
    """The keys and webhooks of the clean state: `reset` removes the others."""

    @property
    def root(self) -> str:
        """The API listener's base URL (`api` without `/v1`)."""
        return self.api.removesuffix("/v1")

    @property
    def admin_key(self) -> str:
        """The operator's key the first start saved (every scope, `orgs:manage` too)."""
        return (self.data_dir / "admin.key").read_text().strip()

    @functools.cached_property
    def http(self) -> Any:
        """An httpx client of the API listener with the operator's key, kept for the
        helpers' requests: making one costs some 50 ms (its TLS context), ten times the
        request, and a reset before every test makes five and more."""
        import httpx

        return httpx.Client(
            base_url=self.root, headers={"Authorization": "Bearer " + self.admin_key}
        )

    def close(self) -> None:
        """Close the kept client (the next helper call makes another)."""
        http = self.__dict__.pop("http", None)
        if http is not None:
            http.close()

    @property
    def clock(self) -> ServerClock:
        """The server's clock, through test mode's control surface."""
        return ServerClock(self.root, self.admin_key, self.http)

    @property
    def faults(self) -> ServerFaults:
        """The server's fault rules, through test mode's control surface."""
        return ServerFaults(self.root, self.admin_key, self.http)

    def _admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The operator's request to the API listener; the answer's `data`."""
        response = self.http.request(method, path, json=body)
        response.raise_for_status()
        return response.json()["data"] if response.content else None

    def snapshot(self, name: str | None = None) -> str:
        """A server snapshot of every bucket as it is now; its id."""
        made: dict[str, Any] = self._admin("POST", "/v1/server/snapshots", {"name": name})
        return str(made["id"])

    def restore(self, snapshot_id: str) -> None:
        """Every bucket back as the server snapshot holds it: buckets made since go,
        deleted ones come back, and versions under retention or legal hold are dropped
        too (the server is in test mode)."""
        self._admin("POST", f"/v1/server/snapshots/{snapshot_id}/restore", {"dropLocked": True})

    def with_clean_state(self) -> BucketdServer:
        """This server, with the snapshot of its state now as the one `reset` restores."""
        clean = dataclasses.replace(
            self, clean_snapshot=self.snapshot("clean state"), clean_extras=record(self.http)
        )
        self.close()
        return clean

    def reset(self) -> None:
        """Back to the clean state: the snapshot restored, the keys and webhooks made since
        removed, the clock on the system's time, no fault rule, an empty journal (cleared
        last: the restore is a request too)."""
        if self.clean_snapshot is None:
            raise RuntimeError("no clean state: call with_clean_state() first")
        self.clock.reset()
        self.faults.clear()
        self.restore(self.clean_snapshot)
        if self.clean_extras is not None:
            undo(self.http, self.clean_extras)
        self.clear_journal()

    def run_lifecycle(self) -> dict[str, int]:
        """Apply every bucket's lifecycle rules now, as of the server's clock; what the pass
        did (`expired`, `noncurrent`, `markers`, `aborted`, `locked`, `failed`)."""
        report: dict[str, int] = self._admin("POST", "/_bucketd/test/lifecycle")
        return report

    def journal(
        self,
        *,
        protocol: str | None = None,
        operation: str | None = None,
        bucket: str | None = None,
        prefix: str | None = None,
        since: float | None = None,
    ) -> list[JournalEntry]:
        """The requests the server answered (test mode's journal), oldest first; each filter
        given must match (`prefix`: of the key; `since`: the server's clock, in seconds)."""
        given = {
            "protocol": protocol,
            "operation": operation,
            "bucket": bucket,
            "prefix": prefix,
            "since": since,
        }
        response = self.http.get(
            "/_bucketd/test/journal",
            params={name: value for name, value in given.items() if value is not None},
        )
        response.raise_for_status()
        return [JournalEntry.of(entry) for entry in response.json()["data"]["entries"]]

    def clear_journal(self) -> None:
        """Forget every request recorded so far."""
        self._admin("DELETE", "/_bucketd/test/journal")

    def s3(self, **config: Any) -> Any:
        """A boto3 S3 client of this server (path-style addressing)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, **config),
        )


@dataclass(frozen=True)
class JournalEntry:
    """One request the server answered: `protocol` ("s3" or "v1"), `operation` (S3's name,
    e.g. "PutObject", or the /v1 route), `bucket` (its name on S3, its id on /v1), `key`,
    `status`, the selected request `headers` (lower-cased names), bytes both ways, and the
    key that authenticated (`access_key_id` on S3)."""

    time: float
    protocol: str
    method: str
    operation: str
    bucket: str | None
    key: str | None
    status: int
    headers: dict[str, str]
    bytes_in: int
    bytes_out: int
    key_id: str | None
    access_key_id: str | None

    @classmethod
    def of(cls, shown: dict[str, Any]) -> JournalEntry:
        return cls(
            time=shown["time"],
            protocol=shown["protocol"],
            method=shown["method"],
            operation=shown["operation"],
            bucket=shown["bucket"],
            key=shown["key"],
            status=shown["status"],
            headers=shown["headers"],
            bytes_in=shown["bytesIn"],
            bytes_out=shown["bytesOut"],
            key_id=shown["keyId"],
            access_key_id=shown["accessKeyId"],
        )


@dataclass(frozen=True)
class ServerClock:
    """Test mode's clock of a server (`/_bucketd/test/clock`): each call returns the
    clock as the server then reads it: `now` (ISO 8601), `nowUnix`, `offsetSeconds`."""

    root: str
    key: str
    http: Any = None
    """An httpx client to send with (`BucketdServer.http`); None: a new one per call."""

    def _call(self, method: str, body: dict[str, float] | None = None) -> dict[str, Any]:
        response = _sender(self.http).request(
            method,
            self.root + "/_bucketd/test/clock",
            json=body,
            headers={"Authorization": "Bearer " + self.key},
        )
        response.raise_for_status()
        shown: dict[str, Any] = response.json()["data"]
        return shown

    def read(self) -> dict[str, Any]:
        return self._call("GET")

    def advance(
        self, seconds: float = 0, *, minutes: float = 0, hours: float = 0, days: float = 0
    ) -> dict[str, Any]:
        """Move the server's clock forward."""
        moved = seconds + 60 * minutes + 3600 * hours + 86400 * days
        return self._call("POST", {"advanceSeconds": moved})

    def set_offset(self, seconds: float) -> dict[str, Any]:
        """Put the server's clock `seconds` from the system's time (negative: behind)."""
        return self._call("POST", {"offsetSeconds": seconds})

    def reset(self) -> dict[str, Any]:
        """Back to the system's time."""
        return self._call("DELETE")


@dataclass(frozen=True)
class ServerFaults:
    """Test mode's fault rules of a server (`/_bucketd/test/faults`, docs/testing.md)."""

    root: str
    key: str
    http: Any = None
    """An httpx client to send with (`BucketdServer.http`); None: a new one per call."""

    def _call(self, method: str, body: dict[str, Any] | None = None) -> Any:
        response = _sender(self.http).request(
            method,
            self.root + "/_bucketd/test/faults",
            json=body,
            headers={"Authorization": "Bearer " + self.key},
        )
        response.raise_for_status()
        return response.json()["data"]

    def add(
        self,
        operation: str,
        fault: str,
        *,
        bucket: str = "*",
        key: str = "*",
        times: int | None = None,
        probability: float | None = None,
        seed: int = 0,
        delay_seconds: float | None = None,
        truncate_after: int | None = None,
        stale_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Add a rule (the next `times` matching requests, or each with `probability`,
        drawn from `seed`); the rule as the server keeps it, with its `id`."""
        rule: dict[str, Any] = {"operation": operation, "fault": fault, "bucket": bucket}
        rule |= {"key": key, "seed": seed}
        optional = {
            "times": times,
            "probability": probability,
            "delaySeconds": delay_seconds,
            "truncateAfter": truncate_after,
            "staleSeconds": stale_seconds,
        }
        added: dict[str, Any] = self._call(
            "POST", rule | {k: v for k, v in optional.items() if v is not None}
        )
        return added

    def list(self) -> list[dict[str, Any]]:
        """The rules, each with `matched` and `fired`: the requests it matched and failed."""
        rules: list[dict[str, Any]] = self._call("GET")["rules"]
        return rules

    def clear(self) -> None:
        self._call("DELETE")


def _sender(http: Any) -> Any:
    """`http`, or the httpx module (its `request` makes a client for the one call)."""
    if http is not None:
        return http
    import httpx

    return httpx


@contextmanager
def running_bucketd(
    buckets: list[str] | tuple[str, ...] = (),
    data_dir: Path | None = None,
    timeout: float = 30.0,
) -> Iterator[BucketdServer]:
    """`bucketd serve` until the block ends: free ports, a temporary data dir unless one is
    given, S3 credentials of its own, `buckets` made before it is ready."""
    with tempfile.TemporaryDirectory(prefix="bucketd-test-") as scratch:
        base = Path(scratch)
        data = data_dir or base / "data"
        ready = base / "ready.json"
        access, secret = "test" + secrets.token_hex(4), secrets.token_urlsafe(24)
        environ = {
            **os.environ,
            "BUCKETD_ACCESS_KEY_ID": access,
            "BUCKETD_SECRET_ACCESS_KEY": secret,
            "BUCKETD_BUCKETS": ",".join(buckets),
            "BUCKETD_ACCESS_LOG": "false",
        }
        environ.pop("BUCKETD_TEST_MODE", None)  # `bucketd dev` turns test mode on
        log = open(base / "bucketd.log", "ab")  # noqa: SIM115 (closed below)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway",
                "dev",
                "--data-dir",
                str(data),
                # Port 0: the listeners bind free ports themselves and the ready file says
                # which. Ports probed here and handed over could be the same one twice, or
                # taken by another process before the server binds them.
                "--port",
                "0",
                "--s3-port",
                "0",
                "--ready-file",
                str(ready),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        try:
            deadline = time.monotonic() + timeout
            while not ready.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        "bucketd did not start: " + (base / "bucketd.log").read_text()
                    )
                time.sleep(0.02)
            urls = json.loads(ready.read_text())
            yield BucketdServer(urls["api"] + "/v1", urls["s3"], access, secret, data)
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()


@pytest.fixture(scope="session")
def bucketd_server() -> Iterator[BucketdServer]:
    buckets = [b.strip() for b in os.environ.get("BUCKETD_TEST_BUCKETS", "").split(",")]
    with running_bucketd([b for b in buckets if b]) as server:
        clean = server.with_clean_state()
        yield clean
        clean.close()


@pytest.fixture
def bucketd_reset(bucketd_server: BucketdServer) -> BucketdServer:
    """The session's server, put back to its clean state before the test."""
    bucketd_server.reset()
    return bucketd_server


@pytest.fixture
def bucketd_clock(bucketd_reset: BucketdServer) -> Iterator[ServerClock]:
    """The session server's clock, back to the system's time after the test."""
    clock = bucketd_reset.clock
    yield clock
    clock.reset()


@pytest.fixture
def bucketd_faults(bucketd_reset: BucketdServer) -> Iterator[ServerFaults]:
    """The session server's fault rules, cleared after the test."""
    faults = bucketd_reset.faults
    yield faults
    faults.clear()


@pytest.fixture
def bucketd_s3(bucketd_reset: BucketdServer) -> Iterator[Any]:
    client = bucketd_reset.s3()
    yield client
    client.close()
