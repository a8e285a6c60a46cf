"""GET /v1/organization: the key's organization, its plan, limits and usage."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from .auth import require
from .context import context
from .envelope import ok
from .resources import organization_json


async def get_organization(request: Request) -> Response:
    principal = require(request, None)
    engine = context(request).engine
    org = await engine.get_organization(principal.key.org_id)
    return ok(organization_json(org, engine.plan(org)))
