"""GET /v1/organization: the key's organization, its plan, limits and usage."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .auth import Principal
from .context import context
from .envelope import ok
from .resources import organization_shape


async def get_organization(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    org = await engine.orgs.get(principal.key.org_id)
    return ok(organization_shape(org, engine.orgs.plan(org)))
