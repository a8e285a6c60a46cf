"""Start-up: the `default` organization and its admin key on a first start, and what the
environment asks for (`BUCKETD_ACCESS_KEY_ID`, `BUCKETD_BUCKETS`, `BUCKETD_PLAN`)."""

from __future__ import annotations

import hmac
import os
from pathlib import Path
from typing import TextIO

from gateway.settings import BootstrapSettings
from storage.engine import Engine
from storage.errors import BucketNotFound, InvalidInput, SecretUnsealable
from storage.models import ADMIN_SCOPES, API_SCOPES, Actor
from storage.rules.validation import default_region

ADMIN_KEY_FILE = "admin.key"
FIRST_ORGANIZATION = ("default", "pro")
"""The name and plan of the organization a first start makes."""


def write_secret_file(path: Path, secret: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)


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
    key, _ = await engine.keys.create(
        org_id,
        BOOTSTRAP_KEY,
        list(API_SCOPES),
        s3=True,
        credentials=(access_key_id, secret),
        replacing=[key.id for key in current],
    )
    verb = "rotated" if current else "created"
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
