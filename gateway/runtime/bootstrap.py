"""Start-up: the `default` organization and its admin key on a first start, and what the
environment asks for (`BUCKETD_ACCESS_KEY_ID`, `BUCKETD_BUCKETS`, `BUCKETD_PLAN`)."""

from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import TextIO

from gateway.settings import BootstrapSettings
from storage.datadir import fsync_dir
from storage.engine import Engine
from storage.errors import BucketNotFound, InvalidInput, SecretUnsealable
from storage.models import ADMIN_SCOPES, API_SCOPES, Actor, ApiKey
from storage.rules import ids
from storage.rules.validation import default_region

ADMIN_KEY_FILE = "admin.key"
FIRST_ORGANIZATION = ("default", "pro")
"""The name and plan of the organization a first start makes."""


def write_secret_file(path: Path, secret: str) -> None:
    """Written durably (the file, then its folder), whatever the fsync setting: the key is
    shown once, and a data dir that lost the file after a power cut gets no new one."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(path, 0o600)
    fsync_dir(path.parent)


async def ensure_admin_key(engine: Engine, data_dir: Path, out: TextIO) -> None:
    """On an index with no organization, make `default` (pro) and the admin key: every
    /v1 scope of its organization and the operator's (orgs:manage: every organization and
    its keys, so `bucketd orgs ...` and `keys ...` work over the API from anywhere).

    The key is printed once and written to <data-dir>/admin.key (0600). Later starts only
    say where the file is; a data dir that lost the file does not get a new key.
    """
    path = data_dir / ADMIN_KEY_FILE
    if await engine.orgs.count() > 0:
        if path.exists():
            print(f"bucketd: the admin key is in {path}", file=out, flush=True)
        return
    org = await engine.orgs.create(*FIRST_ORGANIZATION)
    _key, secret = await engine.keys.create(org.id, "admin", list(ADMIN_SCOPES))
    write_secret_file(path, secret)
    print(
        f"bucketd: first start; created organization {org.name!r} ({org.id}, plan "
        f"{org.plan}) and an admin key with every /v1 scope, the operator's orgs:manage "
        f"included (GET /metrics takes a key made with `bucketd keys create --scopes "
        f"metrics:read`). It is shown once here and saved to {path} (mode 0600):",
        file=out,
        flush=True,
    )
    print(secret, file=out, flush=True)


BOOTSTRAP_KEY = "bootstrap"
"""The name of the credential made from BUCKETD_ACCESS_KEY_ID (one active at a time)."""


DEV_CREDENTIALS = ("bucketd", "bucketd-dev-secret")
"""`bucketd dev`'s S3 credentials when the environment gives none (documented; dev only)."""


async def apply_bootstrap(engine: Engine, boot: BootstrapSettings, out: TextIO) -> None:
    """Make what the environment (or `[bootstrap]`) asks for in the default organization:
    its plan, the S3 credential (rotating a different one: the old is revoked in the same
    transaction) and the buckets, provisioned before this returns. Run again with the same
    values, it changes nothing. The secret is never printed. A data dir that `bucketd dev`
    gave its well-known credential loses it when served without asking for it."""
    if (boot.access_key_id, boot.secret_access_key) != DEV_CREDENTIALS:
        await _revoke_dev_credential(engine, out)
    if not (boot.access_key_id or boot.buckets or boot.plan):
        return
    org = await engine.orgs.named(FIRST_ORGANIZATION[0])
    if org is None:
        org = await engine.orgs.create(*FIRST_ORGANIZATION)
    if boot.plan and org.plan != boot.plan:
        org = await engine.orgs.set_plan(org.id, boot.plan)
        print(f"bucketd: organization {org.name!r} is on the {org.plan} plan", file=out)
    if boot.access_key_id:
        await _credential(engine, org.id, boot.access_key_id, boot.secret_access_key, out)
    actor = Actor(org_id=org.id)
    region = default_region(engine.config.regions)
    for name in boot.buckets:
        try:
            bucket = await engine.buckets.get_by_name(actor, name)
        except BucketNotFound:
            bucket = await engine.buckets.create(actor, name, region, at_once=True)
            print(f"bucketd: created bucket {name!r} ({bucket.id})", file=out)
        if bucket.status == "provisioning":  # made by a run that stopped before it was
            await engine.provisioning.provision_now(bucket.id)
            bucket = await engine.buckets.get(actor, bucket.id)
        if bucket.status == "failed":
            raise InvalidInput(
                f"bucket {name!r} from BUCKETD_BUCKETS failed to provision: "
                f"{bucket.status_reason}; delete it and start again"
            )
        if bucket.status != "active":  # a live claim elsewhere: it is being provisioned
            print(f"bucketd: bucket {name!r} is still {bucket.status}", file=out)
    out.flush()


