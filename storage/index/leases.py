"""Cluster-wide jobs as leases in the index: one gateway holds a job's lease until it runs
out, renewing it while it works, so each job runs once per cluster however many gateways
share the index (and a dead gateway's job is taken over once its lease ends)."""

from __future__ import annotations

from .sql import Script, run, write


@write
def claim_lease(name: str, owner: str, now: float, until: float) -> Script[bool]:
    """Take or renew the lease `name` until `until`: True when `owner` holds it now (it was
    free, ran out before `now`, or was already `owner`'s)."""
    changed = yield run(
        "INSERT INTO leases (name, owner, until) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until "
        "WHERE leases.until < ? OR leases.owner = ?",
        name,
        owner,
        until,
        now,
        owner,
    )
    return bool(changed)


@write
def release_lease(name: str, owner: str | None) -> Script[None]:
    """Give up the lease `name` (owner None: whoever holds it, at start-up when this process
    is the only one)."""
    if owner is None:
        yield run("DELETE FROM leases WHERE name = ?", name)
    else:
        yield run("DELETE FROM leases WHERE name = ? AND owner = ?", name, owner)
