"""Linearizability of one server with `--workers 2` on SQLite (issue 39 point 3): concurrent
S3 clients put, get, delete and list a few keys through either worker, and the history they
record is checked per key against a register (tests/support/linearizability.py), with no
fault, with a worker SIGKILLed mid-run (the master starts another), and with the whole
server SIGKILLed and started again (fsync on, as in production)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.histories import AROUND, Clients, Recording
from tests.support.linearizability import check
from tests.support.live import SHARED_CONFIG, LiveServer
from tests.support.names import unique_name
from tests.support.profiles import scaled

pytestmark = pytest.mark.slow  # a server of its own, seconds of history per test

KEYS = ["a", "b", "c"]
CLIENTS = 4
SECONDS = 2.0
"""Of history per test under the ci profile (`scaled`: eight under thorough): four clients
on three keys make some 300 operations, each key written and read concurrently."""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data = tmp_path_factory.mktemp("linearizable") / "data"
    server = LiveServer(data, SHARED_CONFIG, workers=2, durable=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def credentials(live: LiveServer) -> tuple[str, str]:
    return live.s3_credentials()


def record(
    live: LiveServer, credentials: tuple[str, str], fault: Callable[[], None] | None = None
) -> Recording:
    """A run of the clients on a new bucket, `fault` during it, then one last read of each
    key and a listing; the history checked."""
    bucket = unique_name()
    live.s3(*credentials).create_bucket(Bucket=bucket)
    clients = Clients(live.s3_url, credentials, bucket, KEYS, CLIENTS)
    try:
        recording = clients.run(scaled(SECONDS), fault)
        clients.read_all()
    finally:
        clients.close()
    check(recording.ops, live.data_dir.parent / f"{bucket}.history")
    return recording


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (an exited process waiting to be reaped does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def workers_of(live: LiveServer) -> list[int]:
    """The worker pids (the delivery process, forked first, is the lowest)."""
    assert live.process is not None
    pid = live.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sorted(int(child) for child in children)[1:]


def test_two_workers_serve_each_key_as_one_register(
    live: LiveServer, credentials: tuple[str, str]
) -> None:
    recording = record(live, credentials)
    assert recording.count("ok") > 20 and recording.errors == [], recording.errors[:5]


def test_a_worker_killed_mid_run_loses_no_acknowledged_write(
    live: LiveServer, credentials: tuple[str, str]
) -> None:
    victims: list[int] = []

    def kill_a_worker() -> None:
        victims.append(workers_of(live)[-1])
        os.kill(victims[0], signal.SIGKILL)

    recording = record(live, credentials, kill_a_worker)
    assert min(recording.served_around_the_fault()) >= AROUND, recording.served_around_the_fault()
    assert f"(pid {victims[0]}) exited" in live.log_path.read_text()


def test_the_server_killed_and_restarted_mid_run_loses_no_acknowledged_write(
    live: LiveServer, credentials: tuple[str, str]
) -> None:
    def crash() -> None:
        assert live.process is not None
        pid = live.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        live.kill()
        # The workers die with the supervisor, a moment after it: they hold the listening
        # sockets until then, and a start before it finds the ports taken.
        deadline = time.monotonic() + 10
        while any(_alive(int(child)) for child in children):
            assert time.monotonic() < deadline, "the killed server's workers outlived it"
            time.sleep(0.01)
        live.start()

    recording = record(live, credentials, crash)
    assert min(recording.served_around_the_fault()) >= AROUND, recording.served_around_the_fault()
    assert recording.count("failed") + recording.count("unknown") > 0  # it was down a while
