"""How the tests reach pytest-xdist's workers (`--dist loadfile`, one module at a time): the
`serial` tests, whose bounds are clock-tight, run last and alone, in the same run.

They used to be a second pytest run after the first, which paid a second start-up (three
more workers importing and collecting), a second PostgreSQL and SeaweedFS for
test_pg_index.py, and the deletion of an earlier run's temporary folder at its exit.

The controller cannot see markers (xdist's workers collect, and send it test ids only), so
each worker writes the ids of its `serial` tests to a folder the controller names in its
`workerinput` (`note_serial`), which the scheduler reads once every worker has collected.

A worker runs a test only once it holds the next one, or is told to stop (its fixtures'
teardown needs to know what comes next). So a worker down to the last test of its last
module is handed one serial test to hold, which lets it finish that module; it starts the
serial test only when handed another, and that happens once no module test is left
unfinished on any worker. From then on each worker runs one serial test at a time."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController

SERIAL_LIST = "bucketd_serial_ids"
"""The `workerinput` key of the folder where the workers write their serial tests' ids."""


SCALE_OUT_MODULES = ("tests/test_load_balancer.py", "tests/test_scale_out.py")
SAME_WORKER = {
    SCALE_OUT_MODULES[0]: SCALE_OUT_MODULES[1],
    "tests/test_container.py": "tests/test_console.py",
}
"""Modules that go to one worker, one after the other:
- the two that share a fixture too costly to make twice (the scale-out cluster: PostgreSQL
  database, five SeaweedFS processes, Redis, three gateways);
- the container's and the console's: podman adds and removes a bridge and veth interfaces
  on the host for each container it publishes ports of, and Chromium, seeing the network
  change, fails the requests it has in flight, loopback's included, with
  `net::ERR_NETWORK_CHANGED`. A console page loading then lost its scripts and never
  rendered (2026-11-27 09:25Z: three module scripts failed as test_container.py's compose
  test started, and the sign-in form waited 15 s for a page that would never come)."""


LONGEST_FIRST = (
    "test_container.py",
    "test_load_balancer.py",
    "test_console.py",
    "test_engine_model.py",
    "test_linearizable_cluster.py",
    "test_s3_backend.py",
    "test_packaging.py",
    "test_scale_out.py",
    "test_review_staged_copy.py",
    "test_signals_and_logs.py",
    "test_schema_fuzz.py",
    "test_s3_endpoint.py",
    "test_files.py",
    "test_suite.py",
    "test_review39_leases.py",
    "test_versions_model.py",
    "test_bootstrap.py",
    "test_snapshots_cluster.py",
    "test_events.py",
    "test_uploads.py",
    "test_cli.py",
    "test_power_loss.py",
    "test_crash.py",
    "test_s3_encryption_multipart.py",
    "test_access_edges.py",
    "test_concurrency.py",
    "test_workers.py",
    "test_write_leases.py",
    "test_s3_encryption.py",
    "test_readme_tour.py",
    "test_s3_tools.py",
    "test_http_model.py",
    "test_body_deadlines.py",
    "test_testing_fixture.py",
    "test_hardening.py",
    "test_snapshots.py",
    "test_access_property.py",
    "test_linearizable_workers.py",
    "test_s3_sse_c_multipart.py",
    "test_quotas.py",
    "test_attributes_roundtrip.py",
    "test_client.py",
    "test_s3_faults.py",
    "test_review37.py",
    "test_review_encryption.py",
    "test_snapshots_api.py",
    "test_listeners.py",
    "test_buckets.py",
    "test_recipes.py",
    "test_auth.py",
    "test_cli_files.py",
    "test_lifecycle.py",
    "test_review38_acl.py",
    "test_access_decision.py",
    "test_testing_doc.py",
    "test_s3_sse_c.py",
)
"""Modules by the time their tests took (longest first; 2026-11-27 07:00Z, each test's start
and end in a whole `make test`, the modules of 4.8 s and more, test_scale_out.py counted
with test_load_balancer.py, whose worker runs both), handed to the workers in that order: a
long one started last would keep one core busy while the other waits, and the serial tests
wait for the last. test_container.py goes
first for a machine's first run, when it makes its base image and wheels (two to three
minutes, mostly downloads; 12 to 25 s once they are cached)."""

