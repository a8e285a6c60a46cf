"""The `bucketd` command: serve, orgs, keys, gc, check, backup, migrate, and the file commands of
`gateway.remote`."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from storage.backup import backup
from storage.datadir import lock_data_dir, unlock_data_dir
from storage.engine import Engine
from storage.errors import StorageError
from storage.models import SCOPES

from . import remote
from .bootstrap import ADMIN_KEY_FILE
from .offline import EngineSide
from .settings import Settings, SettingsError, load_settings

T = TypeVar("T")


def _settings(args: argparse.Namespace, **flags: Any) -> Settings:
    config = args.config or os.environ.get("BUCKETD_CONFIG")
    return load_settings(
        Path(config) if config else None,
        os.environ,
        {"data_dir": args.data_dir, **flags},
    )


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="data directory (default ./data)")
    parser.add_argument("--config", help="TOML settings file")


async def _with_engine(settings: Settings, action: Callable[[Engine], Awaitable[None]]) -> None:
    engine = await Engine.open(settings.engine_config(), collect_garbage=False)
    try:
        await action(engine)
    finally:
        await engine.close()


def _serve(args: argparse.Namespace) -> None:
    from .server import serve

    settings = _settings(args, host=args.host, port=args.port, s3_port=args.s3_port)
    explicit = args.s3_port is not None or "BUCKETD_S3_PORT" in os.environ
    serve(settings, faults=os.environ.get("BUCKETD_FAULTS", ""), s3_port_explicit=explicit)


def _orgs_create(args: argparse.Namespace) -> None:
    async def action(engine: Engine) -> None:
        org = await engine.create_organization(args.name, args.plan)
        print(f"created organization {org.name!r} on the {org.plan} plan")
        print(org.id)

    asyncio.run(_with_engine(_settings(args), action))


def _keys_create(args: argparse.Namespace) -> None:
    scopes = [scope.strip() for scope in args.scopes.split(",") if scope.strip()]
    expires_at = None if args.expires_in is None else math.ceil(time.time() + args.expires_in)

    async def action(engine: Engine) -> None:
        key, secret = await engine.create_key(
            args.org, args.name, scopes, args.bucket, expires_at, s3=args.s3
        )
        if key.access_key_id is not None:
            print(
                f"created S3 credentials {key.id} ({', '.join(key.scopes)}); access key id "
                "and secret access key, shown once:"
            )
            print(f"{key.access_key_id} {secret}")
            return
        print(f"created key {key.id} ({', '.join(key.scopes)}); the secret is shown once:")
        print(secret)

    asyncio.run(_with_engine(_settings(args), action))


async def offline_side(args: argparse.Namespace, work: Callable[[EngineSide], Awaitable[T]]) -> T:
    """Run `work` on a bucket of a stopped data dir (export and import with --data-dir)."""
    settings = _settings(args)
    lock = lock_data_dir(settings.data_dir)
    try:
        engine = await Engine.open(settings.engine_config(), collect_garbage=False)
        try:
            actor = await engine.bucket_owner(args.bucket)
            return await work(EngineSide(engine, actor, args.bucket))
        finally:
            await engine.close()
    finally:
        unlock_data_dir(lock)


def _gc(args: argparse.Namespace) -> None:
    settings = _settings(args)
    lock = lock_data_dir(settings.data_dir)
    try:

        async def action(engine: Engine) -> None:
            report = await engine.collect_garbage()
            print(f"removed {report.temp_files} temp files and {report.blobs} unreferenced blobs")

        asyncio.run(_with_engine(settings, action))
    finally:
        unlock_data_dir(lock)


def _migrate(args: argparse.Namespace) -> None:
    from storage.migrate import migrate

    settings = _settings(args)
    source = settings.engine_config()
    s3 = replace(
        settings.storage.s3,
        endpoint_url=args.to_s3,
        access_key_id=args.s3_access_key_id,
        secret_access_key=args.s3_secret_access_key,
        region=args.s3_region,
        brand=args.s3_brand or settings.storage.s3.brand,
    )
    target = replace(
        source,
        index=replace(settings.index, url=args.to_index),
        storage=replace(settings.storage, backend="s3", s3=s3),
    )
    lock = lock_data_dir(settings.data_dir)
    try:
        report = asyncio.run(migrate(source, target, lambda line: print(line, flush=True)))
    finally:
        unlock_data_dir(lock)
    print(
        f"migrated {report.organizations} organizations, {report.keys} keys, "
        f"{report.buckets} buckets and {report.files} files ({report.bytes} bytes)"
    )
    if report.problems:
        print("bucketd: the target index is inconsistent:", *report.problems, sep="\n  ")
        sys.exit(1)
    print(
        f"next: copy {settings.data_dir / 'secrets.key'} (if present) into every gateway's "
        'data dir, and start them with this [index] url and [storage] backend = "s3"'
    )


def _backup(args: argparse.Namespace) -> None:
    settings = _settings(args)
    report = backup(
        settings.data_dir,
        Path(args.dest),
        blobs=settings.storage.backend == "local",
        extra_files=(ADMIN_KEY_FILE,),
    )
    print(
        f"backed up the index ({report.index_bytes} bytes) and {report.blobs_copied} new blobs "
        f"({report.blobs_present} already there, {report.blobs_removed} no longer needed removed)"
        f" to {args.dest}"
    )
    if settings.storage.backend != "local":
        print("file contents live in the S3 cluster: back it up with the cluster's own tools")


def _check(args: argparse.Namespace) -> None:
    settings = _settings(args)
    lock = lock_data_dir(settings.data_dir)
    problems: list[str] = []
    try:

        async def action(engine: Engine) -> None:
            problems.extend(await engine.check_consistency())

        asyncio.run(_with_engine(settings, action))
    finally:
        unlock_data_dir(lock)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems" if problems else "consistent")
    if problems:
        sys.exit(1)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="bucketd", description="Self-hosted object storage.")
    commands = root.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host", help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default 8080)")
    serve.add_argument("--s3-port", type=int, help="S3 endpoint port (default 9000; 0: off)")
    _add_common(serve)
    serve.set_defaults(run=_serve)

    orgs = commands.add_parser("orgs", help="organizations").add_subparsers(
        dest="action", required=True
    )
    create_org = orgs.add_parser("create", help="create an organization; prints its id last")
    create_org.add_argument("name")
    create_org.add_argument("--plan", choices=["free", "pro"], required=True)
    _add_common(create_org)
    create_org.set_defaults(run=_orgs_create)

    keys = commands.add_parser("keys", help="API keys").add_subparsers(dest="action", required=True)
    create_key = keys.add_parser("create", help="create an API key; prints the secret last")
    create_key.add_argument("--org", required=True, help="organization id")
    create_key.add_argument("--scopes", required=True, help=f"comma-separated: {','.join(SCOPES)}")
    create_key.add_argument("--bucket", help="restrict the key to this bucket id")
    create_key.add_argument("--expires-in", type=float, help="seconds until the key expires")
    create_key.add_argument("--name", default="cli", help="a name to recognise the key by")
    create_key.add_argument(
        "--s3", action="store_true", help="S3 credentials: prints 'ACCESS_KEY_ID SECRET'"
    )
    _add_common(create_key)
    create_key.set_defaults(run=_keys_create)

    gc = commands.add_parser("gc", help="remove temp files and unreferenced blobs")
    _add_common(gc)
    gc.set_defaults(run=_gc)

    check = commands.add_parser(
        "check", help="verify counters, reference counts and blob files (server stopped)"
    )
    _add_common(check)
    check.set_defaults(run=_check)

    backup_parser = commands.add_parser(
        "backup", help="copy the data dir to DEST while the server runs (a restorable data dir)"
    )
    backup_parser.add_argument("dest")
    _add_common(backup_parser)
    backup_parser.set_defaults(run=_backup)

    migrate_parser = commands.add_parser(
        "migrate",
        help="copy a stopped data dir into a PostgreSQL index and an S3 cluster (scale-out)",
    )
    _add_common(migrate_parser)
    migrate_parser.add_argument("--to-index", required=True, help="postgresql://... (empty DB)")
    migrate_parser.add_argument("--to-s3", required=True, help="S3 endpoint URL of the cluster")
    migrate_parser.add_argument(
        "--s3-access-key-id", default=os.environ.get("AWS_ACCESS_KEY_ID", "")
    )
    migrate_parser.add_argument(
        "--s3-secret-access-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    )
    migrate_parser.add_argument("--s3-region", default="us-east-1")
    migrate_parser.add_argument("--s3-brand", help="prefix of the S3 bucket names")
    migrate_parser.set_defaults(run=_migrate)

    remote.add_commands(commands, _add_offline)
    return root


def _add_offline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", help="work on this stopped data dir directly instead of through the API"
    )
    parser.add_argument("--config", help="TOML settings file (with --data-dir)")


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        if args.run.__module__ == remote.__name__:
            remote.run(args)
        else:
            args.run(args)
    except (SettingsError, StorageError) as exc:
        print(f"bucketd: {exc}", file=sys.stderr)
        sys.exit(2 if isinstance(exc, SettingsError) else 1)
    except KeyboardInterrupt:
        sys.exit(130)
