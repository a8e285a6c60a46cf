"""`bucketd export` and `bucketd import`: a bucket as plain files, through the API or, with
`--data-dir`, on a stopped data dir's engine."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from bucketd_client.bodies import async_chunks
from bucketd_client.exchange import (
    ApiSide,
    Progress,
    Report,
    Side,
    export_bucket,
    import_directory,
)
from bucketd_client.models import File
from gateway.api.resources import file_shape
from storage.attributes import Attributes
from storage.engine import Engine
from storage.models import Actor, FileRecord

from .datadir import locked, settings_of
from .errors import UsageError
from .remote import async_client_of, client_of, fail_if, output, resolve_bucket
from .terminal import ProgressBar, summary

PAGE = 500
Work = Callable[[Side, str, Progress], Awaitable[Report]]


class EngineSide:
    """Reads and writes a bucket through the engine, as its organization, no HTTP."""

    def __init__(self, engine: Engine, actor: Actor, bucket_id: str) -> None:
        self._engine = engine
        self._actor = actor
        self._bucket_id = bucket_id

    async def files(self) -> AsyncIterator[File]:
        after: str | None = None
        while True:
            page = await self._engine.files.list(
                self._actor, self._bucket_id, after=after, limit=PAGE
            )
            for record in page.items:
                yield file_shape(record)
            if not page.has_more:
                return
            after = page.last

    async def chunks(self, file: File) -> AsyncIterator[bytes]:
        record = await self._engine.files.get(self._actor, self._bucket_id, file.key)
        async for chunk in await self._engine.files.open(record, 0, record.size):
            yield chunk

    async def upload(self, key: str, path: Path, content_type: str) -> File:
        size = path.stat().st_size
        record = await self._engine.files.put(
            self._actor,
            self._bucket_id,
            key,
            Attributes(content_type),
            async_chunks(path, size, None),
            size,
        )
        return file_shape(record)


class SnapshotSide:
    """Reads the files a bucket snapshot held current, through the engine (export only)."""

    def __init__(self, engine: Engine, snapshot_id: str) -> None:
        self._engine = engine
        self._snapshot_id = snapshot_id
        self._page: dict[str, FileRecord] = {}
        """The records of the page being exported, by key (read one after the other)."""

    async def files(self) -> AsyncIterator[File]:
        after: str | None = None
        while True:
            _, page = await self._engine.snapshots.current_files(self._snapshot_id, after, PAGE)
            self._page = {record.key: record for record in page.items}
            for record in page.items:
                yield file_shape(record)
            if not page.has_more:
                return
            after = page.last

    async def chunks(self, file: File) -> AsyncIterator[bytes]:
        record = self._page[file.key]
        async for chunk in await self._engine.files.open(record, 0, record.size):
            yield chunk

    async def upload(self, key: str, path: Path, content_type: str) -> File:
        raise UsageError("a snapshot is read only: import into a bucket")


async def _offline_snapshot(args: argparse.Namespace, work: Work, progress: Progress) -> Report:
    """Run `work` (an export) on a snapshot of a stopped data dir."""
    settings = settings_of(args)
    with locked(settings):
        engine = await Engine.open(settings.engine_config(), collect_garbage=False)
        try:
            snapshot, _ = await engine.snapshots.current_files(args.snapshot, None, 1)
            assert snapshot.bucket_id is not None
            return await work(SnapshotSide(engine, args.snapshot), snapshot.bucket_id, progress)
        finally:
            await engine.close()


async def _offline(args: argparse.Namespace, work: Work, progress: Progress) -> Report:
    """Run `work` on a bucket of a stopped data dir."""
    settings = settings_of(args)
    with locked(settings):
        engine = await Engine.open(settings.engine_config(), collect_garbage=False)
        try:
            actor = await engine.buckets.owner(args.bucket)
            side = EngineSide(engine, actor, args.bucket)
            return await work(side, args.bucket, progress)
        finally:
            await engine.close()


async def _through_api(args: argparse.Namespace, work: Work, progress: Progress) -> Report:
    async with async_client_of(args) as client:
        with client_of(args) as sync:
            bucket_id = resolve_bucket(sync, args.bucket).id
        return await work(ApiSide(client, bucket_id), bucket_id, progress)


def offline(args: argparse.Namespace) -> bool:
    """Whether the command works on a stopped data dir (--data-dir, or a settings file
    naming one) rather than through the API. A server's --url or --key beside them is a
    usage error: one of the two would otherwise be quietly ignored."""
    on_data_dir = bool(args.data_dir or args.config)
    if on_data_dir and (args.url or args.key):
        raise UsageError(
            "--url and --key work through a server; --data-dir and --config on a stopped "
            "data dir: give one or the other"
        )
    return on_data_dir


def _exchange(args: argparse.Namespace, work: Work, verb: str) -> None:
    run = _offline if offline(args) else _through_api
    if getattr(args, "snapshot", None) is not None:
        run = _offline_snapshot
        if args.bucket is not None or not offline(args):
            raise UsageError(
                "export --snapshot ID DIRECTORY reads a stopped data dir (--data-dir) and "
                "takes no bucket; through a server, fork the snapshot and export the fork"
            )
    elif getattr(args, "bucket", None) is None:
        raise UsageError("name the bucket to export (or --snapshot ID)")
    bar = ProgressBar(args.progress)
    started = time.monotonic()
    report = asyncio.run(run(args, work, bar.update))
    bar.clear()
    seconds = time.monotonic() - started

    def human() -> None:
        print(summary(verb, report.copied, report.bytes, seconds, len(report.failed)))
        if report.skipped:
            print(f"{report.skipped} already there, skipped")
        if report.unwritable:
            print(f"{report.unwritable} keys cannot be file names here; see the manifest")

    output(args, report.as_json(), human)
    fail_if(report.failed)


def export_command(args: argparse.Namespace) -> None:
    if offline(args) and settings_of(args).storage.backend == "null":
        raise UsageError("the null storage backend keeps no contents: there is nothing to export")

    def work(side: Side, bucket_id: str, progress: Progress) -> Awaitable[Report]:
        return export_bucket(side, bucket_id, Path(args.directory), progress)

    _exchange(args, work, "exported")


def import_command(args: argparse.Namespace) -> None:
    def work(side: Side, bucket_id: str, progress: Progress) -> Awaitable[Report]:
        return import_directory(side, Path(args.directory), progress)

    _exchange(args, work, "imported")
