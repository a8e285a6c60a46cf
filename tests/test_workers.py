"""`bucketd serve --workers 2`: one server to its clients, whichever worker answers.

Each request here goes on a connection of its own, so the kernel hands them to both
workers; the checks are those a client could make of a single process.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import web
from tests.support.live import SHARED_CONFIG, LiveServer, new_bucket
from tests.support.metrics import metrics, metrics_key
from tests.support.names import unique_name
from tests.support.orgs import make_key, make_org
from tests.support.postgres import Postgres
from tests.support.receiver import Receiver

pytestmark = pytest.mark.slow  # servers of their own
TEXT = {"Content-Type": "text/plain"}
CONFIG = "key_cache_seconds = 600.0\n" + SHARED_CONFIG.replace(
    "[plans.free]\nrequests_per_minute = 10000000", ""
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: Any) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("workers") / "data", CONFIG, workers=2).start()
    yield server
    server.stop()


def fresh(live: LiveServer, key: str | None = None) -> httpx.Client:
    """A client that opens a connection per request (so any worker may answer)."""
    return web.client(
        base_url=live.url + "/v1",
        headers={"Authorization": f"Bearer {key or live.admin_key}"},
        limits=httpx.Limits(max_keepalive_connections=0),
        timeout=30,
    )


def children(live: LiveServer) -> list[int]:
    assert live.process is not None
    pid = live.process.pid
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def workers_of(live: LiveServer) -> list[int]:
    """The worker pids (the delivery process, forked first, is the lowest)."""
    return sorted(children(live))[1:]


def wait_for_workers(live: LiveServer, count: int, old: set[int]) -> list[int]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = workers_of(live)
        if len(found) == count and not set(found) & old:
            return found
        time.sleep(0.05)
    raise AssertionError(f"workers: {workers_of(live)}")


def test_every_worker_answers(live: LiveServer) -> None:
    workers = workers_of(live)
    assert len(workers) == 2 and len(children(live)) == 3  # and the delivery process
    before = {pid: cpu_ticks(pid) for pid in workers}
    with fresh(live) as http:
        bucket = new_bucket(http, unique_name("wrk"))
        for n in range(300):
            put = http.put(f"/buckets/{bucket['id']}/files/k{n}", content=b"x", headers=TEXT)
            assert put.status_code == 201
    spent = {pid: cpu_ticks(pid) - before[pid] for pid in workers}
    assert all(ticks >= sum(spent.values()) / 10 for ticks in spent.values()), spent


def test_rate_limits_are_counted_once_for_all_workers(live: LiveServer) -> None:
    """120 requests of a key on a plan of 100 a minute: 100 answered, 20 refused, whichever
    worker took each. The limit's window is the clock minute: a run that crossed into the
    next one (its answers name two resets) is done again with a new key."""
    for _ in range(3):
        key = make_key(live, make_org(live, "free"), ["buckets:read"])
        with fresh(live, key) as http:
            answers = [http.get("/buckets") for _ in range(120)]
        if answers[0].headers["X-RateLimit-Reset"] == answers[-1].headers["X-RateLimit-Reset"]:
            break
    statuses = [r.status_code for r in answers]
    assert statuses == [200] * 100 + [429] * 20, statuses
    remaining = [int(r.headers["X-RateLimit-Remaining"]) for r in answers[:100]]
    assert remaining == list(range(99, -1, -1))


def test_a_revoked_key_stops_working_in_every_worker_at_once(live: LiveServer) -> None:
    org = make_org(live)
    admin = make_key(live, org, ["keys:manage", "buckets:read"])
    with fresh(live, admin) as http:
        made = http.post("/keys", json={"name": "doomed", "scopes": ["buckets:read"]})
        assert made.status_code == 201, made.text
        doomed = made.json()["data"]
        with fresh(live, doomed["secret"]) as victim:
            assert all(victim.get("/buckets").status_code == 200 for _ in range(20))  # cached
            assert http.delete(f"/keys/{doomed['id']}").status_code in (200, 204)
            assert [victim.get("/buckets").status_code for _ in range(20)] == [401] * 20


def test_metrics_add_up_every_worker(live: LiveServer) -> None:
    key = metrics_key(live)

    def served() -> float:
        found = metrics(live, key)
        return sum(
            value
            for (name, labels), value in found.items()
            if name == "bucketd_requests_total" and ("route", "/healthz") in labels
        )

    before = served()
    for _ in range(50):
        assert web.get(live.url + "/healthz").status_code == 200
    assert served() == before + 50


def test_each_label_set_counts_apart_across_workers(live: LiveServer) -> None:
    """`Metrics.record` keeps each label set's children, with the multiprocess values of
    `--workers 2` as well: one route answered 200 and 401 by either worker counts each
    status under its own labels, by the exact number of requests."""
    key = metrics_key(live)

    def counted() -> dict[str, float]:
        found: dict[str, float] = {}
        for (name, labels), value in metrics(live, key).items():
            tags = dict(labels)
            if name == "bucketd_requests_total" and tags["route"] == "/v1/organization":
                found[tags["status"]] = found.get(tags["status"], 0) + value
        return found

    before = counted()
    admin = {"Authorization": f"Bearer {live.admin_key}"}
    for n in range(30):
        answer = web.get(live.url + "/v1/organization", headers=admin if n % 3 else {})
        assert answer.status_code == (200 if n % 3 else 401)
    after = counted()
    assert after.get("200", 0) - before.get("200", 0) == 20
    assert after.get("401", 0) - before.get("401", 0) == 10


def test_events_reach_the_stream_and_webhooks_from_any_worker(
    live: LiveServer, receiver: Receiver
) -> None:
    """The stream's worker hears of commits in the other within a moment (it would
    otherwise look again only after its 15 s keep-alive); the webhook gets each once."""
    keys = [f"e{n}" for n in range(40)]
    with fresh(live) as http:
        bucket = new_bucket(http, unique_name("wev"))
        hook = http.post(f"/buckets/{bucket['id']}/webhooks", json={"url": receiver.url})
        assert hook.status_code == 201, hook.text
        headers = {"Authorization": f"Bearer {live.admin_key}"}
        params = {"bucketId": bucket["id"]}
        url = live.url + "/v1/events"
        with web.stream("GET", url, headers=headers, params=params, timeout=5) as stream:
            for key in keys:
                http.put(f"/buckets/{bucket['id']}/files/{key}", content=b"x", headers=TEXT)
            seen = []
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:])["Records"][0]["s3"]["object"]["key"])
                if len(seen) == len(keys):
                    break
    assert seen == keys
    records = receiver.wait_for(40)
    time.sleep(0.3)
    assert sorted(r["s3"]["object"]["key"] for r in receiver.records()) == sorted(keys)
    assert len(records) == 40


def test_one_content_written_and_deleted_by_both_workers_at_once_stays_readable(
    live: LiveServer,
) -> None:
    """Dedupe across processes: a delete in one worker dropping the last reference to a
    content must not remove the file another worker is committing a new reference to.
    Each round's content is new, so a later write cannot put a lost file back."""
    with fresh(live) as http:
        bucket = new_bucket(http, unique_name("wdd"))
    files = f"/buckets/{bucket['id']}/files"
    rounds = 150
    bodies = [os.urandom(1024) for _ in range(rounds)]
    barrier = threading.Barrier(2)

    def churn() -> None:
        with fresh(live) as http:
            for n, body in enumerate(bodies):
                http.put(f"{files}/churn{n}", content=body, headers=TEXT)
                barrier.wait()
                http.delete(f"{files}/churn{n}")

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        with fresh(live) as http:
            for n, body in enumerate(bodies):
                barrier.wait()
                time.sleep(n % 10 / 5000)
                put = http.put(f"{files}/keep{n}", content=body, headers=TEXT)
                assert put.status_code == 201, put.text
    finally:
        barrier.abort()
        thread.join()
    with fresh(live) as http:
        answers = {n: http.get(f"{files}/keep{n}") for n in range(rounds)}
    lost = [(n, a.status_code, a.text[:200]) for n, a in answers.items() if a.content != bodies[n]]
    assert lost == []  # (round, status, body): a 404 or 500 here is a reaped blob


