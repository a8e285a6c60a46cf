"""The suite's scheduler (tests/support/scheduling.py) against a simulation of xdist's
workers: a worker runs a test once it holds the next one or has been told to stop."""

from __future__ import annotations

import ast
import heapq
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.profiles import budget
from tests.support.scheduling import (
    LONGEST_SERIAL_FIRST,
    SAME_WORKER,
    ModulesThenSerial,
    read_serial,
)


@dataclass(eq=False)
class Worker:
    """What the scheduler sees of a worker (`WorkerController`), and what it holds."""

    held: list[int] = field(default_factory=list)
    shutting_down: bool = False
    running: int | None = None
    gateway: Any = field(default_factory=lambda: SimpleNamespace(id="gw"))

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down
        self.held.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_start(self) -> bool:
        return self.running is None and (
            len(self.held) >= 2 or (self.shutting_down and bool(self.held))
        )


def run(
    tmp_path: Path,
    modules: list[list[float]],
    serial: list[float],
    workers: int,
    crash_at: float | None = None,
    serial_first: bool = False,
    names: list[str] | None = None,
    same_worker: dict[str, str] | None = None,
) -> list[tuple[float, str, str]]:
    """Runs the collection (each module's tests, then the serial tests, as the suite orders
    them) to its end; returns (time, event, test id) for each start and end, and "crash"
    for the test the first worker was running when it died at `crash_at` (xdist reports it
    failed and runs it again). Module m is tests/test_m{m}.py unless `names` names it."""
    names = names or [f"test_m{m}" for m in range(len(modules))]
    ids = [
        f"tests/{names[m]}.py::t{t}" for m, tests in enumerate(modules) for t in range(len(tests))
    ]
    ids += [f"tests/test_clock.py::s{s}" for s in range(len(serial))]
    durations = [d for tests in modules for d in tests] + serial
    if serial_first:  # as pytest's --ff leaves it when a serial test failed last time
        ids = ids[-len(serial) :] + ids[: -len(serial)] if serial else ids
        durations = durations[-len(serial) :] + durations[: -len(serial)] if serial else durations
    folder = tmp_path / "serial"
    folder.mkdir(parents=True)
    (folder / "gw0").write_text("".join(f"{i}\n" for i in ids if "::s" in i))
    config: Any = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=False)
    )
    scheduler = ModulesThenSerial(config, None, same_worker or {}, folder)
    nodes = [Worker() for _ in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, ids)  # type: ignore[arg-type]
    scheduler.schedule()
    now, events, ending = 0.0, [], []  # ending: (time, worker, index)
    while True:
        if scheduler.tests_finished:  # xdist's DSession.loop_once: triggershutdown()
            for node in nodes:
                node.shutdown()
        for n, node in enumerate(nodes):
            if node.can_start():
                node.running = node.held.pop(0)
                events.append((now, "start", ids[node.running]))
                heapq.heappush(ending, (now + durations[node.running], n, node.running))
        if crash_at is not None and (not ending or ending[0][0] >= crash_at):
            others = [n for n in nodes[1:] if n in scheduler.nodes and not n.shutting_down]
            if not others or nodes[0] not in scheduler.nodes:  # xdist would start another
                crash_at = None  # nothing left to take its work
                continue
            now, dead, crash_at = max(now, crash_at), nodes.pop(0), None
            if dead.running is not None:
                events.append((now, "crash", ids[dead.running]))
            ending = [(t, n - 1, i) for t, n, i in ending if n != 0]
            heapq.heapify(ending)
            scheduler.remove_node(dead)  # type: ignore[arg-type]
            continue
        if not ending:
            break
        now, n, index = heapq.heappop(ending)
        events.append((now, "end", ids[index]))
        nodes[n].running = None
        scheduler.mark_test_complete(nodes[n], index)  # type: ignore[arg-type]
    left = [ids[i] for node in nodes for i in node.held]
    assert not left, f"held and never run (a worker waits forever): {left}"
    assert all(node.shutting_down for node in nodes)
    return events


def check(events: list[tuple[float, str, str]], ids: int, workers: int, alone: bool = True) -> None:
    """Every test ran once (a crashed one again), and with `alone`, no serial test beside a
    module test, nor more serial tests at once than workers."""
    crashed = {i for _, e, i in events if e == "crash"}
    started = [i for _, e, i in events if e == "start" and i not in crashed]
    assert len(started) == len(set(started)), "a test ran twice"
    assert len(set(started) | crashed) == ids, "a test never ran"
    serial = module = 0
    for t, e, i in sorted(events, key=lambda x: (x[0], x[1] == "start")):
        change = 1 if e == "start" else -1
        if "::s" in i:
            serial += change
        else:
            module += change
        if alone:
            assert not (serial and module), f"{i} at {t}: a serial test beside a module test"
            assert serial <= workers


