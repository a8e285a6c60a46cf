"""The version commands of a running server: `bucketd buckets versioning`, `bucketd buckets
lock`, `bucketd buckets lifecycle`, `bucketd files versions`, `bucketd files restore`,
`bucketd files lock` and `bucketd files tag`."""

from __future__ import annotations

import argparse
import re
import sys

from bucketd_client import UNSET
from bucketd_client.shapes import (
    DefaultRetentionRule,
    FileVersion,
    LifecycleRule,
    ObjectLockRule,
    RetentionRule,
    UnsetType,
)

from .remote import change_setting, client_of, output, resolve_bucket, rules_of
from .terminal import human_size, table

DEFAULT_RETENTION = re.compile(r"^(governance|compliance):(\d+)([dy])$")


def object_lock_rule(text: str | None) -> ObjectLockRule:
    """`--default-retention governance:30d` (or `compliance:1y`; absent: none)."""
    if text is None or text == "none":
        return ObjectLockRule()
    found = DEFAULT_RETENTION.match(text)
    if found is None:
        raise SystemExit("the default retention is MODE:Nd or MODE:Ny, e.g. governance:30d")
    mode, count, unit = found.group(1), int(found.group(2)), found.group(3)
    days, years = (count, None) if unit == "d" else (None, count)
    return ObjectLockRule(default_retention=DefaultRetentionRule(mode=mode, days=days, years=years))


def buckets_lock(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        bucket = client.update_bucket(
            bucket.id, object_lock=object_lock_rule(args.default_retention)
        )
    lock = bucket.object_lock
    default = lock.default_retention if lock is not None else None
    described = (
        "no default retention"
        if default is None
        else f"default {default.mode} {default.days or default.years}"
        f"{' days' if default.days else ' years'}"
    )
    output(args, bucket, lambda: print(f"{bucket.id}  {bucket.name}  object lock, {described}"))


def buckets_lifecycle(args: argparse.Namespace) -> None:
    """Show a bucket's lifecycle rules, replace them from a JSON file (`-` for stdin), or
    remove them."""
    bucket = change_setting(args, "lifecycle", rules_of(LifecycleRule, "lifecycle rules"))
    rules_now = bucket.lifecycle or []
    output(
        args,
        rules_now,
        lambda: table(
            ["ID", "ENABLED", "FILTER", "ACTIONS"],
            [[r.id, "yes" if r.enabled else "no", _filter(r), _actions(r)] for r in rules_now],
            sys.stdout,
        ),
    )


def _filter(rule: LifecycleRule) -> str:
    """Every part of a rule's filter (a rule limited by a tag or a size must not read as
    one that reaches every object)."""
    said = [f"prefix {rule.prefix}"] if rule.prefix else []
    said += [f"tag {name}={value}" for name, value in sorted(rule.tags.items())]
    if rule.size_greater_than is not None:
        said.append(f"size > {rule.size_greater_than}")
    if rule.size_less_than is not None:
        said.append(f"size < {rule.size_less_than}")
    return ", ".join(said) or "every object"


def _actions(rule: LifecycleRule) -> str:
    said = []
    if rule.expiration_days is not None:
        said.append(f"expire after {rule.expiration_days}d")
    if rule.expiration_date is not None:
        said.append(f"expire on {rule.expiration_date}")
    if rule.expired_object_delete_marker:
        said.append("remove lone delete markers")
    if rule.noncurrent_days is not None:
        keep = rule.newer_noncurrent_versions
        said.append(
            f"noncurrent after {rule.noncurrent_days}d" + (f" (keep {keep})" if keep else "")
        )
    if rule.abort_incomplete_multipart_upload_days is not None:
        said.append(f"abort uploads after {rule.abort_incomplete_multipart_upload_days}d")
    return ", ".join(said)


def _lock_of(version: FileVersion) -> str:
    parts = []
    if version.retention is not None:
        parts.append(f"{version.retention.mode} until {version.retention.retain_until}")
    if version.legal_hold:
        parts.append("legal hold")
    return ", ".join(parts)


def buckets_versioning(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        bucket = client.update_bucket(bucket.id, versioning=args.state)
    output(
        args, bucket, lambda: print(f"{bucket.id}  {bucket.name}  versioning {bucket.versioning}")
    )


def files_versions(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        versions = list(
            client.iter_versions(bucket.id, prefix=args.prefix or "", key=args.file_key)
        )
    rows: list[list[object]] = [
        [
            v.uploaded_at,
            "marker" if v.delete_marker else human_size(v.size),
            "*" if v.is_latest else "",
            v.version_id,
            v.key,
            _lock_of(v),
        ]
        for v in versions
    ]
    output(
        args,
        versions,
        lambda: table(["UPLOADED", "SIZE", "LATEST", "VERSION", "KEY", "LOCK"], rows, sys.stdout),
    )


def files_restore(args: argparse.Namespace) -> None:
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        file = client.restore_version(bucket.id, args.file_key, args.version_id)
    output(
        args,
        file,
        lambda: print(f"restored {file.key} from {args.version_id} as {file.version_id}"),
    )


def files_lock(args: argparse.Namespace) -> None:
    retention: RetentionRule | UnsetType | None = UNSET
    if args.no_retention:
        retention = None
    elif args.mode or args.until:
        if not (args.mode and args.until):
            raise SystemExit("a retention needs both --mode and --until")
        retention = RetentionRule(mode=args.mode, retain_until=args.until)
    hold = UNSET if args.legal_hold is None else args.legal_hold == "on"
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        version = client.protect_version(
            bucket.id,
            args.file_key,
            args.version_id,
            retention=retention,
            legal_hold=hold,
            bypass_governance=args.bypass_governance,
        )
    output(
        args,
        version,
        lambda: print(f"{version.key} {version.version_id}: {_lock_of(version) or 'unlocked'}"),
    )


def files_tag(args: argparse.Namespace) -> None:
    """Show a file's tags, or replace them (`key=value` pairs; `--clear` removes them)."""
    pairs: dict[str, str] | None = None
    if args.clear:
        pairs = {}
    elif args.tags:
        pairs = {}
        for item in args.tags:
            name, sep, value = item.partition("=")
            if not sep:
                raise SystemExit(f"a tag is key=value, not {item!r}")
            pairs[name] = value
    with client_of(args) as client:
        bucket = resolve_bucket(client, args.bucket)
        file = (
            client.get_file(bucket.id, args.file_key)
            if pairs is None
            else client.update_file(bucket.id, args.file_key, tags=pairs)
        )
    rows: list[list[object]] = [[k, v] for k, v in sorted(file.tags.items())]
    output(args, file.tags, lambda: table(["TAG", "VALUE"], rows, sys.stdout))
