"""What an S3 request touches beyond its URL's bucket and key, read only through here.

Each operation declares the kinds it reads (`S3Operation.touches`); reading a kind it does
not declare is a programming error (a 500, which tests/test_access_declarations.py would
see), so that no handler can reach a second resource (a copy's source, the keys of a
batch, a version, the ACL, lock or tags a write sets, a bypass of retention) that its
declaration, and so its access decision, does not name. Every reader of these inputs is
an access decision too: `access.also` decides the action on the resource it names.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.api.touches import Undeclared

from .call import S3Call

COPY_SOURCE = "x-amz-copy-source"
RENAME_SOURCE = "x-amz-rename-source"
ACL = "x-amz-acl"
GRANT_HEADERS = tuple(
    f"x-amz-grant-{name}" for name in ("read", "write", "read-acp", "write-acp", "full-control")
)
"""In the order a grant list they set lists its grants."""
MODE = "x-amz-object-lock-mode"
UNTIL = "x-amz-object-lock-retain-until-date"
HOLD = "x-amz-object-lock-legal-hold"
BYPASS = "x-amz-bypass-governance-retention"
TAGGING = "x-amz-tagging"
TAGGING_DIRECTIVE = "x-amz-tagging-directive"
VERSION_ID = "versionId"
OWNER = "x-amz-expected-bucket-owner"
SOURCE_OWNER = "x-amz-source-expected-bucket-owner"
"""The organization a request expects to own its bucket (or its copy's source's): another
is AccessDenied, as on AWS, so a name that now means another organization's bucket is never
written to or read from by mistake."""

INPUTS: dict[str, tuple[str, ...]] = {
    "copy-source": (COPY_SOURCE,),
    "rename-source": (RENAME_SOURCE,),
    "copy-tags": (TAGGING_DIRECTIVE,),
    "acl": (ACL, *GRANT_HEADERS),
    "own-acl": (ACL, *GRANT_HEADERS),
    "lock": (MODE, UNTIL, HOLD),
    "bypass": (BYPASS,),
    "tagging": (TAGGING,),
    "version": (VERSION_ID,),
    "keys": (),
    "content": (),
}
"""Each kind of second resource, and the headers (or for `version` the query parameter)
that name it; `rename-source` the key a RenameObject takes the version of; `keys` is a
DeleteObjects body's key list; `own-acl` is the ACL that PutBucketAcl, PutObjectAcl or
CreateBucket sets, decided as the operation itself; `copy-tags` a copy's tags, its
source's unless the directive is REPLACE; `content` the right to read the object itself,
which GetObjectAttributes needs beside its own action, as AWS has it."""
ACTIONS: dict[str, tuple[str, ...]] = {
    "copy-source": ("s3:GetObject", "s3:GetObjectVersion"),
    "rename-source": ("s3:GetObject", "s3:DeleteObject"),
    "copy-tags": ("s3:GetObjectTagging", "s3:PutObjectTagging"),
    "acl": ("s3:PutObjectAcl",),
    "own-acl": (),
    "lock": ("s3:PutObjectRetention", "s3:PutObjectLegalHold"),
    "bypass": ("s3:BypassGovernanceRetention",),
    "tagging": ("s3:PutObjectTagging",),
    "version": (),
    "keys": ("s3:DeleteObject", "s3:DeleteObjectVersion"),
    "content": ("s3:GetObject", "s3:GetObjectVersion"),
}
"""The actions each kind is decided as (docs/s3.md lists them per operation); `version`
turns the operation's own action into its version form (`s3:GetObjectVersion`)."""


def declared(call: S3Call, kind: str) -> None:
    if kind not in call.touches:
        raise Undeclared(f"{call.operation} reads {kind} without declaring it")


def read(call: S3Call, kind: str, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The inputs of `kind` the request carries (of a POST form's fields: `source`)."""
    declared(call, kind)
    if kind == "version":
        source = call.params
    elif source is None:
        source = call.request.headers
    return {name: source[name] for name in INPUTS[kind] if name in source}


def one(call: S3Call, kind: str, source: Mapping[str, str] | None = None) -> str | None:
    """The single input of `kind` (None: absent)."""
    (name,) = INPUTS[kind]
    return read(call, kind, source).get(name)