def test_the_serial_tests_start_once_the_last_module_test_ends_one_per_worker(
    tmp_path: Path,
) -> None:
    modules = [[5.0] * 3, [1.0] * 10, [0.5], [2.0, 2.0]]
    events = run(tmp_path, modules, [3.0] * 5, workers=4)
    check(events, 16 + 5, 4)
    assert max(t for t, e, i in events if e == "end" and "::t" in i) == 15.0
    starts = sorted(t for t, e, i in events if e == "start" and "::s" in i)
    assert starts[:4] == [15.0] * 4, "the four workers start a serial test each at once"
    assert starts[4] == 18.0


def test_a_run_of_serial_tests_alone_and_of_modules_alone_ends(tmp_path: Path) -> None:
    check(run(tmp_path / "a", [], [1.0, 2.0, 3.0], workers=4), 3, 4)
    check(run(tmp_path / "b", [[1.0, 1.0], [1.0]], [], workers=4), 3, 4)


@settings(max_examples=budget(300), deadline=None)
@given(
    modules=st.lists(
        st.lists(st.sampled_from([0.1, 0.5, 1.0, 4.0]), min_size=1, max_size=6), max_size=8
    ),
    serial=st.lists(st.sampled_from([0.5, 2.0, 3.0]), max_size=9),
    workers=st.integers(1, 5),
    crash_at=st.none() | st.sampled_from([0.0, 0.3, 1.0, 5.0]),
    run_id=st.uuids(),
    serial_first=st.booleans(),
)
def test_any_collection_runs_whole_with_the_serial_tests_alone(
    tmp_path_factory: Any,
    modules: list[list[float]],
    serial: list[float],
    workers: int,
    crash_at: float | None,
    run_id: Any,
    serial_first: bool,
) -> None:
    if (not modules and not serial) or (crash_at is not None and workers == 1):
        return
    events = run(
        tmp_path_factory.mktemp(str(run_id)), modules, serial, workers, crash_at, serial_first
    )
    check(events, sum(map(len, modules)) + len(serial), workers, alone=crash_at is None)


def test_a_worker_that_dies_beside_one_holding_a_serial_test_still_ends_the_run(
    tmp_path: Path,
) -> None:
    """gw2 holds the serial test when gw0 dies: gw1 is stopping, so gw0's module goes to gw2,
    behind the serial test, which then runs beside gw1's module (found by the test above,
    which since asks only that such a run end whole). Leaving the module queued for xdist's
    replacement worker would keep them apart, and hang the run when there is none
    (`--max-worker-restart`)."""
    events = run(tmp_path, [[0.1, 0.1], [0.1, 0.1]], [0.5], workers=3, crash_at=0.0)
    check(events, 4 + 1, 3, alone=False)


def test_a_worker_that_dies_after_a_module_it_finished_leaves_no_worker_waiting(
    tmp_path: Path,
) -> None:
    """xdist puts a dead worker's finished modules back in the queue with the unfinished;
    gw1, holding only the serial test, was handed the finished one (nothing to run) and
    waited for ever with the unfinished one still queued."""
    events = run(tmp_path, [[4.0], [0.1], [1.0]], [0.5], workers=2, crash_at=5.0)
    check(events, 3 + 1, 2, alone=False)


def test_a_worker_that_dies_leaves_its_module_to_run_before_the_serial_tests(
    tmp_path: Path,
) -> None:
    events = run(tmp_path, [[1.0] * 4, [0.5]], [2.0] * 3, workers=2, crash_at=1.5)
    assert [i for _, e, i in events if e == "crash"] == ["tests/test_m0.py::t1"]
    check(events, 5 + 3, 2)


def test_a_held_serial_test_waits_for_a_module_test_when_xdist_thinks_the_run_is_over(
    tmp_path: Path,
) -> None:
    """gw1 ends its module at once and holds the serial test; once gw0 has run test 1 of
    its 2, each worker has one test left, which xdist's `tests_finished` took for the end:
    it told both to stop, and gw1 ran the serial test beside gw0's last module test."""
    events = run(tmp_path, [[1.0, 2.0], [0.1]], [1.0], workers=2)
    check(events, 3 + 1, 2)
    assert [t for t, e, i in events if e == "start" and "::s" in i] == [3.0]


def test_serial_tests_first_in_the_collection_still_run_last(tmp_path: Path) -> None:
    """`--ff` puts a serial test that failed before the modules; the scheduler handed it
    out to hold, and nothing else, and the run waited forever."""
    events = run(tmp_path, [[1.0, 2.0], [0.1]], [1.0, 1.0], workers=2, serial_first=True)
    check(events, 3 + 2, 2)
    assert min(t for t, e, i in events if e == "start" and "::s" in i) == 3.0


def test_the_workers_lists_are_read_whole(tmp_path: Path) -> None:
    (tmp_path / "gw0").write_text("a::x\nb::y\n")
    (tmp_path / "gw1").write_text("a::x\nb::y\n")
    (tmp_path / "gw2.partial").write_text("a::x\n")
    assert read_serial(tmp_path) == {"a::x", "b::y"}


