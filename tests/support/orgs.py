"""Organizations and keys made for a test, through the CLI or the API."""

from __future__ import annotations

from tests.support.live import LiveServer
from tests.support.names import unique_name

ALL_SCOPES = ["buckets:read", "buckets:write", "files:read", "files:write", "keys:manage"]


def make_org(server: LiveServer, plan: str = "pro") -> str:
    return server.cli("orgs", "create", unique_name("org"), "--plan", plan).strip().splitlines()[-1]


def make_key(server: LiveServer, org: str, scopes: list[str], *extra: str) -> str:
    out = server.cli("keys", "create", "--org", org, "--scopes", ",".join(scopes), *extra)
    return out.strip().splitlines()[-1]
