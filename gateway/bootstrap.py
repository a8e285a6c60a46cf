"""First start: the `default` organization and its admin key."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from storage.engine import Engine
from storage.models import API_SCOPES

ADMIN_KEY_FILE = "admin.key"
FIRST_ORGANIZATION = ("default", "pro")
"""The name and plan of the organization a first start makes."""


def write_secret_file(path: Path, secret: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")
    os.chmod(path, 0o600)


async def ensure_admin_key(engine: Engine, data_dir: Path, out: TextIO) -> None:
    """On an index with no organization, make `default` (pro) and an all-scope admin key.

    The key is printed once and written to <data-dir>/admin.key (0600). Later starts only
    say where the file is; a data dir that lost the file does not get a new key.
    """
    path = data_dir / ADMIN_KEY_FILE
    if await engine.orgs.count() > 0:
        if path.exists():
            print(f"bucketd: the admin key is in {path}", file=out, flush=True)
        return
    org = await engine.orgs.create(*FIRST_ORGANIZATION)
    _key, secret = await engine.keys.create(org.id, "admin", list(API_SCOPES))
    write_secret_file(path, secret)
    print(
        f"bucketd: first start; created organization {org.name!r} ({org.id}, plan "
        f"{org.plan}) and an admin key with every API scope. It is shown once here and saved "
        f"to {path} (mode 0600):",
        file=out,
        flush=True,
    )
    print(secret, file=out, flush=True)
