"""The operator's organization endpoints: /v1/orgs and /v1/orgs/{org_id} (their keys are
`keys.py`'s handlers, acting for the organization the path names). Every route here was
decided by `access.operator` before its handler runs."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api.pagination import id_cursor, parse_limit
from gateway.api.resources import organization_shape
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.envelope import created, ok, page, written
from gateway.http.inputs import read_json
from storage.engine import Engine
from storage.models import Actor, Organization


async def _shape(engine: Engine, org: Organization) -> shapes.Organization:
    held = await engine.snapshots.held_bytes(Actor(org_id=org.id))
    return organization_shape(org, engine.orgs.plan(org), held)


async def list_orgs(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    limit = parse_limit(request.query_params)
    after = id_cursor(request.query_params, "orgs", ctx.settings.id_prefix)
    result = await ctx.engine.orgs.list(after, limit)
    return page([await _shape(ctx.engine, org) for org in result.items], result.last)


async def create_org(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.CreateOrganization)
    org = await ctx.engine.orgs.create(body.name, body.plan, unique=True)
    return created(await _shape(ctx.engine, org))


async def get_org(request: Request, principal: Principal) -> Response:
    engine = context(request).engine
    return ok(await _shape(engine, await engine.orgs.get(principal.actor.org_id)))


async def update_org(request: Request, principal: Principal) -> Response:
    ctx = context(request)
    body = await read_json(request, ctx.settings.max_json_bytes, shapes.UpdateOrganization)
    org_id = principal.actor.org_id
    if isinstance(body.plan, str):
        await ctx.engine.orgs.set_plan(org_id, body.plan)
    return written("organization", org_id)
