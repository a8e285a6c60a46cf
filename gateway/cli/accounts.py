"""`bucketd orgs ...` and `bucketd keys ...`: organizations and their keys, through a
running server's API or on a data dir, by one rule (`over_api`). Both ways hand this
module the API's shapes (`Organization`, `Key`), and it prints them, so the output is the
same whichever way a command went: `orgs create` prints the new id alone on its last line,
`keys create` the secret (with `--s3`: the access key id and secret)."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from .errors import UsageError
from .terminal import table

if TYPE_CHECKING:  # the parser imports RULE: no shapes loaded for every command
    from bucketd_client.shapes import Key, Organization

RULE = (
    "--url (or, without --data-dir and --config, $BUCKETD_URL): through that server's API "
    "with --key/$BUCKETD_KEY; otherwise on the data dir (--data-dir, $BUCKETD_DATA_DIR, "
    "else ./data), which a running server may share"
)
"""Where an organization or key command works, as its help says."""


def over_api(args: argparse.Namespace) -> bool:
    """Whether the command goes through a server's API rather than a data dir: a URL on
    the command line always does, a data dir or settings file on the command line never
    does, and between the environment's two (a server's own environment often holds
    BUCKETD_DATA_DIR) the URL wins. A key for the data dir, or both kinds of flag, is a
    usage error: the command would otherwise quietly ignore one of them."""
    if args.url:
        if args.data_dir or args.config:
            raise UsageError(
                "--url works through a server; --data-dir and --config on a data dir: give "
                "one or the other"
            )
        return True
    on_api = not (args.data_dir or args.config) and bool(os.environ.get("BUCKETD_URL"))
    if args.key and not on_api:
        raise UsageError(
            "--key is for a server's API: give its --url too (or set BUCKETD_URL); on the "
            "data dir no key is needed"
        )
    return on_api


class Accounts(Protocol):
    """Organizations and keys, as the API or the data dir's engine keeps them. `org` is an
    organization's id or a name only one organization has."""

    async def create_org(self, name: str, plan: str) -> Organization: ...

    async def orgs(self) -> list[Organization]: ...

    async def set_plan(self, org: str, plan: str) -> Organization: ...

    async def create_key(
        self,
        org: str,
        name: str,
        scopes: list[str],
        bucket: str | None,
        expires_at: int | None,
        s3: bool,
    ) -> Key: ...

    async def keys(self, org: str) -> list[Key]: ...

    async def revoke(self, key: str, org: str | None) -> Key:
        """The key (by id, or an S3 credential's access key id) as it was found."""
        ...


def _run(
    args: argparse.Namespace,
    action: Callable[[Accounts], Awaitable[None]],
    initialises: bool = False,
) -> None:
    """Run `action` on the accounts `over_api` chooses. `initialises`: on a data dir, the
    command may start an index in a folder that holds none (and exists)."""
    if over_api(args):
        from .account_api import through_api

        asyncio.run(through_api(args, action))
    else:
        from .account_engine import on_data_dir

        asyncio.run(on_data_dir(args, action, initialises))


def orgs_create(args: argparse.Namespace) -> None:
    async def action(accounts: Accounts) -> None:
        org = await accounts.create_org(args.name, args.plan)
        print(f"created organization {org.name!r} on the {org.plan} plan")
        print(org.id)

    # Starting an index is explicit: only in a folder named by --data-dir, never in a
    # ./data that merely sits where the command runs (another program's, maybe).
    _run(args, action, initialises=bool(args.data_dir))


def orgs_list(args: argparse.Namespace) -> None:
    async def action(accounts: Accounts) -> None:
        rows = [(org.id, org.plan, org.name) for org in await accounts.orgs()]
        table(["ID", "PLAN", "NAME"], rows, sys.stdout)

    _run(args, action)


def orgs_set_plan(args: argparse.Namespace) -> None:
    async def action(accounts: Accounts) -> None:
        org = await accounts.set_plan(args.org, args.plan)
        print(f"organization {org.name!r} ({org.id}) is on the {org.plan} plan")

    _run(args, action)


def keys_create(args: argparse.Namespace) -> None:
    scopes = [scope.strip() for scope in args.scopes.split(",") if scope.strip()]
    expires_at = None if args.expires_in is None else math.ceil(time.time() + args.expires_in)

    async def action(accounts: Accounts) -> None:
        key = await accounts.create_key(
            args.org, args.name, scopes, args.bucket, expires_at, args.s3
        )
        if key.access_key_id is not None:
            print(
                f"created S3 credentials {key.id} ({', '.join(key.scopes)}); access key id "
                "and secret access key, shown once:"
            )
            print(f"{key.access_key_id} {key.secret}")
            return
        print(f"created key {key.id} ({', '.join(key.scopes)}); the secret is shown once:")
        print(key.secret)

    _run(args, action)


def keys_list(args: argparse.Namespace) -> None:
    async def action(accounts: Accounts) -> None:
        rows: list[tuple[str, ...]] = []
        for key in await accounts.keys(args.org):
            state = f"revoked {key.revoked_at}" if key.revoked_at else "active"
            access = f"S3 {key.access_key_id}" if key.access_key_id else "-"
            rows.append((key.id, state, key.name or "-", ",".join(key.scopes), access))
        table(["ID", "STATE", "NAME", "SCOPES", "CREDENTIAL"], rows, sys.stdout)

    _run(args, action)


def keys_revoke(args: argparse.Namespace) -> None:
    async def action(accounts: Accounts) -> None:
        key = await accounts.revoke(args.revoked, args.org)
        print(f"revoked key {key.id} ({key.name}) of organization {key.organization_id}")

    _run(args, action)
