"""The commands that work on buckets and files: `bucketd buckets`, `bucketd files`,
`bucketd export` and `bucketd import`.

They talk to a running server through bucketd_client (`--url`/`--key`, or BUCKETD_URL and
BUCKETD_KEY); export and import also open a stopped data dir directly with `--data-dir`.
Exit status: 0 when everything worked, 1 when the server refused something or a file
failed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

import bucketd_client as bc
from bucketd_client.exchange import ApiSide, Report, export_bucket, import_directory, path_problem

from .terminal import ProgressBar, as_json, human_size, summary, table


class UsageError(Exception):
    """Exit status 2: the command line cannot work as given."""


class Failed(Exception):
    """Exit status 1, after the output has been written."""


def _client(args: argparse.Namespace) -> bc.Client:
    try:
        return bc.Client(args.url, args.key)
    except ValueError as exc:
        raise UsageError(f"{exc} (or pass --key)") from None


def _async_client(args: argparse.Namespace) -> bc.AsyncClient:
    try:
        return bc.AsyncClient(args.url, args.key)
    except ValueError as exc:
        raise UsageError(f"{exc} (or pass --key)") from None


def resolve_bucket(client: bc.Client, name_or_id: str) -> bc.Bucket:
    """A bucket by id, or by name among the buckets the key can see."""
    if name_or_id.startswith("svc_"):
        return client.get_bucket(name_or_id)
    for bucket in client.iter_buckets():
        if bucket.name == name_or_id:
            return bucket
    raise bc.BucketNotFound(404, "bucket_not_found", f"no bucket named {name_or_id!r}")


def _print(args: argparse.Namespace, value: Any, human: Callable[[], None]) -> None:
    if args.json:
        print(as_json(value))
    else:
        human()


# buckets


def buckets_list(args: argparse.Namespace) -> None:
    with _client(args) as client:
        buckets = list(client.iter_buckets())
    _print(
        args,
        buckets,
        lambda: table(
            ["ID", "NAME", "REGION", "STATUS", "FILES", "SIZE"],
            [
                [b.id, b.name, b.region, b.status, b.file_count, human_size(b.size_bytes)]
                for b in buckets
            ],
            sys.stdout,
        ),
    )


def buckets_create(args: argparse.Namespace) -> None:
    with _client(args) as client:
        bucket = client.create_bucket(
            args.name,
            args.region,
            max_upload_bytes=args.max_upload_bytes,
            allowed_content_types=args.allow,
        )
        if not args.no_wait:
            bucket = client.wait_until_active(bucket)
    _print(args, bucket, lambda: print(f"{bucket.id}  {bucket.name}  {bucket.status}"))


def buckets_delete(args: argparse.Namespace) -> None:
    with _client(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        client.delete_bucket(bucket.id, force=args.force)
    _print(args, {"deleted": bucket.id}, lambda: print(f"deleted {bucket.id} ({bucket.name})"))


# files


def files_ls(args: argparse.Namespace) -> None:
    with _client(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        if args.recursive:
            files, prefixes = list(client.iter_files(bucket.id, prefix=args.prefix)), list[str]()
        else:
            files, prefixes = [], list[str]()
            cursor: str | None = None
            while True:
                page = client.list_files(
                    bucket.id, prefix=args.prefix, delimiter="/", limit=100, cursor=cursor
                )
                files.extend(page.items)
                prefixes.extend(page.prefixes)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
    rows: list[list[object]] = [["", "", "PRE", prefix] for prefix in prefixes]
    rows += [[f.uploaded_at, f.size, f.content_type, f.key] for f in files]
    _print(
        args,
        {"files": files, "prefixes": prefixes},
        lambda: table(["UPLOADED", "SIZE", "TYPE", "KEY"], rows, sys.stdout),
    )


def _sources(paths: list[str], prefix: str) -> Iterator[tuple[Path, str]]:
    """(file, key) for each path: a file keeps its name, a folder its name and everything
    under it (as `cp -r` does)."""
    for name in paths:
        path = Path(name)
        if path.is_file():
            yield path, prefix + path.name
        elif path.is_dir():
            base = path.resolve().name
            for root, _, names in sorted(os.walk(path)):
                for file_name in sorted(names):
                    file = Path(root) / file_name
                    relative = file.relative_to(path).as_posix()
                    yield file, f"{prefix}{base}/{relative}" if base else prefix + relative
        else:
            raise UsageError(f"{name}: no such file or directory")


def files_put(args: argparse.Namespace) -> None:
    bar = ProgressBar(args.progress)
    done: list[bc.File] = []
    failed: list[str] = []
    started = time.monotonic()
    sources = list(_sources(args.paths, args.prefix))
    with _client(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        for path, key in sources:
            bar.start()
            try:
                done.append(
                    client.upload(
                        bucket.id,
                        key,
                        path,
                        content_type=args.content_type,
                        progress=bar.tracker(key),
                    )
                )
            except bc.BucketdError as exc:
                failed.append(f"{key}: {exc}")
            finally:
                bar.clear()
    _report(args, "uploaded", done, failed, started)


def files_get(args: argparse.Namespace) -> None:
    bar = ProgressBar(args.progress)
    done: list[bc.File] = []
    failed: list[str] = []
    started = time.monotonic()
    with _client(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        for file, target in _targets(client, bucket.id, args, failed):
            bar.start()
            try:
                done.append(
                    client.download(
                        bucket.id,
                        file.key,
                        target,
                        progress=bar.tracker(file.key),
                    )
                )
            except (bc.BucketdError, bc.CorruptDownload, OSError) as exc:
                failed.append(f"{file.key}: {exc}")
            finally:
                bar.clear()
    _report(args, "downloaded", done, failed, started)


def _targets(
    client: bc.Client, bucket_id: str, args: argparse.Namespace, failed: list[str]
) -> Iterator[tuple[bc.File, Path]]:
    """What to download where: one key to a file (or into a folder), or with -r every key
    under a prefix into a folder, as relative paths."""
    dest = Path(args.dest) if args.dest else Path(".")
    if not args.recursive:
        file = client.get_file(bucket_id, args.file_key)
        name = file.key.rsplit("/", 1)[-1]
        yield file, (dest / name if dest.is_dir() or args.dest is None else dest)
        return
    prefix: str = args.file_key
    for file in client.iter_files(bucket_id, prefix=prefix):
        relative = file.key[len(prefix) :] if prefix.endswith("/") else file.key
        problem = path_problem(relative)
        if problem is not None:
            failed.append(f"{file.key}: not written, {problem}")
            continue
        yield file, dest.joinpath(*relative.split("/"))


def files_rm(args: argparse.Namespace) -> None:
    deleted: list[str] = []
    failed: list[str] = []
    with _client(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        for given in args.keys:
            keys = (
                [f.key for f in client.iter_files(bucket.id, prefix=given)]
                if args.recursive
                else [given]
            )
            for key in keys:
                try:
                    client.delete_file(bucket.id, key)
                    deleted.append(key)
                except bc.BucketdError as exc:
                    failed.append(f"{key}: {exc}")
    _print(
        args,
        {"deleted": deleted, "failed": failed},
        lambda: print(f"deleted {len(deleted)} file{'s' if len(deleted) != 1 else ''}"),
    )
    _fail_if(failed)


def _report(
    args: argparse.Namespace, verb: str, done: list[bc.File], failed: list[str], started: float
) -> None:
    seconds = time.monotonic() - started
    size = sum(file.size for file in done)
    _print(
        args,
        {"files": done, "failed": failed, "bytes": size, "seconds": round(seconds, 3)},
        lambda: print(summary(verb, len(done), size, seconds, len(failed))),
    )
    _fail_if(failed)


def _fail_if(failed: list[str]) -> None:
    for line in failed:
        print(f"bucketd: {line}", file=sys.stderr)
    if failed:
        raise Failed


# export and import


def export_command(args: argparse.Namespace) -> None:
    _exchange(
        args,
        lambda side, bucket_id, progress: export_bucket(
            side, bucket_id, Path(args.directory), progress
        ),
        "exported",
    )


def import_command(args: argparse.Namespace) -> None:
    _exchange(
        args,
        lambda side, bucket_id, progress: import_directory(side, Path(args.directory), progress),
        "imported",
    )


def _exchange(args: argparse.Namespace, work: Callable[..., Any], verb: str) -> None:
    bar = ProgressBar(args.progress)
    started = time.monotonic()

    def progress(key: str, done: int, total: int | None) -> None:
        bar.update(key, done, total)

    async def through_api() -> Report:
        async with _async_client(args) as client:
            with _client(args) as sync:
                bucket_id = resolve_bucket(sync, args.bucket).id
            return await work(ApiSide(client, bucket_id), bucket_id, progress)  # type: ignore[no-any-return]

    if args.data_dir:
        from .cli import offline_side

        report = asyncio.run(offline_side(args, lambda side: work(side, args.bucket, progress)))
    else:
        report = asyncio.run(through_api())
    bar.clear()
    seconds = time.monotonic() - started

    def human() -> None:
        print(summary(verb, report.copied, report.bytes, seconds, len(report.failed)))
        if report.skipped:
            print(f"{report.skipped} already there, skipped")
        if report.unwritable:
            print(f"{report.unwritable} keys cannot be file names here; see the manifest")

    _print(args, report.as_json(), human)
    _fail_if(report.failed)


# the parser


def _remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="server URL (default $BUCKETD_URL or http://127.0.0.1:8080)")
    parser.add_argument("--key", help="API key (default $BUCKETD_KEY)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def add_commands(commands: Any, add_data_dir: Callable[[argparse.ArgumentParser], None]) -> None:
    buckets = commands.add_parser("buckets", help="list, create and delete buckets")
    actions = buckets.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every bucket the key can see")
    _remote_options(listing)
    listing.set_defaults(run=buckets_list)
    create = actions.add_parser("create", help="create a bucket and wait until it is active")
    create.add_argument("name")
    create.add_argument("--region", default="us-east-1")
    create.add_argument("--max-upload-bytes", type=int)
    create.add_argument("--allow", action="append", help="an allowed MIME type (repeatable)")
    create.add_argument("--no-wait", action="store_true", help="return while provisioning")
    _remote_options(create)
    create.set_defaults(run=buckets_create)
    delete = actions.add_parser("delete", help="delete a bucket (by id or name)")
    delete.add_argument("bucket")
    delete.add_argument("--force", action="store_true", help="delete its files too")
    _remote_options(delete)
    delete.set_defaults(run=buckets_delete)

    files = commands.add_parser("files", help="list, upload, download and delete files")
    actions = files.add_subparsers(dest="action", required=True)
    ls = actions.add_parser("ls", help="list files (folders rolled up unless -r)")
    ls.add_argument("bucket", help="bucket id or name")
    ls.add_argument("prefix", nargs="?", default="")
    ls.add_argument("-r", "--recursive", action="store_true")
    _remote_options(ls)
    ls.set_defaults(run=files_ls)
    put = actions.add_parser("put", help="upload files and folders (recursive)")
    put.add_argument("bucket", help="bucket id or name")
    put.add_argument("paths", nargs="+")
    put.add_argument("--prefix", default="", help="put the keys under this prefix")
    put.add_argument("--content-type", help="instead of a guess from each file name")
    _remote_options(put)
    _progress_option(put)
    put.set_defaults(run=files_put)
    get = actions.add_parser("get", help="download a file, or with -r every file under a prefix")
    get.add_argument("bucket", help="bucket id or name")
    get.add_argument("file_key", metavar="key", help="a key, or with -r a prefix")
    get.add_argument("dest", nargs="?")
    get.add_argument("-r", "--recursive", action="store_true")
    _remote_options(get)
    _progress_option(get)
    get.set_defaults(run=files_get)
    rm = actions.add_parser("rm", help="delete files (with -r, every file under each prefix)")
    rm.add_argument("bucket", help="bucket id or name")
    rm.add_argument("keys", nargs="+")
    rm.add_argument("-r", "--recursive", action="store_true")
    _remote_options(rm)
    rm.set_defaults(run=files_rm)

    export = commands.add_parser("export", help="write a bucket's files under a folder (resumable)")
    export.add_argument("bucket", help="bucket id (or name, through the API)")
    export.add_argument("directory")
    _remote_options(export)
    _progress_option(export)
    add_data_dir(export)
    export.set_defaults(run=export_command)
    imported = commands.add_parser("import", help="upload a folder's files into a bucket")
    imported.add_argument("directory")
    imported.add_argument("bucket", help="bucket id (or name, through the API)")
    _remote_options(imported)
    _progress_option(imported)
    add_data_dir(imported)
    imported.set_defaults(run=import_command)


def run(args: argparse.Namespace) -> None:
    """Run a remote command, turning its failures into the exit status."""
    try:
        args.run(args)
    except UsageError as exc:
        print(f"bucketd: {exc}", file=sys.stderr)
        sys.exit(2)
    except Failed:
        sys.exit(1)
    except bc.BucketdError as exc:
        print(f"bucketd: {exc.message} ({exc.status} {exc.code})", file=sys.stderr)
        sys.exit(1)
    except httpx.TransportError as exc:
        print(f"bucketd: cannot reach the server: {exc}", file=sys.stderr)
        sys.exit(1)
