"""Hostile review of the ACL a write sends with it (issue 38): whoever the bucket ACL lets
write sets the ACL of the version it creates (`created` in storage/rules/access.py), and
nothing beyond it. Each test is an attack by an outsider against the shared server."""

from __future__ import annotations

from typing import Any

from tests.support import web
from tests.support.access import policy, refused
from tests.support.live import LiveServer
from tests.support.names import unique_name


def _form(server: LiveServer, bucket: str, **fields: str) -> Any:
    """An anonymous browser form upload (no policy, no signature)."""
    return web.post(f"{server.s3_url}/{bucket}", data=fields, files={"file": b"form"})


def test_a_conditional_deny_of_the_acl_refuses_a_forms_acl_too(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    """A Deny of s3:PutObjectAcl on `s3:x-amz-acl` = public-read judges a POST's `acl`
    field as it judges the header: the form's ACL is the same condition key."""
    name = unique_name("rva")
    s3.create_bucket(Bucket=name, ACL="public-read-write")
    deny = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:PutObjectAcl",
        "Resource": f"arn:aws:s3:::{name}/*",
        "Condition": {"StringEquals": {"s3:x-amz-acl": "public-read"}},
    }
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, deny))
    put = refused(anonymous.put_object, Bucket=name, Key="h.txt", Body=b"h", ACL="public-read")
    assert put == "AccessDenied"
    posted = _form(local_server, name, key="f.txt", acl="public-read")
    assert posted.status_code == 403 and "AccessDenied" in posted.text, posted.text
    assert refused(s3.head_object, Bucket=name, Key="f.txt") == "404"
    # Another ACL is not what the Deny names: it stands.
    assert _form(local_server, name, key="g.txt", acl="authenticated-read").status_code == 204
