"""Histories for the linearizability checker (tests/support/linearizability.py), recorded by
concurrent S3 clients (boto3, one thread each) against a live endpoint: puts of small values
each unique to its write, gets, deletes and listings on a few keys, so the clients contend;
a fault may strike while they run. Every call is timed on one monotonic clock, invocation
before the request is sent and completion after its answer is read."""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    IncompleteReadError,
)

from tests.support.linearizability import Op, unknown

MIX = (("put", 4), ("get", 4), ("delete", 1), ("list", 1))
"""How often each operation is drawn: writes and reads alike, deletes and listings less."""


@functools.cache
def _session() -> Any:
    """The process's session for these clients: a session of its own cost each client a
    third of a second of loading botocore's models, each run of a test loading them anew.
    Clients are made from it on the caller's thread, one at a time (a session is not safe to
    make clients from on several threads at once; the clients it makes are)."""
    return boto3.session.Session()


def s3_client(endpoint: str, credentials: tuple[str, str], read_timeout: float = 10) -> Any:
    """A boto3 client that tries once (a retry is the next operation of the history, with
    its own times) and gives up on an answer after `read_timeout`: the op is then unknown."""
    return _session().client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=credentials[0],
        aws_secret_access_key=credentials[1],
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": 1},
            connect_timeout=2,
            read_timeout=read_timeout,
        ),
    )


@dataclass
class Recording:
    """The ops of one run, and what was seen while they ran."""

    ops: list[Op] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Each answer that was not a success, for the test's report."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    fault: tuple[float, float] | None = None
    """When the fault ran (from, to), on the ops' clock."""

    def add(self, op: Op, error: str | None = None) -> None:
        with self.lock:
            self.ops.append(op)
            if error:
                self.errors.append(f"{op.kind} {op.key}: {error}")

    def count(self, outcome: str) -> int:
        return sum(1 for op in self.ops if op.outcome == outcome)

    def served_around_the_fault(self) -> tuple[int, int]:
        """How many ops were acknowledged before the fault began, and after it ended: a run
        that checked nothing on one side of it shows nothing about it."""
        assert self.fault is not None
        start, end = self.fault
        done = [op for op in self.ops if op.outcome == "ok"]
        return (
            sum(1 for op in done if op.completed < start),
            sum(1 for op in done if op.invoked > end),
        )


AROUND = 5
"""Ops acknowledged before a fault and after it, at the least, for a run to show it."""


class Clients:
    """`count` clients of `endpoint` on `bucket`, writing and reading `keys`."""

    def __init__(
        self,
        endpoint: str,
        credentials: tuple[str, str],
        bucket: str,
        keys: list[str],
        count: int,
        seed: int = 0,
    ) -> None:
        self.bucket = bucket
        self.keys = keys
        self.clients = [s3_client(endpoint, credentials) for _ in range(count)]
        self.random = random.Random(seed)
        self.recording = Recording()
        self.origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.origin

    def run(self, seconds: float, fault: Callable[[], None] | None = None) -> Recording:
        """Every client issues operations for `seconds`; `fault` runs on this thread once
        the clients are a third of the way in, and they go on through it and after it."""
        stop = threading.Event()
        seeds = [self.random.randrange(2**32) for _ in self.clients]
        threads = [
            threading.Thread(target=self._loop, args=(n, random.Random(seeds[n]), stop))
            for n in range(len(self.clients))
        ]
        for thread in threads:
            thread.start()
        try:
            if fault is not None:
                time.sleep(seconds / 3)
                began = self.now()
                fault()
                self.recording.fault = (began, self.now())
                remaining = seconds * 2 / 3
            else:
                remaining = seconds
            time.sleep(remaining)
            # A loaded machine, or clients waiting out a dead gateway's timeouts, serve fewer
            # ops in the time: the run goes on (20 s more at most) until enough were
            # acknowledged after the fault to show it.
            give_up = time.monotonic() + max(2 * remaining, 20.0)
            while fault is not None and time.monotonic() < give_up:
                if self.recording.served_around_the_fault()[1] >= AROUND:
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        return self.recording

    def read_all(self) -> None:
        """One last get of every key and one listing, once the run and its faults are over:
        a write lost by a crash shows here if no read caught it during the run."""
        for key in self.keys:
            self.operate(0, "get", key, "")
        self.operate(0, "list", "", "")

    def close(self) -> None:
        for client in self.clients:
            client.close()

    def _loop(self, client: int, draw: random.Random, stop: threading.Event) -> None:
        kinds = [kind for kind, weight in MIX for _ in range(weight)]
        sequence = 0
        while not stop.is_set():
            sequence += 1
            kind = draw.choice(kinds)
            self.operate(client, kind, draw.choice(self.keys), f"c{client}-{sequence}")

    def operate(self, client: int, kind: str, key: str, value: str) -> None:
        s3 = self.clients[client]
        invoked = self.now()
        try:
            if kind == "put":
                s3.put_object(Bucket=self.bucket, Key=key, Body=value.encode())
                op = Op(client, "put", key, invoked, self.now(), value=value)
            elif kind == "get":
                read = self._get(s3, key)
                op = Op(client, "get", key, invoked, self.now(), value=read)
            elif kind == "delete":
                s3.delete_object(Bucket=self.bucket, Key=key)
                op = Op(client, "delete", key, invoked, self.now())
            else:
                keys = frozenset(self._list(s3))
                op = Op(client, "list", "", invoked, self.now(), keys=keys)
            self.recording.add(op)
        except ClientError as error:
            status = error.response["ResponseMetadata"].get("HTTPStatusCode", 0)
            attempted = Op(client, kind, key, invoked, self.now(), "failed", value)  # type: ignore[arg-type]
            # A 4xx is a refusal before any effect; a 5xx (a gateway down behind the
            # balancer, the index away) may come after the write took effect.
            made = attempted if status < 500 else unknown(attempted)
            self.recording.add(made, f"{status} {error.response['Error'].get('Code')}")
        except (EndpointConnectionError, ConnectTimeoutError) as error:
            # Not connected: the request was never sent (the server down, restarting).
            refused = Op(client, kind, key, invoked, self.now(), "failed", value)  # type: ignore[arg-type]
            self.recording.add(refused, type(error).__name__)
        except BotoCoreError as error:
            attempted = Op(client, kind, key, invoked, self.now(), value=value)  # type: ignore[arg-type]
            self.recording.add(unknown(attempted), type(error).__name__)
        else:
            return
        time.sleep(0.05)  # a client that saw an error waits a little, as real ones do

    def _get(self, s3: Any, key: str) -> str | None:
        try:
            body = s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        except ClientError as error:
            if error.response["Error"].get("Code") == "NoSuchKey":
                return None
            raise
        with body:
            read: bytes = body.read()
        return read.decode()

    def _list(self, s3: Any) -> list[str]:
        listed = s3.list_objects_v2(Bucket=self.bucket)
        if "IsTruncated" not in listed:
            # The server was killed between its head and its body: botocore does not hold a
            # body that is not streamed to its Content-Length, and parses the nothing that
            # came as an answer with no element at all. Every ListObjectsV2 answer has this
            # one; without it, what the listing saw is unknown.
            headers = listed["ResponseMetadata"]["HTTPHeaders"]
            expected = int(headers.get("content-length", 0))
            raise IncompleteReadError(actual_bytes=0, expected_bytes=expected)
        assert not listed["IsTruncated"]
        return [item["Key"] for item in listed.get("Contents", [])]
