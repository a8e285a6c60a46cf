"""Transactions on organizations and API keys."""

from __future__ import annotations

from ..models import ApiKey, Organization
from .rows import KEY_COLUMNS, ORG_COLUMNS, insert, key_from_row, org_from_row
from .sql import Notify, Script, one, point, read, rows, run, value, write

REVOCATIONS = "bucketd_revocations"
"""The channel on which every revoked key's id is announced."""
KEY_ROW = (
    "id",
    "org_id",
    "name",
    "secret_hash",
    "last4",
    "scopes",
    "bucket_id",
    "created_at",
    "expires_at",
    "access_key_id",
    "secret_sealed",
)


@read
def count_organizations() -> Script[int]:
    count = yield value("SELECT COUNT(*) FROM organizations")
    return int(count)


@write
def create_organization(org: Organization) -> Script[None]:
    columns = ("id", "name", "plan", "created_at")
    yield insert("organizations", columns, {c: getattr(org, c) for c in columns})


@point
def get_organization(org_id: str) -> Script[Organization | None]:
    row = yield one(f"SELECT {ORG_COLUMNS} FROM organizations WHERE id = ?", org_id)
    return None if row is None else org_from_row(row)


@write
def create_key(key: ApiKey, secret_hash: bytes, secret_sealed: bytes | None) -> Script[None]:
    values = {c: getattr(key, c, None) for c in KEY_ROW}
    values.update(scopes=" ".join(key.scopes), secret_hash=secret_hash, secret_sealed=secret_sealed)
    yield insert("api_keys", KEY_ROW, values)


@point
def find_key(secret_hash: bytes) -> Script[tuple[ApiKey, bytes] | None]:
    row = yield one(
        f"SELECT {KEY_COLUMNS}, secret_hash FROM api_keys WHERE secret_hash = ?", secret_hash
    )
    return None if row is None else (key_from_row(row[:-1]), bytes(row[-1]))


@point
def find_key_by_id(key_id: str) -> Script[tuple[ApiKey, bytes] | None]:
    """A key, whatever its organization, with the hash of its secret."""
    row = yield one(f"SELECT {KEY_COLUMNS}, secret_hash FROM api_keys WHERE id = ?", key_id)
    return None if row is None else (key_from_row(row[:-1]), bytes(row[-1]))


@point
def find_access_key(access_key_id: str) -> Script[tuple[ApiKey, bytes] | None]:
    """An S3 credential and its sealed secret."""
    row = yield one(
        f"SELECT {KEY_COLUMNS}, secret_sealed FROM api_keys WHERE access_key_id = ?",
        access_key_id,
    )
    if row is None or row[-1] is None:
        return None
    return key_from_row(row[:-1]), bytes(row[-1])


@point
def get_key(org_id: str, key_id: str) -> Script[ApiKey | None]:
    row = yield one(
        f"SELECT {KEY_COLUMNS} FROM api_keys WHERE org_id = ? AND id = ?", org_id, key_id
    )
    return None if row is None else key_from_row(row)


@point
def list_keys(
    org_id: str, bucket_id: str | None, after: str | None, limit: int
) -> Script[list[ApiKey]]:
    sql, args = page_query("api_keys", KEY_COLUMNS, org_id, after, limit, bucket_id=bucket_id)
    found = yield rows(sql, *args)
    return [key_from_row(row) for row in found]


@write
def revoke_key(org_id: str, key_id: str, at: str) -> Script[None]:
    """Revoke, and tell every process watching revocations once it commits."""
    yield run(
        "UPDATE api_keys SET revoked_at = ? WHERE org_id = ? AND id = ? AND revoked_at IS NULL",
        at,
        org_id,
        key_id,
    )
    yield Notify(REVOCATIONS, key_id)


def page_query(
    table: str, columns: str, org_id: str, after: str | None, limit: int, **equal: str | None
) -> tuple[str, list[object]]:
    """One page of an organization's rows by id; `equal` adds column = value conditions for
    the values that are not None."""
    sql = f"SELECT {columns} FROM {table} WHERE org_id = ? AND id > ?"
    args: list[object] = [org_id, after or ""]
    for column, wanted in equal.items():
        if wanted is not None:
            sql += f" AND {column} = ?"
            args.append(wanted)
    return sql + " ORDER BY id LIMIT ?", [*args, limit]


@point
def find_organization_named(name: str) -> Script[Organization | None]:
    """The oldest organization of that name."""
    row = yield one(
        f"SELECT {ORG_COLUMNS} FROM organizations WHERE name = ? ORDER BY created_at, id LIMIT 1",
        name,
    )
    return None if row is None else org_from_row(row)


@write
def set_plan(org_id: str, plan: str) -> Script[None]:
    yield run("UPDATE organizations SET plan = ? WHERE id = ?", plan, org_id)


@read
def active_keys_named(org_id: str, name: str) -> Script[list[ApiKey]]:
    found = yield rows(
        f"SELECT {KEY_COLUMNS} FROM api_keys "
        "WHERE org_id = ? AND name = ? AND revoked_at IS NULL ORDER BY id",
        org_id,
        name,
    )
    return [key_from_row(row) for row in found]


@write
def replace_keys(
    org_id: str,
    old_ids: list[str],
    key: ApiKey,
    secret_hash: bytes,
    secret_sealed: bytes | None,
    at: str,
) -> Script[None]:
    """Revoke `old_ids` and make `key`, in one transaction: a rotated credential never
    leaves two behind. A revoked key gives up its access key id, which `key` may reuse."""
    for old_id in old_ids:
        yield from revoke_key(org_id, old_id, at)
        yield run("UPDATE api_keys SET access_key_id = NULL WHERE id = ?", old_id)
    yield from create_key(key, secret_hash, secret_sealed)


@write
def reinstate_key(
    org_id: str, old_ids: list[str], key_id: str, access_key_id: str, at: str
) -> Script[None]:
    """Revoke `old_ids` and make the revoked `key_id` valid again under `access_key_id`
    (the one its secret was sealed with), in one transaction, as `replace_keys` does."""
    for old_id in old_ids:
        yield from revoke_key(org_id, old_id, at)
        yield run("UPDATE api_keys SET access_key_id = NULL WHERE id = ?", old_id)
    yield run(
        "UPDATE api_keys SET revoked_at = NULL, access_key_id = ? WHERE id = ?",
        access_key_id,
        key_id,
    )
    yield Notify(REVOCATIONS, key_id)  # a process that saw it revoked looks again


@read
def list_organizations() -> Script[list[Organization]]:
    found = yield rows(f"SELECT {ORG_COLUMNS} FROM organizations ORDER BY created_at, id")
    return [org_from_row(row) for row in found]


@read
def page_of_organizations(after: str | None, limit: int) -> Script[list[Organization]]:
    found = yield rows(
        f"SELECT {ORG_COLUMNS} FROM organizations WHERE id > ? ORDER BY id LIMIT ?",
        after or "",
        limit,
    )
    return [org_from_row(row) for row in found]