LONGEST_SERIAL_FIRST = (
    "test_a_gateway_publishing_a_key_makes_the_other_wait_its_turn",
    "test_a_stream_ends_when_its_key_expires",
    "test_slow_body_past_the_deadline_is_408",
    "test_stalled_body_gets_408_at_the_deadline",
    "test_half_open_connections_are_capped_and_timed_out_while_healthz_answers",
    "test_revoking_a_key_ends_its_event_stream_though_no_event_comes",
    "test_a_failed_tls_handshake_does_not_hold_the_stop",
)
"""The serial tests by their time (2.9 s down to 0.2 s; 2026-11-27 13:00Z), for the same
reason: they share the run's last seconds four at a time, and test_pg_index.py's, handed
out last by its module's place, ran alone for its 2.9 s after the others (the serial tests
took 7.7 s, where longest first takes about 5)."""


def order(item: pytest.Item) -> tuple[bool, int, int]:
    """conftest.py's sort key: the modules longest first, then the serial tests, longest
    first."""
    serial = is_serial(item)
    name = getattr(item, "originalname", item.name)
    first = _SERIAL_RANK.get(name, len(_SERIAL_RANK)) if serial else 0
    return serial, first, _MODULE_RANK.get(item.path.name, len(_MODULE_RANK))


_MODULE_RANK = {name: n for n, name in enumerate(LONGEST_FIRST)}
_SERIAL_RANK = {name: n for n, name in enumerate(LONGEST_SERIAL_FIRST)}


_FOLDER = pytest.StashKey[Path]()


def serial_folder(config: pytest.Config) -> Path:
    """In the controller: the folder of the workers' lists, in the run's temporary folder,
    which pytest keeps or deletes with the run's (a killed run's included)."""
    if _FOLDER not in config.stash:
        factory = getattr(config, "_tmp_path_factory", None)  # as xdist finds that folder
        if factory is None:  # `-p no:tmpdir`
            folder = Path(tempfile.mkdtemp(prefix="bucketd-serial-"))
            config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        else:
            folder = factory.getbasetemp() / "serial-ids"
            folder.mkdir(exist_ok=True)
        config.stash[_FOLDER] = folder
    return config.stash[_FOLDER]


def is_serial(item: pytest.Item) -> bool:
    return item.get_closest_marker("serial") is not None


