"""The arguments of `bucketd snapshots ...` (run by `snapshots.py`), through a running
server's API: a bucket's snapshots with a key of its organization, the whole server's
(`--server`) with the operator's."""

from __future__ import annotations

from typing import Any

from .arguments import command, remote

SERVER = "the whole server's snapshots (the operator's key, scope orgs:manage)"


def snapshot_commands(commands: Any) -> None:
    snapshots = commands.add_parser(
        "snapshots",
        help="snapshots of a bucket or of the whole server: take, list, restore, fork, delete",
        description="Snapshots hold a bucket's versions and settings as they were, sharing "
        "their content (docs/api.md, Snapshots).",
    )
    actions = snapshots.add_subparsers(dest="action", required=True)
    create = command(
        actions, "create", "snapshots:snapshots_create", "take a snapshot; prints its id last"
    )
    create.add_argument("bucket", nargs="?", help="bucket id or name (not with --server)")
    create.add_argument("--name", help="a label to recognise it by")
    create.add_argument(
        "--server", action="store_true", help="snapshot every bucket (the operator's key)"
    )
    remote(create)
    listed = command(
        actions, "list", "snapshots:snapshots_list", "the organization's snapshots, oldest first"
    )
    listed.add_argument("bucket", nargs="?", help="only this bucket's (id or name)")
    listed.add_argument("--server", action="store_true", help=SERVER)
    remote(listed)
    restore = command(
        actions,
        "restore",
        "snapshots:snapshots_restore",
        "put the snapshot's bucket (or with --server, every bucket) back as it was",
    )
    restore.add_argument("snapshot", help="snapshot id (snap_...)")
    restore.add_argument("--server", action="store_true", help="a server snapshot")
    remote(restore)
    fork = command(
        actions, "fork", "snapshots:snapshots_fork", "a new bucket from a snapshot; prints its id"
    )
    fork.add_argument("snapshot", help="snapshot id (snap_...)")
    fork.add_argument("name", help="the new bucket's name")
    fork.add_argument("--region", help="default: the snapshot's bucket's")
    remote(fork)
    delete = command(actions, "delete", "snapshots:snapshots_delete", "delete a snapshot")
    delete.add_argument("snapshot", help="snapshot id (snap_...)")
    delete.add_argument("--server", action="store_true", help="a server snapshot")
    remote(delete)
