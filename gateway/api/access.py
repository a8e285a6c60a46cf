"""/v1's side of the one access decision (`storage/rules/access.py`): the requester of a request
(its key, a signed URL's signer confined to one file, or nobody), the decision for the
route's own bucket or file before the handler runs (`authorize`), and for every further
resource or action a handler reaches (`also`: the new key of a rename, the version a
restore reads, the retention a request bypasses, the tags or settings it writes).

A route that declares no action on a bucket's path is its organization's alone; its
handler decides each action it takes with `also`, so a bucket policy's Deny binds /v1 as it
binds S3. The operator's routes (scope `orgs:manage`) are decided by `operator`, for the
organization their path names.
"""

from __future__ import annotations

from starlette.requests import Request

from gateway.api.operation import Operation
from gateway.context import context
from gateway.http.auth import PUBLIC_READER, Principal, principal_of
from gateway.http.inputs import file_key, version_param
from storage.errors import AccessDenied, BucketNotFound
from storage.models import Actor, ApiKey, Bucket, FileRecord
from storage.rules.access import Requester, shown


def requester(request: Request, key: ApiKey | None) -> Requester:
    """Who asks, for the decision: the key's organization, scopes and bucket restriction
    (None: nobody), from the client's address (a trusted proxy's forwarded one)."""
    client = request.client
    ip = client.host if client else ""
    if key is None:
        return Requester(None, source_ip=ip)
    return Requester(key.org_id, key.scopes, key.bucket_id, ip)


def _decided(request: Request) -> tuple[Requester, Bucket]:
    """The requester and the bucket `authorize` decided for."""
    state = request.scope["state"]
    return state["requester"], state["bucket"]


async def authorize(
    request: Request, operation: Operation, principal: Principal | None
) -> Principal:
    """The principal the handler acts as, its actor decided for the route's bucket (and
    file, and the version `versionId` names). `principal` None: a request without a key
    (a public read), which is refused with the usual 401 unless the bucket grants it."""
    engine = context(request).engine
    bucket_id = request.path_params["bucket_id"]
    try:
        bucket = await engine.buckets.get_any(bucket_id)
    except BucketNotFound:
        raise _not_found(bucket_id, engine.config.id_prefix) from None
    who = requester(request, None if principal is None else principal.key)
    request.scope["state"].update(bucket=bucket, requester=who)
    if operation.action is None:
        if principal is None:
            return principal_of(request)
        actor = Actor(org_id=bucket.org_id, bucket_id=principal.key.bucket_id, decided=bucket)
        if principal.key.org_id != bucket.org_id or not actor.can_see(bucket.id):
            raise BucketNotFound("bucket not found")
    else:
        if not operation.outsiders and (principal is None or principal.key.org_id != bucket.org_id):
            raise BucketNotFound("bucket not found")
        key = file_key(request) if "key" in request.path_params else None
        named, version_id = False, None
        if "version" in operation.touches:
            named, version_id = version_param(request)
        try:
            actor = await engine.access.check(
                who,
                operation.action,
                bucket,
                key,
                named=named,
                version_id=version_id,
                prefix=_prefix(request, operation) if key is None else None,
                scope=operation.scope,
            )
        except AccessDenied:
            if principal is None:
                return principal_of(request)  # 401: send a key
            raise
        if "keys" in operation.touches:
            await also(request, "s3:ListBucket", None)
    if principal is None:
        principal = await _anonymous(request, bucket)
    return Principal(principal.key, principal.org, actor)


async def operator(request: Request, principal: Principal) -> Principal:
    """The principal an operator's route acts as: decided for the key
    (`storage.rules.access.decide_operator`), then acting for the organization the path
    names (`org_id`; 404 when there is none), its keys unrestricted by the operator's."""
    engine = context(request).engine
    engine.access.check_operator(requester(request, principal.key))
    org_id = request.path_params.get("org_id")
    if org_id is None:
        return principal
    org = await engine.orgs.get(org_id)
    return Principal(principal.key, principal.org, Actor(org_id=org.id))


def _prefix(request: Request, operation: Operation) -> str | None:
    for name in operation.prefix_params:
        if name in request.query_params:
            return request.query_params[name]
    return None


def _not_found(bucket_id: str, id_prefix: str) -> BucketNotFound:
    """Not found; with a hint when what was given is no bucket id at all (a name: /v1
    addresses buckets by id, S3 by name). It says nothing of other organizations."""
    if bucket_id.startswith(id_prefix):
        return BucketNotFound("bucket not found")
    shown = bucket_id if len(bucket_id) <= 80 else bucket_id[:80] + "..."
    return BucketNotFound(
        f"bucket not found: {shown!r} is not a bucket id ({id_prefix}...); /v1 names a "
        "bucket by its id, which GET /v1/buckets lists beside each name"
    )


async def _anonymous(request: Request, bucket: Bucket) -> Principal:
    """Who a request without a key acts as once the bucket grants it something."""
    if bucket.public:
        request.scope["state"]["public_bucket"] = bucket
    return Principal(reader(bucket), await context(request).engine.orgs.get(bucket.org_id))


async def also(
    request: Request,
    action: str,
    key: str | None,
    named: bool = False,
    version_id: str | None = None,
) -> Actor:
    """The decision for a further action or resource of the route's bucket."""
    who, bucket = _decided(request)
    return await context(request).engine.access.check(
        who, action, bucket, key, named=named, version_id=version_id
    )


def visible(request: Request, record: FileRecord, named: bool = False) -> FileRecord:
    """The version as the requester may see it (`storage.rules.access.shown`)."""
    who, bucket = _decided(request)
    return shown(who, bucket, record, named)


def also_every_object(request: Request, actions: tuple[str, ...]) -> None:
    """The decision for actions on every object of the route's bucket at once."""
    who, bucket = _decided(request)
    context(request).engine.access.check_every_object(who, actions, bucket)


async def every_object_and_setting(
    request: Request,
    principal: Principal,
    bucket: Bucket,
    object_actions: tuple[str, ...],
    setting_actions: tuple[str, ...],
) -> None:
    """The decision for a request that rewrites a bucket it does not name in its path (a
    snapshot's restore): `object_actions` on every object at once, as a forced deletion's,
    and each of `setting_actions` on the bucket, so that its policy's Deny binds it."""
    engine = context(request).engine
    who = requester(request, principal.key)
    engine.access.check_every_object(who, object_actions, bucket)
    for action in setting_actions:
        await engine.access.check(who, action, bucket, None)


def reader(bucket: Bucket) -> ApiKey:
    """The key a request without one goes by once a bucket grants it (logs and metrics
    name it `public`); what it may do was decided without it, as nobody's."""
    return ApiKey(
        id=PUBLIC_READER,
        org_id=bucket.org_id,
        name="public reader",
        scopes=("files:read",),
        bucket_id=bucket.id,
        created_at=bucket.created_at,
        expires_at=None,
        revoked_at=None,
        last4="",
    )