def test_sighup_replaces_the_workers_without_refusing_a_request(live: LiveServer) -> None:
    assert live.process is not None
    old = set(workers_of(live))
    failures: list[str] = []
    answered = 0
    stop = threading.Event()

    def load() -> None:
        nonlocal answered
        while not stop.is_set():
            try:
                status = web.get(live.url + "/healthz", timeout=10).status_code
            except httpx.HTTPError as exc:
                failures.append(repr(exc))
                continue
            if status != 200:
                failures.append(str(status))
            answered += 1

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.3)
        live.process.send_signal(signal.SIGHUP)
        new = wait_for_workers(live, 2, old)
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == [] and answered > 40, (failures[:5], answered)
    assert not set(new) & old
    assert "replacing 2 workers one at a time" in live.log_path.read_text()


def test_a_worker_that_dies_is_replaced(live: LiveServer) -> None:
    victim = workers_of(live)[-1]
    os.kill(victim, signal.SIGKILL)
    replaced = wait_for_workers(live, 2, {victim})
    assert victim not in replaced
    with fresh(live) as http:
        assert all(http.get("/buckets").status_code == 200 for _ in range(20))
    assert f"(pid {victim}) exited" in live.log_path.read_text()


def test_workers_on_a_shared_index_leave_the_other_gateways_claims(
    postgres: Postgres, tmp_path: Path
) -> None:
    """On a shared (PostgreSQL) index the supervisor is one gateway among several: its
    start-up takes back nothing another gateway holds (here the lifecycle lease), as a
    single process on that index does; only a server alone on its index voids a previous
    run's claims."""
    url = postgres.migrated_database()
    until = time.time() + 600
    postgres.query(
        url, f"INSERT INTO leases (name, owner, until) VALUES ('lifecycle', 'another', {until})"
    )
    server = LiveServer(
        tmp_path / "data", SHARED_CONFIG, env={"BUCKETD_INDEX__URL": url}, workers=2
    ).start()
    try:
        assert web.get(server.url + "/healthz").status_code == 200
    finally:
        server.stop()
    assert postgres.query(url, "SELECT owner FROM leases WHERE name = 'lifecycle'") == "another"
