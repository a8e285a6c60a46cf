"""The operator's calls (/v1/orgs: every organization, its plan and its keys; the key
needs the scope orgs:manage), built once for both clients (`aio_orgs.py` and its
synchronous twin `orgs.py` only send them)."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

from . import shapes
from .calls import Call, create_key, data, nothing, page_params
from .models import Key, Organization, Page, decode


def org_path(org_id: str) -> str:
    return f"/v1/orgs/{quote(org_id, safe='')}"


def list_call(limit: int | None, cursor: str | None) -> Call[Page[Organization]]:
    return Call(
        "GET",
        "/v1/orgs",
        lambda r: Page.from_json(r.json(), Organization),
        page_params(limit, cursor),
    )


def create_call(name: str, plan: str) -> Call[Organization]:
    return Call(
        "POST",
        "/v1/orgs",
        lambda r: decode(data(r), Organization),
        body=shapes.CreateOrganization(name=name, plan=plan),
        idempotent=False,
    )


def get_call(org_id: str) -> Call[Organization]:
    return Call("GET", org_path(org_id), lambda r: decode(data(r), Organization))


def update_call(org_id: str, plan: str) -> Call[None]:
    return Call("PATCH", org_path(org_id), nothing, body=shapes.UpdateOrganization(plan=plan))


def keys_call(org_id: str, limit: int | None, cursor: str | None) -> Call[Page[Key]]:
    return Call(
        "GET",
        f"{org_path(org_id)}/keys",
        lambda r: Page.from_json(r.json(), Key),
        page_params(limit, cursor),
    )


def create_key_call(
    org_id: str,
    name: str,
    scopes: list[str],
    bucket_id: str | None,
    expires_at: datetime | str | None,
    s3: bool,
) -> Call[Key]:
    """`calls.create_key` (the caller's own organization) sent to the organization's path."""
    own = create_key(name, scopes, bucket_id, expires_at, s3)
    return Call(own.method, f"{org_path(org_id)}/keys", own.parse, body=own.body, idempotent=False)


def revoke_key_call(org_id: str, key_id: str) -> Call[None]:
    return Call("DELETE", f"{org_path(org_id)}/keys/{quote(key_id, safe='')}", nothing)
