"""Where the suite's CPU goes, by test module: a developer's tool, off unless
`BUCKETD_TEST_CPU` names a folder.

`os.times()` around a test sees the pytest worker's own CPU and that of the children it
reaped (exec'd servers, CLI commands, the aws forks), but most of the suite's CPU is spent
by the servers forked from the worker's forkserver (`tests/support/launch.py`): the
forkserver, not the worker, reaps them, so their CPU reaches no test's account. With the
variable set, the worker writes which test launched each fork (`launch`) and each test's
own and reaped-children CPU (`test`), and the forkserver, whose `os.waitpid` becomes an
`os.wait4` (`tests/support/reaper.py`), writes each child's CPU at its reaping (`reap`,
the child's own and that of the children it reaped: a server's workers and its delivery
process). A fork that outlives a test (a module's or the session's shared server) is
charged as it goes: after each test the worker reads the CPU of its live forks from /proc
(with their reaped children's and their live descendants': the delivery process, workers)
and charges what each spent since the last test to that test's module (`serve`); what is
left at the reaping goes to the module that launched it. `python -m tests.support.cpustats
FOLDER` then prints the table by module.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path

ENV = "BUCKETD_TEST_CPU"
TICK = os.sysconf("SC_CLK_TCK")
_live: dict[int, float] = {}
"""The worker's forks not yet seen gone, and the CPU of each charged so far."""


def folder() -> Path | None:
    named = os.environ.get(ENV)
    return Path(named) if named else None


def _record(kind: str, *fields: object) -> None:
    where = folder()
    if where is None:
        return
    where.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(where / f"{worker}.tsv", "a") as out:
        out.write("\t".join([kind, *map(str, fields)]) + "\n")


def _module(nodeid: str) -> str:
    return nodeid.split("::")[0].split(" ")[0]


def launched(pid: int) -> None:
    """In the worker: the fork `pid` was started by the test running now."""
    if folder() is not None:
        _live[pid] = 0.0
        _record("launch", pid, _module(os.environ.get("PYTEST_CURRENT_TEST", "?")))


def _cpu(pid: int) -> float | None:
    """A live process's CPU, its reaped children's and its live descendants' (None: gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    total = sum(int(field) for field in fields[11:15]) / TICK  # utime stime cutime cstime
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            below = children.read_text().split()
        except OSError:
            continue
        total += sum(_cpu(int(child)) or 0.0 for child in below)
    return total


def reaped(pid: int, user: float, system: float) -> None:
    """In the forkserver: its child `pid` ended having spent this CPU."""
    _record("reap", pid, f"{user:.3f}", f"{system:.3f}")


def tested(nodeid: str, before: os.times_result, after: os.times_result) -> None:
    """In the worker: one test's run, set-up and teardown included."""
    own = after.user + after.system - before.user - before.system
    children = (
        after.children_user + after.children_system - before.children_user - before.children_system
    )
    _record("test", _module(nodeid), f"{own:.3f}", f"{children:.3f}")
    for pid, charged in list(_live.items()):
        now = _cpu(pid)
        if now is None:
            del _live[pid]
        elif now > charged:
            _live[pid] = now
            _record("serve", pid, _module(nodeid), f"{now - charged:.3f}")


def table(where: Path) -> list[tuple[str, float, float, float, int]]:
    """(module, worker CPU, reaped children's CPU, forks' CPU, forks launched) by module,
    the most costly first."""
    own: dict[str, float] = defaultdict(float)
    children: dict[str, float] = defaultdict(float)
    forked: dict[str, float] = defaultdict(float)
    forks: dict[str, int] = defaultdict(int)
    for log in sorted(where.glob("*.tsv")):
        launches: dict[str, str] = {}
        charged: dict[str, float] = defaultdict(float)
        reaps: list[tuple[str, float]] = []
        for line in log.read_text().splitlines():
            kind, *fields = line.split("\t")
            if kind == "launch":
                launches[fields[0]] = fields[1]
                forks[fields[1]] += 1
            elif kind == "serve":
                charged[fields[0]] += float(fields[2])
                forked[fields[1]] += float(fields[2])
            elif kind == "reap":
                reaps.append((fields[0], float(fields[1]) + float(fields[2])))
            elif kind == "test":
                own[fields[0]] += float(fields[1])
                children[fields[0]] += float(fields[2])
        for pid, cpu in reaps:
            module = launches.get(pid, "(not launched by a test)")
            forked[module] += max(0.0, cpu - charged[pid])
    modules = set(own) | set(forked)
    rows = [(m, own[m], children[m], forked[m], forks[m]) for m in modules]
    return sorted(rows, key=lambda row: -(row[1] + row[2] + row[3]))


def main(argv: list[str]) -> None:
    rows = table(Path(argv[0]))
    print(f"{'module':48} {'worker':>8} {'reaped':>8} {'forked':>8} {'forks':>6} {'total':>8}")
    for module, mine, theirs, forks_cpu, count in rows:
        total = mine + theirs + forks_cpu
        print(f"{module:48} {mine:8.1f} {theirs:8.1f} {forks_cpu:8.1f} {count:6d} {total:8.1f}")
    mine = sum(row[1] for row in rows)
    theirs = sum(row[2] for row in rows)
    forks_cpu = sum(row[3] for row in rows)
    total = mine + theirs + forks_cpu
    count = sum(row[4] for row in rows)
    print(f"{'all':48} {mine:8.1f} {theirs:8.1f} {forks_cpu:8.1f} {count:6d} {total:8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
