"""The operator's commands on a data dir: serve, orgs, keys, gc, check, backup, migrate.

None of them imports the HTTP client: they work on the engine directly (`orgs create` and
`keys create` may run beside a server on the same SQLite index).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import time
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

from gateway.runtime.bootstrap import ADMIN_KEY_FILE, DEV_CREDENTIALS
from storage.engine import Engine
from storage.errors import InvalidBucketName
from storage.models import Actor
from storage.rules.validation import check_bucket_name
from storage.tools.backup import backup

from ..settings import Settings, load_settings
from .datadir import existing, locked, settings_of, with_engine
from .errors import Failed, UsageError
from .terminal import table


def serve(args: argparse.Namespace) -> None:
    from gateway.runtime.serving import serve as run_server

    def load() -> Settings:
        flags = {"host": args.host, "port": args.port, "s3_port": args.s3_port}
        flags |= {"s3_enabled": False} if args.no_s3 else {}
        tls = {"tls_cert": args.tls_cert, "tls_key": args.tls_key}
        return settings_of(args, **flags, **tls, workers=args.workers, log_format=args.log_format)

    faults = os.environ.get("BUCKETD_FAULTS", "")
    run_server(load(), faults=faults, reload=load, ready_file=args.ready_file)


def dev(args: argparse.Namespace) -> None:
    """`serve` with the development defaults: one process, both usual ports, the packaged
    dev.toml (unless --config or BUCKETD_CONFIG), a known S3 credential."""
    from gateway.runtime.serving import serve as run_server

    environ = dict(os.environ)
    chosen = "BUCKETD_ACCESS_KEY_ID" in environ or "BUCKETD_SECRET_ACCESS_KEY" in environ
    if not chosen:
        environ["BUCKETD_ACCESS_KEY_ID"], environ["BUCKETD_SECRET_ACCESS_KEY"] = DEV_CREDENTIALS
    config = args.config or environ.get("BUCKETD_CONFIG")
    flags = {
        "data_dir": args.data_dir,
        "host": args.host,
        "port": args.port,
        "s3_port": args.s3_port,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "log_format": args.log_format,
        "workers": 1,
    }
    path = Path(config) if config else Path(str(files("gateway") / "dev.toml"))
    settings = load_settings(path, environ, flags)

    def load() -> Settings:
        return load_settings(path, environ, flags)

    if not chosen:
        print(
            f"bucketd dev: S3 credentials (for development only): access key id "
            f"{DEV_CREDENTIALS[0]}, secret access key {DEV_CREDENTIALS[1]}",
            flush=True,
        )
    run_server(settings, reload=load, ready_file=args.ready_file)


async def org_id(engine: Engine, given: str) -> str:
    """An organization id from an id, or from a name only one organization has."""
    if given.startswith(engine.config.id_prefix):
        return given
    named = [org.id for org in await engine.orgs.all() if org.name == given]
    if not named:
        raise UsageError(f"no organization is named {given!r} (bucketd orgs list shows them)")
    if len(named) > 1:
        raise UsageError(
            f"{len(named)} organizations are named {given!r} ({', '.join(named)}); give the id"
        )
    return named[0]


async def bucket_id(engine: Engine, org: str, given: str) -> str:
    """A bucket id from an id or the name of one of the organization's buckets: a bucket
    name never holds the capitals and underscore of an id."""
    try:
        name = check_bucket_name(given)
    except InvalidBucketName:
        return given
    return (await engine.buckets.get_by_name(Actor(org_id=org), name)).id


def orgs_create(args: argparse.Namespace) -> None:
    async def action(engine: Engine) -> None:
        existing = await engine.orgs.named(args.name)
        if existing is not None:
            raise UsageError(
                f"an organization named {args.name!r} exists already ({existing.id}, "
                f"{existing.plan} plan); use it, or choose another name"
            )
        org = await engine.orgs.create(args.name, args.plan)
        print(f"created organization {org.name!r} on the {org.plan} plan")
        print(org.id)

    asyncio.run(with_engine(settings_of(args), action, creates=True))


def keys_create(args: argparse.Namespace) -> None:
    scopes = [scope.strip() for scope in args.scopes.split(",") if scope.strip()]
    expires_at = None if args.expires_in is None else math.ceil(time.time() + args.expires_in)

    async def action(engine: Engine) -> None:
        org = await org_id(engine, args.org)
        bucket = args.bucket and await bucket_id(engine, org, args.bucket)
        key, secret = await engine.keys.create(
            org, args.name, scopes, bucket, expires_at, s3=args.s3
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

    asyncio.run(with_engine(settings_of(args), action))


def orgs_list(args: argparse.Namespace) -> None:
    async def action(engine: Engine) -> None:
        rows = [(org.id, org.plan, org.name) for org in await engine.orgs.all()]
        table(["ID", "PLAN", "NAME"], rows, sys.stdout)

    asyncio.run(with_engine(settings_of(args), action))


def orgs_set_plan(args: argparse.Namespace) -> None:
    async def action(engine: Engine) -> None:
        org = await engine.orgs.set_plan(await org_id(engine, args.org), args.plan)
        print(f"organization {org.name!r} ({org.id}) is on the {org.plan} plan")

    asyncio.run(with_engine(settings_of(args), action))


def keys_list(args: argparse.Namespace) -> None:
    async def action(engine: Engine) -> None:
        actor = Actor(org_id=await org_id(engine, args.org))
        rows: list[tuple[str, ...]] = []
        after = None
        while True:
            page = await engine.keys.list(actor, after, 100)
            for key in page.items:
                state = f"revoked {key.revoked_at}" if key.revoked_at else "active"
                access = f"S3 {key.access_key_id}" if key.access_key_id else "-"
                rows.append((key.id, state, key.name or "-", ",".join(key.scopes), access))
            if not page.has_more or not page.items:
                break
            after = page.items[-1].id
        table(["ID", "STATE", "NAME", "SCOPES", "CREDENTIAL"], rows, sys.stdout)

    asyncio.run(with_engine(settings_of(args), action))


def keys_revoke(args: argparse.Namespace) -> None:
    async def action(engine: Engine) -> None:
        if args.key.startswith(engine.config.id_prefix):
            key = await engine.keys.by_id(args.key)
        else:
            found = await engine.keys.find_s3(args.key)
            if found is None:
                raise UsageError(f"no key has the id or access key id {args.key!r}")
            key = found[0]
        revoked = await engine.keys.revoke(Actor(org_id=key.org_id), key.id)
        print(f"revoked key {revoked.id} ({revoked.name}) of organization {revoked.org_id}")

    asyncio.run(with_engine(settings_of(args), action))


def gc(args: argparse.Namespace) -> None:
    settings = settings_of(args)
    with locked(settings):
        report = asyncio.run(
            with_engine(settings, lambda engine: engine.maintenance.collect_garbage())
        )
    print(f"removed {report.temp_files} temp files and {report.blobs} unreferenced blobs")


def check(args: argparse.Namespace) -> None:
    settings = settings_of(args)

    async def action(engine: Engine) -> tuple[list[str], list[str]]:
        problems = await engine.maintenance.check_consistency()
        if args.deep:
            problems += await engine.scrub.run()
        return problems, engine.maintenance.leftovers()

    with locked(settings):
        problems, leftovers = asyncio.run(with_engine(settings, action))
    for problem in problems:
        print(problem)
    for leftover in leftovers:
        print(f"note: {leftover} of an interrupted write (removed at the next start or by gc)")
    print(f"{len(problems)} problems" if problems else "consistent")
    if problems:
        raise Failed


def backup_command(args: argparse.Namespace) -> None:
    settings = settings_of(args)
    existing(settings)
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


def migrate(args: argparse.Namespace) -> None:
    from storage.tools.migrate import migrate as run_migration

    settings = settings_of(args)
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
    with locked(settings):
        report = asyncio.run(run_migration(source, target, lambda line: print(line, flush=True)))
    print(
        f"migrated {report.organizations} organizations, {report.keys} keys, "
        f"{report.buckets} buckets and {report.files} files ({report.bytes} bytes)"
    )
    if report.problems:
        print("bucketd: the target index is inconsistent:", *report.problems, sep="\n  ")
        raise Failed
    print(
        f"next: copy {settings.data_dir / 'secrets.key'} (if present) into every gateway's "
        'data dir, and start them with this [index] url and [storage] backend = "s3"'
    )
