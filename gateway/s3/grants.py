"""S3's ACLs as requests set them and responses show them: a canned `x-amz-acl`, the
`x-amz-grant-*` headers (CreateBucket, PutObject, CopyObject, CreateMultipartUpload,
PutBucketAcl, PutObjectAcl) and AccessControlPolicy bodies, read into what
`storage/rules/acl.py` stores; and the AccessControlPolicy a GetBucketAcl or GetObjectAcl
answers.

A grantee is a group (by URI), or an organization by its canonical user id (the `ID` that
bucketd shows as every owner's). One that names no organization of this server is
InvalidArgument, as on AWS. A grant by e-mail address is UnresolvableGrantByEmailAddress:
organizations here have no e-mail address, as AWS accounts outside its older regions
have none it resolves."""

from __future__ import annotations

import re
from collections.abc import Mapping
from xml.etree import ElementTree

from starlette.responses import Response

from storage.errors import OrganizationNotFound
from storage.rules.acl import (
    GROUPS,
    MAX_GRANTS,
    OWNER,
    PERMISSIONS,
    Grant,
    check_acl,
    encode_grants,
    grant_list,
)

from . import xml
from .call import S3Call
from .errors import S3Error
from .touches import ACL, GRANT_HEADERS, read

_TYPE = "{" + xml.XSI + "}type"
_HEADER_ITEM = re.compile(r'\s*([A-Za-z]+)\s*=\s*(?:"([^"]*)"|([^,\s]*))\s*(?:,|$)')


def _unresolvable() -> S3Error:
    return S3Error(
        "UnresolvableGrantByEmailAddress",
        "The e-mail address you provided does not match any account on record: bucketd "
        "grants to organizations by their canonical user id",
    )


async def _grantee(call: S3Call, kind: str, value: str, owner: str) -> str:
    """What a grant names, as stored: a group URI, `OWNER`, or another organization's id."""
    if kind == "uri":
        if value not in GROUPS:
            raise S3Error("InvalidArgument", f"Invalid group uri: {value}")
        return value
    if kind == "emailaddress":
        raise _unresolvable()
    if kind != "id":
        raise S3Error("InvalidArgument", f"a grantee is id, uri or emailAddress, not {kind}")
    if value == owner:
        return OWNER
    try:
        await call.engine.orgs.get(value)
    except OrganizationNotFound:
        raise S3Error("InvalidArgument", f"Invalid id: no organization {value!r}") from None
    return value


async def from_headers(call: S3Call, found: Mapping[str, str], owner: str) -> str | None:
    """The ACL that `x-amz-acl` or the `x-amz-grant-*` headers among `found` ask for, to
    store (`check_acl`); None when they ask for none. Both at once is InvalidRequest."""
    canned = found.get(ACL)
    granted = [(name, found[name]) for name in GRANT_HEADERS if name in found]
    if canned is not None and granted:
        raise S3Error(
            "InvalidRequest", "Specifying both Canned ACLs and Header Grants is not allowed"
        )
    if canned is not None:
        return canned
    if not granted:
        return None
    grants = []
    for name, raw in granted:
        permission = name[len("x-amz-grant-") :].upper().replace("-", "_")
        position = 0
        while position < len(raw):
            matched = _HEADER_ITEM.match(raw, position)
            if matched is None or matched.end() == position:
                raise S3Error("InvalidArgument", f"{name} is a list of id=, uri= or emailAddress=")
            kind, value = matched.group(1).lower(), matched.group(2) or matched.group(3) or ""
            grants.append(Grant(await _grantee(call, kind, value, owner), permission))
            position = matched.end()
    if not grants:
        raise S3Error("InvalidArgument", "a grant header names at least one grantee")
    return _checked(grants)


async def bucket_acl(call: S3Call) -> str:
    """The ACL a CreateBucket asks for in its headers (`private` without one)."""
    found = await from_headers(call, read(call, "own-acl"), call.signer.key.org_id)
    return found or "private"


def _checked(grants: list[Grant]) -> str:
    if len(grants) > MAX_GRANTS:
        raise S3Error("InvalidArgument", f"an ACL holds at most {MAX_GRANTS} grants")
    stored = check_acl(encode_grants(grants), on_object=True)
    assert stored is not None
    return stored


async def from_body(call: S3Call, root: ElementTree.Element, owner: str) -> str:
    """The grant list of an AccessControlPolicy body, as given; its Owner, when it names
    one, must be the bucket's organization (AccessDenied: an ACL changes no owner)."""
    if root.tag != "AccessControlPolicy":
        raise S3Error("MalformedACLError", "the body is an AccessControlPolicy")
    named = root.find("Owner")
    if named is not None and (xml.text(named, "ID") or owner) != owner:
        raise S3Error("AccessDenied", "an ACL cannot change the owner", 403)
    listed = root.find("AccessControlList")
    grants = []
    for grant in [] if listed is None else listed.findall("Grant"):
        grantee, permission = grant.find("Grantee"), xml.text(grant, "Permission")
        if grantee is None or permission not in PERMISSIONS:
            raise S3Error("MalformedACLError", "a Grant holds a Grantee and a Permission")
        kind = (grantee.get(_TYPE) or "").strip()
        values = {child: xml.text(grantee, child) for child in ("ID", "URI", "EmailAddress")}
        given = [(child, value) for child, value in values.items() if value is not None]
        if kind == "AmazonCustomerByEmail" or values["EmailAddress"] is not None:
            raise _unresolvable()
        expected = {"CanonicalUser": "ID", "Group": "URI"}.get(kind)
        if len(given) != 1 or (expected is not None and given[0][0] != expected):
            raise S3Error("MalformedACLError", "a Grantee is a CanonicalUser ID or a Group URI")
        child, value = given[0]
        assert value is not None
        grants.append(Grant(await _grantee(call, child.lower(), value.strip(), owner), permission))
    return _checked(grants)


async def acl_response(
    call: S3Call, acl: str | None, headers: dict[str, str] | None = None
) -> Response:
    """The AccessControlPolicy of a stored ACL: the owner, then each grant as it was set
    (a canned ACL's owner FULL_CONTROL first, then its group grants). An organization's
    DisplayName shows to the bucket's organization and to that organization itself."""
    owner = call.owner
    owner_id = owner[0][1]
    asking = None if call.principal is None else call.principal.key.org_id
    names: dict[str, str | None] = {}
    listed: list[xml.Node] = []
    for grant in grant_list(acl):
        if grant.is_group:
            grantee: list[xml.Node] = [("URI", grant.grantee)]
        elif grant.grantee == OWNER:
            grantee = owner
        else:
            if grant.grantee not in names:
                names[grant.grantee] = await _display_name(call, grant.grantee, asking, owner_id)
            shown = names[grant.grantee]
            grantee = [("ID", grant.grantee)] + ([] if shown is None else [("DisplayName", shown)])
        attributes = {
            "xmlns:xsi": xml.XSI,
            "xsi:type": "Group" if grant.is_group else "CanonicalUser",
        }
        shown_grantee = ("Grantee", xml.Attributed(attributes, grantee))
        listed.append(("Grant", [shown_grantee, ("Permission", grant.permission)]))
    return xml.response(
        "AccessControlPolicy",
        [("Owner", owner), ("AccessControlList", listed)],
        headers=headers,
    )


async def _display_name(call: S3Call, org_id: str, asking: str | None, owner: str) -> str | None:
    if asking not in (org_id, owner):
        return None
    try:
        return (await call.engine.orgs.get(org_id)).name
    except OrganizationNotFound:
        return None
