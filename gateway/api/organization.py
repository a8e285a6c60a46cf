"""GET /v1/organization: the key's organization, its plan, limits and usage."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.api.resources import organization_shape
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.envelope import ok
from storage.models import Actor


async def get_organization(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    org = await engine.orgs.get(principal.key.org_id)
    held = await engine.snapshots.held_bytes(Actor(org_id=org.id))
    return ok(organization_shape(org, engine.orgs.plan(org), held))
