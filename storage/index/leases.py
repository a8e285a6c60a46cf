"""Cluster-wide jobs as leases in the index: one gateway holds a job's lease until it runs
out, renewing it while it works, so each job runs once per cluster however many gateways
share the index (and a dead gateway's job is taken over once its lease ends).

The same table holds the lease of a cluster object being published (`claim_object`)."""

from __future__ import annotations

from .sql import Script, run, write

OBJECT_LEASE_SECONDS = 3600.0
"""A backstop: a publisher's lease on an object frees as soon as its reservation goes
(committed, released, or settled once its write lease lapsed: `backends/s3/settle.py`)."""


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


def object_lease(bucket_id: str, key: str) -> str:
    return f"object\t{bucket_id}\t{key}"


def claim_object(bucket_id: str, key: str, token: str, now: float) -> Script[bool]:
    """Take the lease on the cluster object of `key` for the write reserved as `token` (in
    `reservations.reserve`'s transaction): False while another write's reservation holds
    it. Two gateways publishing one key in turn would otherwise let the index name one's object
    while the cluster holds the other's."""
    taken = yield run(
        "INSERT INTO leases (name, owner, until) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until = excluded.until "
        "WHERE leases.until < ? OR leases.owner NOT IN (SELECT token FROM reservations)",
        object_lease(bucket_id, key),
        token,
        now + OBJECT_LEASE_SECONDS,
        now,
    )
    return bool(taken)


def release_object(bucket_id: str, key: str, token: str) -> Script[None]:
    """In the commit of the write reserved as `token`."""
    yield run(
        "DELETE FROM leases WHERE name = ? AND owner = ?", object_lease(bucket_id, key), token
    )