async def _revoke_dev_credential(engine: Engine, out: TextIO) -> None:
    try:
        found = await engine.keys.find_s3(DEV_CREDENTIALS[0])
    except SecretUnsealable:  # another secrets.key: it cannot be the published secret here
        print("bucketd: the S3 credential 'bucketd' does not unseal here; left", file=out)
        return
    if found is None or found[0].revoked_at is not None:
        return
    key, secret = found
    if not hmac.compare_digest(secret, DEV_CREDENTIALS[1]):
        return
    await engine.keys.revoke(Actor(org_id=key.org_id), key.id)
    print(
        f"bucketd: revoked the development S3 credential {DEV_CREDENTIALS[0]} ({key.id}): "
        "its secret is published; `bucketd dev` makes it again, or set "
        "BUCKETD_ACCESS_KEY_ID and BUCKETD_SECRET_ACCESS_KEY",
        file=out,
    )


async def _credential(
    engine: Engine, org_id: str, access_key_id: str, secret: str, out: TextIO
) -> None:
    current = await engine.keys.active_named(org_id, BOOTSTRAP_KEY)
    for key in current:
        if key.access_key_id == access_key_id:
            found = await engine.keys.find_s3(access_key_id)
            if found is not None and hmac.compare_digest(found[1], secret) and len(current) == 1:
                return
    replacing = [key.id for key in current]
    again, released = await _earlier_holders(engine, access_key_id, secret, current, out)
    if again is not None:
        others = [id_ for id_ in replacing if id_ != again.id]
        key = await engine.keys.reinstate(again.id, access_key_id, others)
    else:
        key, _ = await engine.keys.create(
            org_id,
            BOOTSTRAP_KEY,
            list(API_SCOPES),
            s3=True,
            credentials=(access_key_id, secret),
            replacing=replacing + released,
        )
    verb = "made valid again" if again is not None else "rotated" if current else "created"
    source = (
        "bucketd dev's development credential"
        if (access_key_id, secret) == DEV_CREDENTIALS
        else "BUCKETD_ACCESS_KEY_ID"
    )
    print(
        f"bucketd: {verb} the S3 credential {access_key_id} ({key.id}) from {source} with "
        "every /v1 scope; use it for S3, and for /v1 as HTTP Basic auth (access key id and "
        "secret)",
        file=out,
    )


async def _earlier_holders(
    engine: Engine, access_key_id: str, secret: str, rotated: list[ApiKey], out: TextIO
) -> tuple[ApiKey | None, list[str]]:
    """The keys, other than the credential being rotated, that hold the secret or the
    access key id already (each is unique in the index): the revoked key to make valid
    again, and the revoked keys that give up the access key id to the new secret.

    The same secret is refused once revoked: a revocation (`bucketd keys revoke`, of a
    leaked secret say, or a rotation) is not undone by a restart that still has the old
    environment. Only `bucketd dev` has its revoked credential back: its secret is
    published anyway, and the message that revoked it says `bucketd dev` makes it again."""
    ours = {key.id for key in rotated}
    found = await engine.keys.find(ids.hash_secret(secret))
    if found is not None:
        key = found[0]
        if key.id in ours and key.access_key_id == access_key_id:
            return key, []  # kept; the other active ones are revoked
        if key.id in ours:  # the credential being rotated, under another access key id
            raise InvalidInput(
                "BUCKETD_ACCESS_KEY_ID changed and BUCKETD_SECRET_ACCESS_KEY did not: a new "
                "access key id takes a new secret"
            )
        if key.revoked_at is None:
            raise InvalidInput(
                f"BUCKETD_SECRET_ACCESS_KEY is the secret of another key ({key.id}); "
                "choose another secret"
            )
        if (access_key_id, secret) != DEV_CREDENTIALS:
            raise InvalidInput(
                f"the secret BUCKETD_SECRET_ACCESS_KEY gives is the one of the S3 credential "
                f"{key.access_key_id or access_key_id} ({key.id}), revoked at "
                f"{key.revoked_at}: a revoked secret is not made valid again. Set a new "
                "BUCKETD_SECRET_ACCESS_KEY (the access key id may stay), or unset both"
            )
        return key, []
    try:
        holder = await engine.keys.find_s3(access_key_id)
    except SecretUnsealable:
        raise InvalidInput(
            f"BUCKETD_ACCESS_KEY_ID {access_key_id!r} is the access key id of a credential "
            "this data dir's secrets.key does not unseal; choose another access key id"
        ) from None
    if holder is None or holder[0].id in ours:
        return None, []
    key = holder[0]
    if key.revoked_at is None:
        raise InvalidInput(
            f"BUCKETD_ACCESS_KEY_ID {access_key_id!r} is the S3 credential of the key "
            f"{key.id} ({key.name!r}); choose another access key id, or revoke that key"
        )
    print(
        f"bucketd: the revoked S3 credential {access_key_id} ({key.id}) gives its access "
        "key id to the new secret",
        file=out,
    )
    return None, [key.id]
