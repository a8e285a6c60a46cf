"""What a /v1 request reads beyond its path, read only through here (`s3/touches.py` is the
S3 endpoint's twin).

Each route declares the kinds it reads (`Operation.touches`); reading one it does not
declare is a programming error (a 500, which tests/test_access_declarations.py would see),
so no handler reaches a version, a bypass of retention or a tag set that its declaration,
and so its access decision, does not name.
"""

from __future__ import annotations

from starlette.requests import Request

VERSION_ID = "versionId"
BYPASS = "bypassGovernance"
FORCE = "force"
TAGGING = "tagging"

QUERY = {"version": VERSION_ID, "bypass": BYPASS, "force": FORCE}
HEADERS = {"tagging": TAGGING}
ACTIONS: dict[str, tuple[str, ...]] = {
    "version": (),
    "bypass": ("s3:BypassGovernanceRetention",),
    "tagging": ("s3:PutObjectTagging",),
    "rename": (
        "s3:GetObject",
        "s3:DeleteObject",
        "s3:PutObject",
        "s3:GetObjectTagging",
        "s3:PutObjectTagging",
    ),
    "restore": ("s3:GetObjectVersion", "s3:PutObject"),
    "lock": ("s3:PutObjectRetention", "s3:PutObjectLegalHold"),
    "force": ("s3:DeleteObject", "s3:DeleteObjectVersion"),
    "keys": ("s3:ListBucket",),
}
"""The actions each kind is decided as (docs/api.md lists them per route); `version` turns
the route's own action into its version form; `rename`, `restore` and `lock` name a key,
a version or a protection in the JSON body; `force` deletes every file and version of the
bucket, decided for all its keys at once (`storage.rules.access.decide_every_object`); `keys`:
the route shows or sends the keys of the bucket's files (a webhook's deliveries)."""


class Undeclared(AssertionError):
    """A handler read an input its operation does not declare."""


def declared(request: Request, kind: str) -> None:
    route = request.scope.get("state", {}).get("route")
    if route is None or kind not in route.touches:
        raise Undeclared(f"{getattr(route, 'operation_id', '?')} reads {kind} undeclared")


def read(request: Request, kind: str) -> str | None:
    """The input of `kind` the request carries (None: absent)."""
    declared(request, kind)
    if kind in QUERY:
        if not request.scope.get("query_string"):
            return None  # most requests: no query to parse
        return request.query_params.get(QUERY[kind])
    return request.headers.get(HEADERS[kind])
