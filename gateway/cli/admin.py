"""The operator's commands on a data dir: serve, dev, gc, check, backup, migrate, and the
master key's (the commands on organizations and keys, which work on a data dir or through
the API, are `accounts.py`).

None of them imports the HTTP client: they work on the engine directly.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

from gateway.runtime.bootstrap import ADMIN_KEY_FILE, DEV_CREDENTIALS
from storage import encryption
from storage.engine import Engine
from storage.services.sealed import Rotation
from storage.tools.backup import backup

from ..settings import Settings, load_settings
from .datadir import existing, locked, settings_of, with_engine
from .errors import Failed


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
    dev.toml (unless --config or BUCKETD_CONFIG), a known S3 credential, test mode on
    (unless BUCKETD_TEST_MODE says otherwise)."""
    from gateway.runtime.serving import serve as run_server

    environ = dict(os.environ)
    chosen = "BUCKETD_ACCESS_KEY_ID" in environ or "BUCKETD_SECRET_ACCESS_KEY" in environ
    if not chosen:
        environ["BUCKETD_ACCESS_KEY_ID"], environ["BUCKETD_SECRET_ACCESS_KEY"] = DEV_CREDENTIALS
    environ.setdefault("BUCKETD_TEST_MODE", "true")
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


def gc(args: argparse.Namespace) -> None:
    settings = settings_of(args)
    with locked(settings):
        report = asyncio.run(
            with_engine(settings, lambda engine: engine.maintenance.collect_garbage())
        )
    print(f"removed {report.temp_files} temp files and {report.blobs} unreferenced blobs")


def new_master_key(args: argparse.Namespace) -> None:
    """A key for `storage.master_key` (base64 of 32 random bytes)."""
    print(encryption.generate_key())


def rotate_master_key(args: argparse.Namespace) -> None:
    """Rewrap every content key under the configured master key (server stopped, like gc);
    stopped anywhere, running it again finishes the work."""
    settings = settings_of(args)

    def show(report: Rotation) -> None:
        print(f"{report.envelopes} content keys seen, {report.rewrapped} rewrapped", flush=True)

    async def action() -> tuple[Rotation, str]:
        faults = os.environ.get("BUCKETD_FAULTS", "")  # the tests' SIGKILL between batches
        engine = await Engine.open(
            replace(settings.engine_config(), faults=faults), collect_garbage=False
        )
        try:
            rotation = await engine.files.sealed.rotate(show, max(1, args.batch))
            return rotation, engine.files.sealed.keys.current_id
        finally:
            await engine.close()

    existing(settings)
    with locked(settings):
        report, current = asyncio.run(action())
    print(
        f"rewrapped {report.rewrapped} of {report.envelopes} content keys ({report.rows} "
        f"version rows) under master key {current}: every encrypted content is now readable "
        "without previous_master_keys"
    )


def check(args: argparse.Namespace) -> None:
    settings = settings_of(args)

    async def action(engine: Engine) -> tuple[list[str], list[str]]:
        problems = await engine.maintenance.check_consistency()
        problems += await engine.files.sealed.check_keys()
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
        access_key_id=args.s3_access_key_id or os.environ.get("AWS_ACCESS_KEY_ID", ""),
        secret_access_key=args.s3_secret_access_key or os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
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
