"""The operator's /v1 operations: every organization, its plan and its keys (part of the
table in `routes.py`). Each needs the scope orgs:manage and is decided by
`access.operator`; the key routes act for the organization the path names, with the same
rules of escalation as /v1/keys."""

from __future__ import annotations

from bucketd_client import shapes
from gateway.api import keys, orgs
from gateway.api.operation import CURSOR, LIMIT, Operation
from storage.models import ORGS_MANAGE

ORGS = "/orgs"
ORG = "/orgs/{org_id}"
ORG_KEYS = ORG + "/keys"

ORG_OPERATIONS = (
    Operation(
        method="GET",
        path=ORGS,
        operation_id="listOrganizations",
        summary="List every organization of the server, ordered by id (the operator's).",
        handler=orgs.list_orgs,
        scope=ORGS_MANAGE,
        answer="list",
        shape=shapes.Organization,
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="POST",
        path=ORGS,
        operation_id="createOrganization",
        summary="Create an organization on a plan; a name another has is refused (409).",
        handler=orgs.create_org,
        scope=ORGS_MANAGE,
        answer="created",
        shape=shapes.Organization,
        body=shapes.CreateOrganization,
        errors=(409, 413),
        links={"org_id": "$response.body#/data/id"},
        link_to=("getOrganizationById", "updateOrganization", "createOrganizationKey"),
    ),
    Operation(
        method="GET",
        path=ORG,
        operation_id="getOrganizationById",
        summary="Get any organization: plan, limits and usage.",
        handler=orgs.get_org,
        scope=ORGS_MANAGE,
        answer="one",
        shape=shapes.Organization,
        errors=(404,),
    ),
    Operation(
        method="PATCH",
        path=ORG,
        operation_id="updateOrganization",
        summary="Move an organization to another plan (its keys see it within seconds).",
        handler=orgs.update_org,
        scope=ORGS_MANAGE,
        answer="written",
        body=shapes.UpdateOrganization,
        errors=(404, 413),
    ),
    Operation(
        method="GET",
        path=ORG_KEYS,
        operation_id="listOrganizationKeys",
        summary="List an organization's API keys and S3 credentials; secrets are never listed.",
        handler=keys.list_keys,
        scope=ORGS_MANAGE,
        answer="list",
        shape=shapes.Key,
        errors=(404,),
        params=(LIMIT, CURSOR),
    ),
    Operation(
        method="POST",
        path=ORG_KEYS,
        operation_id="createOrganizationKey",
        summary="Create a key in the organization, with at most the caller's scopes; the "
        "secret is shown once.",
        handler=keys.create_key,
        scope=ORGS_MANAGE,
        answer="created",
        shape=shapes.Key,
        body=shapes.CreateKey,
        errors=(404, 413),
        links={"org_id": "$request.path.org_id", "key_id": "$response.body#/data/id"},
        link_to=("revokeOrganizationKey",),
    ),
    Operation(
        method="DELETE",
        path=ORG_KEYS + "/{key_id}",
        operation_id="revokeOrganizationKey",
        summary="Revoke a key of the organization.",
        handler=keys.revoke_key,
        scope=ORGS_MANAGE,
        answer="written",
        errors=(404,),
    ),
)
