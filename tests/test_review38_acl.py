"""Hostile review of the ACL a write sends with it (issue 38): whoever the bucket ACL lets
write sets the ACL of the version it creates (`created` in storage/rules/access.py), and
nothing beyond it. Each test is an attack by an outsider against the shared server."""

from __future__ import annotations

import time
from typing import Any

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support import rawhttp, web
from tests.support.access import policy, refused
from tests.support.live import LiveServer
from tests.support.names import unique_name
from tests.support.orgs import make_org


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


def _signed(
    server: LiveServer, path: str, headers: dict[str, str], body: bytes, keys: tuple[str, str]
) -> dict[str, str]:
    """SigV4 headers of a PUT of `body` (its hash signed), to send by hand."""
    host = server.s3_url.removeprefix("http://")
    request = AWSRequest("PUT", server.s3_url + path, data=body, headers={"Host": host, **headers})
    S3SigV4Auth(Credentials(*keys), "s3", "us-east-1").add_auth(request)
    return {**dict(request.headers), "Content-Length": str(len(body))}


def test_an_acl_change_reaches_the_version_it_was_decided_on(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    """A WRITE grantee writes its own version with FULL_CONTROL to itself, then asks
    PutObjectAcl on the key and holds the body back; the owner overwrites the key
    meanwhile. The ACL change was decided on the grantee's version: it must not land on the
    owner's, which would publish the owner's new bytes."""
    org = make_org(local_server)
    credentials = local_server.s3_credentials(org)
    theirs = local_server.s3(*credentials)
    name = unique_name("rvt")
    s3.create_bucket(Bucket=name, GrantWrite=f"id={org}")
    theirs.put_object(Bucket=name, Key="k", Body=b"theirs", GrantFullControl=f"id={org}")
    path = f"/{name}/k?acl"
    headers = _signed(local_server, path, {"x-amz-acl": "public-read"}, b" ", credentials)
    with rawhttp.connect(local_server.s3_url) as sock:
        sock.sendall(rawhttp.request_head("PUT", path, headers))
        time.sleep(0.3)  # the decision is made on the headers, before the body comes
        s3.put_object(Bucket=name, Key="k", Body=b"owner's secret")
        sock.sendall(b" ")
        answer = rawhttp.read_response(sock)
    assert answer.status == 403 and b"AccessDenied" in answer.body, answer.body
    assert refused(anonymous.get_object, Bucket=name, Key="k") == "AccessDenied"
    assert s3.get_object_acl(Bucket=name, Key="k")["Grants"][1:] == []
    # Unraced, the grantee's FULL_CONTROL on its own version still changes that version's ACL.
    theirs.put_object(Bucket=name, Key="own", Body=b"own", GrantFullControl=f"id={org}")
    theirs.put_object_acl(Bucket=name, Key="own", ACL="public-read")
    assert anonymous.get_object(Bucket=name, Key="own")["Body"].read() == b"own"