def note_serial(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker: write down the ids of the serial tests among `items`."""
    folder = getattr(config, "workerinput", {}).get(SERIAL_LIST)
    if folder is None:
        return
    ids = "".join(f"{item.nodeid}\n" for item in items if is_serial(item))
    worker = config.workerinput["workerid"]  # type: ignore[attr-defined]
    partial = Path(folder) / f"{worker}.partial"
    partial.write_text(ids)
    partial.rename(Path(folder) / worker)


def read_serial(folder: Path) -> frozenset[str]:
    ids: set[str] = set()
    for written in folder.iterdir():
        if not written.name.endswith(".partial"):
            ids.update(written.read_text().splitlines())
    return frozenset(ids)


class ModulesThenSerial(LoadFileScheduling):
    """`LoadFileScheduling` that sends the modules of `same_worker` to one worker and holds
    the serial tests (each a unit of its own, last in the collection) until every module
    test is done."""

    def __init__(
        self, config: pytest.Config, log: Any, same_worker: Mapping[str, str], folder: Path
    ) -> None:
        super().__init__(config, log)
        self.same_worker = same_worker
        self.folder = folder
        self.serial: frozenset[str] = frozenset()
        self._starting = False
        self._holding = False
        self._serial_rounds = 0

    def schedule(self) -> None:
        first = self.collection is None
        if first:  # every worker has collected, and written its list
            self.serial = read_serial(self.folder)
        # xdist's first distribution hands out units and, if that empties the queue, tells
        # every worker to stop, which would start a held serial test at once: it gets the
        # modules only, and the serial tests come by the rules below.
        self._starting = first
        try:
            super().schedule()
        finally:
            self._starting = False
        if first and self.collection:
            self._hand_out_serial()

    @property
    def tests_finished(self) -> bool:
        """xdist's: the queue empty and no worker with two tests left, upon which DSession
        tells every worker to stop; a worker holding a serial test would then start it
        beside another's last module test."""
        return super().tests_finished and not (
            self._module_tests_pending() and any(self._holds_serial(n) for n in self.nodes)
        )

    def remove_node(self, node: WorkerController) -> str | None:
        """A worker that died: xdist puts its unfinished units back at the end of the queue,
        behind the serial tests, which would then run beside them; they go to the front.
        A worker already holding a serial test may still be handed them, behind it, and run
        it beside the others (tests/test_scheduling.py): a run with a dead worker has failed
        already, and what is kept then is that every test runs and the run ends."""
        self._holding = True
        try:
            crashed = super().remove_node(node)
        finally:
            self._holding = False
        for scope in [scope for scope, unit in self.workqueue.items() if all(unit.values())]:
            del self.workqueue[scope]  # its finished modules too: nothing to run, no event after
        self._put_serial_last()
        for other in self.nodes:
            self._reschedule(other)
        return crashed

    def _split_scope(self, nodeid: str) -> str:
        if nodeid in self.serial:
            return nodeid
        scope = super()._split_scope(nodeid)
        return self.same_worker.get(scope, scope)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if self._starting:  # xdist's first distribution, from the queue it has just made
            self._put_serial_last()
            if self._serial_next():
                return
        super()._assign_work_unit(node)

    def _put_serial_last(self) -> None:
        """The serial tests are last in the collection as conftest sorts it, but plugins
        reorder it after (`--ff`, `--nf`: a serial test that failed comes first)."""
        for scope in [scope for scope in self.workqueue if scope in self.serial]:
            self.workqueue.move_to_end(scope)

    def _reschedule(self, node: WorkerController) -> None:
        """After `node` finished a test (or joined): a module for it, as LoadScopeScheduling
        does; then the serial tests any worker may take, since the end of the last module
        test frees them all."""
        if self._holding:
            return
        if (
            not node.shutting_down
            and self.workqueue
            and not self._serial_next()
            and self._may_take(node)
        ):
            self._assign_work_unit(node)
        self._hand_out_serial()

    def _hand_out_serial(self) -> None:
        """One serial test per worker in each round, so that none is left without, until
        each holds two (it runs one while it holds the next); then those with no more to
        take are told to stop, and run what they hold. Every other round goes to the workers
        in reverse (a snake draft): the tests come longest first (LONGEST_SERIAL_FIRST) and a
        worker is given its second before it runs its first, so in order the one given the
        longest would be given the longest of the second round as well."""
        while self.workqueue and self._serial_next():
            takers = [n for n in self.nodes if not n.shutting_down and self._may_take(n)]
            if not takers:
                break
            self._serial_rounds += 1
            if self._serial_rounds % 2 == 0:
                takers.reverse()
            for taker in takers:
                if self.workqueue and self._serial_next() and self._may_take(taker):
                    self._assign_work_unit(taker)
        if self.workqueue:
            return
        for node in self.nodes:
            if not node.shutting_down and not (
                self._holds_serial(node) and self._module_tests_pending()
            ):
                node.shutdown()

    def _may_take(self, node: WorkerController) -> bool:
        pending = self._pending_of(self.assigned_work[node])
        if not self._serial_next():
            return pending <= 2  # LoadScopeScheduling's low-water mark
        if self._starting:
            return False
        if not self._module_tests_pending():
            return pending <= 1
        # held, not run: it lets the worker run its module's last test
        return pending <= 1 and not self._holds_serial(node)

    def _serial_next(self) -> bool:
        return next(iter(self.workqueue)) in self.serial

    def _module_tests_pending(self) -> bool:
        return any(
            scope not in self.serial and not all(unit.values())
            for work in self.assigned_work.values()
            for scope, unit in work.items()
        )

    def _holds_serial(self, node: WorkerController) -> bool:
        return any(
            scope in self.serial and not all(unit.values())
            for scope, unit in self.assigned_work[node].items()
        )
