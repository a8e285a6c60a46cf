"""The commands that work on buckets and files of a running server: `bucketd buckets` and
`bucketd files`, through bucketd_client (`--url`/`--key`, or BUCKETD_URL and BUCKETD_KEY)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import bucketd_client as bc
from bucketd_client.exchange import path_problem

from .encryption import encrypted
from .errors import UsageError
from .remote import client_of, fail_if, output, resolve_bucket
from .terminal import ProgressBar, size_of, summary, table
from .versions import object_lock_rule

# buckets


def buckets_list(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        buckets = list(client.iter_buckets())
    output(
        args,
        buckets,
        lambda: table(
            # fileCount counts every stored version (what the quota counts), not the
            # objects S3's listing shows: named for what it is
            ["ID", "NAME", "REGION", "STATUS", "VERSIONS", "SIZE"],
            [
                [
                    b.id,
                    b.name,
                    b.region,
                    b.status,
                    b.file_count,
                    size_of(b.size_bytes, args.human_readable),
                ]
                for b in buckets
            ],
            sys.stdout,
        ),
    )


def buckets_create(args: argparse.Namespace) -> None:
    if args.default_retention and not args.object_lock:
        raise SystemExit("--default-retention needs --object-lock")
    with client_of(args) as client:
        bucket = client.create_bucket(
            args.name,
            args.region,
            max_upload_bytes=args.max_upload_bytes,
            allowed_content_types=args.allow,
            versioning=args.versioning,
            object_lock=object_lock_rule(args.default_retention) if args.object_lock else None,
            encryption=args.encryption,
        )
        if not args.no_wait:
            bucket = client.wait_until_active(bucket)
    output(args, bucket, lambda: print(f"{bucket.id}  {bucket.name}  {bucket.status}"))


def buckets_delete(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        try:
            client.delete_bucket(bucket.id, force=args.force)
        except bc.BucketNotEmpty as exc:
            reason = exc.message.split(";")[0]
            raise UsageError(f"{reason}; pass --force to delete them with the bucket") from None
    output(args, {"deleted": bucket.id}, lambda: print(f"deleted {bucket.id} ({bucket.name})"))


# files


def files_ls(args: argparse.Namespace) -> None:
    with client_of(args) as client:
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
    rows: list[list[object]] = [["", "", "PRE", "", prefix] for prefix in prefixes]
    rows += [
        [f.uploaded_at, size_of(f.size, args.human_readable), f.content_type, encrypted(f), f.key]
        for f in files
    ]
    output(
        args,
        {"files": files, "prefixes": prefixes},
        lambda: table(["UPLOADED", "SIZE", "TYPE", "ENCRYPTION", "KEY"], rows, sys.stdout),
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
    sources: list[tuple[Path | BinaryIO, str]]
    if "-" in args.paths:
        if len(args.paths) != 2 or args.paths[0] != "-":
            raise UsageError("standard input goes to one key: files put BUCKET - KEY")
        sources = [(sys.stdin.buffer, args.prefix + args.paths[1])]
    else:
        sources = list(_sources(args.paths, args.prefix))
    with client_of(args) as client:
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
    if args.version_id and args.recursive:
        raise UsageError("--version-id names a version of one file: not with -r")
    if args.dest == "-" and args.recursive:
        raise UsageError("standard output takes one file: not with -r")
    with client_of(args) as client:
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
                        version_id=args.version_id,
                    )
                )
            except (bc.BucketdError, bc.CorruptDownload, OSError) as exc:
                failed.append(f"{file.key}: {exc}")
            finally:
                bar.clear()
    _report(args, "downloaded", done, failed, started)


def _targets(
    client: bc.Client, bucket_id: str, args: argparse.Namespace, failed: list[str]
) -> Iterator[tuple[bc.File, Path | BinaryIO]]:
    """What to download where: one key to a file (or into a folder), or with -r every key
    under a prefix into a folder, as relative paths."""
    dest = Path(args.dest) if args.dest else Path(".")
    if not args.recursive:
        file = client.get_file(bucket_id, args.file_key, version_id=args.version_id)
        if args.dest == "-":
            yield file, sys.stdout.buffer
            return
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
    if args.version_id and (args.recursive or len(args.keys) > 1):
        raise UsageError("--version-id names a version of one file: one key, no -r")
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        for given in args.keys:
            keys = (
                [f.key for f in client.iter_files(bucket.id, prefix=given)]
                if args.recursive
                else [given]
            )
            for key in keys:
                try:
                    client.delete_file(bucket.id, key, version_id=args.version_id)
                    deleted.append(key)
                except bc.BucketdError as exc:
                    failed.append(f"{key}: {exc}")
    output(
        args,
        {"deleted": deleted, "failed": failed},
        lambda: print(f"deleted {len(deleted)} file{'s' if len(deleted) != 1 else ''}"),
    )
    fail_if(failed)


def _report(
    args: argparse.Namespace, verb: str, done: list[bc.File], failed: list[str], started: float
) -> None:
    """What was transferred, on standard output, or on stderr when a file went there."""
    seconds = time.monotonic() - started
    size = sum(file.size for file in done)
    out = sys.stderr if getattr(args, "dest", None) == "-" else sys.stdout
    output(
        args,
        {"files": done, "failed": failed, "bytes": size, "seconds": round(seconds, 3)},
        lambda: print(summary(verb, len(done), size, seconds, len(failed)), file=out),
        out,
    )
    fail_if(failed)