def test_the_container_tests_never_run_beside_the_console_tests(tmp_path: Path) -> None:
    """podman's network changes fail a Chromium page's requests in flight (conftest's
    `SAME_WORKER`): on four workers, with modules enough for all, the two never overlap."""
    names = ["test_container", "test_console", "test_a", "test_b", "test_c", "test_d"]
    modules = [[4.0, 3.0], [1.0] * 6, [2.0] * 3, [0.5] * 8, [3.0], [1.0, 1.0]]
    events = run(tmp_path, modules, [1.0], workers=4, names=names, same_worker=SAME_WORKER)
    check(events, 22 + 1, 4)
    spans: dict[str, list[tuple[float, float]]] = {"container": [], "console": []}
    started: dict[str, float] = {}
    for t, e, i in events:
        if e == "start":
            started[i] = t
        elif "test_con" in i:
            spans[i.split("::")[0].removeprefix("tests/test_").removesuffix(".py")].append(
                (started[i], t)
            )
    assert max(end for _, end in spans["container"]) <= min(s for s, _ in spans["console"])


def _serial_in(source: str) -> set[str]:
    """The test functions of a module's `source` that the `serial` mark reaches: by their own
    decorator, their class's, the module's `pytestmark`, or a name bound to the mark
    (`serial = pytest.mark.serial`)."""
    tree = ast.parse(source)
    aliases = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and "mark.serial" in ast.unparse(node.value)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id != "pytestmark"
    }

    def serial(expression: ast.expr) -> bool:
        text = ast.unparse(expression)
        return "mark.serial" in text or any(
            isinstance(name, ast.Name) and name.id in aliases for name in ast.walk(expression)
        )

    def pytestmark_serial(body: list[ast.stmt]) -> bool:
        """A module's or class's `pytestmark = ...` that holds the mark."""
        return any(
            isinstance(node, ast.Assign | ast.AnnAssign)
            and any(
                isinstance(target, ast.Name) and target.id == "pytestmark"
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            and node.value is not None
            and serial(node.value)
            for node in body
        )

    names = set()

    def visit(body: list[ast.stmt], inherited: bool) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                marked = (
                    inherited
                    or any(map(serial, node.decorator_list))
                    or pytestmark_serial(node.body)
                )
                visit(node.body, marked)
            elif (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.name.startswith("test")
                and (inherited or any(map(serial, node.decorator_list)))
            ):
                names.add(node.name)

    visit(tree.body, pytestmark_serial(tree.body))
    return names


def _marked_serial() -> set[str]:
    """The tests that carry the `serial` mark, read from the modules' source."""
    names: set[str] = set()
    for path in (Path(__file__).parent).glob("test_*.py"):
        names |= _serial_in(path.read_text("utf-8"))
    return names


def test_the_serial_marks_are_found_however_they_are_given() -> None:
    """A serial test the reading missed would be handed out last, unranked, and the check
    below would still pass."""
    source = (
        "import pytest\n"
        "from pytest import mark\n"
        "serial = pytest.mark.serial\n"
        "@pytest.mark.serial\ndef test_decorated(): pass\n"
        "@serial\ndef test_by_an_alias(): pass\n"
        "@mark.serial\nasync def test_from_pytest_import_mark(): pass\n"
        "@pytest.mark.serial\nclass TestClass:\n    def test_by_its_class(self): pass\n"
        "class TestOther:\n    pytestmark = pytest.mark.serial\n"
        "    def test_by_its_class_pytestmark(self): pass\n"
        "def test_not_serial(): pass\n"
    )
    assert _serial_in(source) == {
        "test_decorated",
        "test_by_an_alias",
        "test_from_pytest_import_mark",
        "test_by_its_class",
        "test_by_its_class_pytestmark",
    }
    module = "import pytest\npytestmark = [pytest.mark.slow, pytest.mark.serial]\n"
    tests = "def test_a(): pass\nclass TestB:\n    def test_b(self): pass\n"
    assert _serial_in(module + tests) == {"test_a", "test_b"}


def test_each_serial_test_has_its_place_in_the_longest_first_order() -> None:
    """A serial test missing from LONGEST_SERIAL_FIRST is handed out last, whatever its
    length; a name there that no serial test has is a test renamed or no longer serial."""
    assert set(LONGEST_SERIAL_FIRST) == _marked_serial()


def test_the_longest_serial_test_is_the_only_one_its_worker_runs(tmp_path: Path) -> None:
    """Each worker is given its second serial test before it runs its first: handed out in
    order, the worker given the longest (LONGEST_SERIAL_FIRST) was given the fifth as well
    and ran it after, while the others idled (4.5 s here, where 3.9 s can be had)."""
    serial = [2.9, 1.5, 1.2, 0.8, 0.6, 0.4, 0.3]  # as LONGEST_SERIAL_FIRST's, 2.9 s down
    events = run(tmp_path, [[1.0]], serial, workers=4)
    check(events, 1 + len(serial), 4)
    assert max(t for t, _, _ in events) == pytest.approx(1.0 + 2.9)
