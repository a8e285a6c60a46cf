"""Hostile review of the ACL a write sends with it (issue 38): whoever the bucket ACL lets
write sets the ACL of the version it creates (`created` in storage/rules/access.py), and
nothing beyond it. Each test is an attack by an outsider against the shared server."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from storage.attributes import Attributes
from storage.errors import AccessDenied
from storage.rules.access import Requester
from tests.support import rawhttp, web
from tests.support.access import policy, refused
from tests.support.engine import chunks
from tests.support.engines import engine_on, organization_with_bucket
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


def _grantee_bucket(s3: Any, org: str, prefix: str, **extra: Any) -> str:
    """A bucket of the default organization whose ACL grants `org` WRITE (and READ, to list)."""
    name = unique_name(prefix)
    s3.create_bucket(Bucket=name, GrantWrite=f"id={org}", GrantRead=f"id={org}", **extra)
    return name


def test_the_writes_acl_reaches_no_other_version_nor_another_key(
    local_server: LiveServer, s3: Any, anonymous: Any, other: tuple[str, Any]
) -> None:
    """Holds: the grantee's FULL_CONTROL on what it writes opens nothing of the owner's: not
    the old versions under its new one, not a copy's, an upload part copy's or a rename's
    source, not the bucket; an overwrite with versioning off replaces the owner's bytes
    (as on AWS), it does not publish them."""
    org, theirs = other
    name = _grantee_bucket(s3, org, "rvo")
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket=name, Key="k", Body=b"owner v1")["VersionId"]
    s3.put_object(Bucket=name, Key="secret", Body=b"secret")
    mine = theirs.put_object(Bucket=name, Key="k", Body=b"theirs", GrantFullControl=f"id={org}")
    assert theirs.get_object(Bucket=name, Key="k")["Body"].read() == b"theirs"
    for call, extra in (
        (theirs.get_object, {}),
        (theirs.get_object_acl, {}),
        (theirs.put_object_acl, {"ACL": "public-read"}),
    ):
        assert refused(call, Bucket=name, Key="k", VersionId=old, **extra) == "AccessDenied"
    theirs.put_object_acl(Bucket=name, Key="k", VersionId=mine["VersionId"], ACL="public-read")
    assert anonymous.get_object(Bucket=name, Key="k")["Body"].read() == b"theirs"
    source = {"Bucket": name, "Key": "secret"}
    for key, extra in (
        ("copy", {"ACL": "public-read"}),
        ("full", {"GrantFullControl": f"id={org}"}),
    ):
        copied = refused(theirs.copy_object, Bucket=name, Key=key, CopySource=source, **extra)
        assert copied == "AccessDenied"
    upload = theirs.create_multipart_upload(Bucket=name, Key="mpu", ACL="public-read")["UploadId"]
    part = refused(
        theirs.upload_part_copy,
        Bucket=name,
        Key="mpu",
        UploadId=upload,
        PartNumber=1,
        CopySource=source,
    )
    assert part == "AccessDenied"
    etag = theirs.upload_part(Bucket=name, Key="mpu", UploadId=upload, PartNumber=1, Body=b"p")
    theirs.complete_multipart_upload(
        Bucket=name,
        Key="mpu",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag["ETag"]}]},
    )
    assert anonymous.get_object(Bucket=name, Key="mpu")["Body"].read() == b"p"
    assert refused(anonymous.get_object, Bucket=name, Key="secret") == "AccessDenied"
    assert refused(theirs.put_bucket_acl, Bucket=name, ACL="public-read") == "AccessDenied"
    # Versioning off: the grantee's public overwrite holds its bytes, never the owner's.
    plain = _grantee_bucket(s3, org, "rvp")
    s3.put_object(Bucket=plain, Key="k", Body=b"owner")
    theirs.put_object(Bucket=plain, Key="k", Body=b"replaced", ACL="public-read")
    assert anonymous.get_object(Bucket=plain, Key="k")["Body"].read() == b"replaced"
    assert s3.get_object(Bucket=plain, Key="k")["Body"].read() == b"replaced"


def test_every_write_path_keeps_the_buckets_refusals(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: BlockPublicAcls refuses the grantee's public ACL on a PUT, a copy, a multipart
    upload's creation and a form; an e-mail grantee is refused; a key of the grantee
    restricted to another bucket, or without files:write, gets nothing; BucketOwnerEnforced
    refuses every ACL but bucket-owner-full-control."""
    org, theirs = other
    name = _grantee_bucket(s3, org, "rvb")
    theirs.put_object(Bucket=name, Key="src", Body=b"src")
    s3.put_public_access_block(
        Bucket=name, PublicAccessBlockConfiguration={"BlockPublicAcls": True}
    )
    public = {"ACL": "public-read"}
    everyone = {"GrantRead": 'uri="http://acs.amazonaws.com/groups/global/AllUsers"'}
    for asked in (public, everyone):
        assert refused(theirs.put_object, Bucket=name, Key="a", Body=b"a", **asked) == (
            "AccessDenied"
        )
        assert refused(
            theirs.copy_object, Bucket=name, Key="a", CopySource=f"{name}/src", **asked
        ) == ("AccessDenied")
        assert refused(theirs.create_multipart_upload, Bucket=name, Key="a", **asked) == (
            "AccessDenied"
        )
    posted = _form(local_server, name, key="a", acl="public-read")
    assert posted.status_code == 403 and "AccessDenied" in posted.text
    email = refused(
        theirs.put_object, Bucket=name, Key="a", Body=b"a", GrantRead="emailAddress=a@b.c"
    )
    assert email == "UnresolvableGrantByEmailAddress"
    assert refused(s3.head_object, Bucket=name, Key="a") == "404"
    elsewhere = unique_name("rvx")
    theirs.create_bucket(Bucket=elsewhere)
    for scopes, extra in (("files:read,files:write", ("--bucket", elsewhere)), ("files:read", ())):
        key = local_server.s3(*local_server.s3_credentials(org, scopes, *extra))
        grant = {"GrantRead": f"id={org}"}
        assert refused(key.put_object, Bucket=name, Key="b", Body=b"b", **grant) in (
            "NoSuchBucket",
            "AccessDenied",
        )
    enforced = unique_name("rve")  # its ACL grants nothing: a policy lets the grantee write
    s3.create_bucket(Bucket=enforced)
    s3.put_bucket_ownership_controls(
        Bucket=enforced,
        OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
    )
    write = {
        "Effect": "Allow",
        "Principal": {"AWS": [org]},
        "Action": ["s3:PutObject", "s3:PutObjectAcl"],
        "Resource": f"arn:aws:s3:::{enforced}/*",
    }
    s3.put_bucket_policy(Bucket=enforced, Policy=policy(enforced, write))
    assert refused(theirs.put_object, Bucket=enforced, Key="a", Body=b"a", **public) == (
        "AccessControlListNotSupported"
    )
    theirs.put_object(Bucket=enforced, Key="a", Body=b"a", ACL="bucket-owner-full-control")


def test_policy_status_stays_the_owners(s3: Any, anonymous: Any, other: tuple[str, Any]) -> None:
    """Holds: whether a bucket is public is not told to anyone else, whatever its ACL grants
    them (a public-read-write bucket, a FULL_CONTROL grant to another organization)."""
    org, theirs = other
    name = unique_name("rvs")
    s3.create_bucket(Bucket=name, ACL="public-read-write")
    assert s3.get_bucket_policy_status(Bucket=name)["PolicyStatus"]["IsPublic"] is True
    for client in (anonymous, theirs):
        assert refused(client.get_bucket_policy_status, Bucket=name) == "AccessDenied"
    s3.put_bucket_acl(Bucket=name, GrantFullControl=f"id={org}")
    assert refused(theirs.get_bucket_policy_status, Bucket=name) == "AccessDenied"


def test_a_deny_of_the_acl_wins_by_notprincipal_ifexists_and_a_forms_filename(
    local_server: LiveServer, s3: Any, other: tuple[str, Any]
) -> None:
    """Holds: a Deny of s3:PutObjectAcl to everyone but the owner (NotPrincipal), or to
    any ACL but bucket-owner-full-control (`...IfExists`, so also to grant headers that
    send no x-amz-acl), refuses the grantee's ACL on a PUT, a copy, a multipart upload's
    creation and a form; a Deny of ACLs on
    `*.html` judges the key a form's `${filename}` makes."""
    org, theirs = other
    owner = s3.list_buckets()["Owner"]["ID"]
    name = unique_name("rvd")
    s3.create_bucket(Bucket=name, ACL="public-read-write")
    s3.put_bucket_acl(
        Bucket=name,
        GrantWrite=f'id={org},uri="http://acs.amazonaws.com/groups/global/AllUsers"',
        GrantFullControl=f"id={owner}",
    )
    theirs.put_object(Bucket=name, Key="src", Body=b"src", GrantRead=f"id={org}")
    objects = f"arn:aws:s3:::{name}/*"
    denies = (
        {"NotPrincipal": {"AWS": [owner]}},
        {
            "Principal": "*",
            "Condition": {"StringNotEqualsIfExists": {"s3:x-amz-acl": "bucket-owner-full-control"}},
        },
    )
    for deny in denies:
        statement = {"Effect": "Deny", "Action": "s3:PutObjectAcl", "Resource": objects, **deny}
        s3.put_bucket_policy(Bucket=name, Policy=policy(name, statement))
        for asked in ({"ACL": "public-read"}, {"GrantRead": f"id={org}"}):
            assert refused(theirs.put_object, Bucket=name, Key="a", Body=b"a", **asked) == (
                "AccessDenied"
            ), (deny, asked)
            copied = refused(
                theirs.copy_object, Bucket=name, Key="a", CopySource=f"{name}/src", **asked
            )
            assert copied == "AccessDenied"
            created = refused(theirs.create_multipart_upload, Bucket=name, Key="a", **asked)
            assert created == "AccessDenied"
        posted = _form(local_server, name, key="a", acl="public-read")
        assert posted.status_code == 403 and "AccessDenied" in posted.text
    assert refused(s3.head_object, Bucket=name, Key="a") == "404"
    html = {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObjectAcl"}
    s3.put_bucket_policy(
        Bucket=name, Policy=policy(name, {**html, "Resource": f"arn:aws:s3:::{name}/*.html"})
    )
    page = web.post(
        f"{local_server.s3_url}/{name}",
        data={"key": "${filename}", "acl": "public-read"},
        files={"file": ("x.html", b"<p>")},
    )
    assert page.status_code == 403 and "AccessDenied" in page.text
    text = web.post(
        f"{local_server.s3_url}/{name}",
        data={"key": "${filename}", "acl": "public-read"},
        files={"file": ("x.txt", b"t")},
    )
    assert text.status_code == 204, text.text


def test_an_acl_added_to_a_presigned_url_after_signing_is_not_taken(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    """Holds: whoever holds a presigned PUT URL cannot add a public ACL the signer did not
    sign: SigV4 signs the query, SigV2 the x-amz-* headers and (here) an x-amz-acl
    query parameter too."""
    name = unique_name("rvu")
    s3.create_bucket(Bucket=name)
    v4 = s3.generate_presigned_url("put_object", Params={"Bucket": name, "Key": "v4"})
    added = web.put(v4 + "&x-amz-acl=public-read", content=b"v4")
    assert added.status_code == 403 and "SignatureDoesNotMatch" in added.text
    v2: Any = local_server.s3(signature_version="s3")
    url = v2.generate_presigned_url("put_object", Params={"Bucket": name, "Key": "v2"})
    header = web.put(url, content=b"v2", headers={"x-amz-acl": "public-read"})
    assert header.status_code == 403 and "SignatureDoesNotMatch" in header.text
    query = web.put(url + "&x-amz-acl=public-read", content=b"v2")
    assert query.status_code == 403 and "SignatureDoesNotMatch" in query.text
    for key in ("v4", "v2"):
        assert refused(s3.head_object, Bucket=name, Key=key) == "404"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "postgres"])
async def test_a_read_or_change_acts_only_on_what_its_decision_judged(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The decision of an anonymous GET read the current version's ACL (public-read); the
    owner's private overwrite lands before the handler reads the key: the engine must not
    serve the overwrite under the old version's grant. No HTTP request can hold a GET
    between the two steps, so the engine is driven here; on both indexes, the ACL change's
    checks too (the version, then the bucket's grants, in its transaction)."""
    async with engine_on(kind, tmp_path, request) as engine:
        owner, bucket_id = await organization_with_bucket(engine)
        bucket = await engine.buckets.get(owner, bucket_id)
        public = Attributes("text/plain", acl="public-read")
        await engine.files.put(owner, bucket_id, "k", public, chunks(b"public"))
        reader = await engine.access.check(Requester(None), "s3:GetObject", bucket, "k")
        assert (await engine.files.get(reader, bucket_id, "k")).size == len(b"public")
        await engine.files.put(owner, bucket_id, "k", Attributes("text/plain"), chunks(b"s"))
        with pytest.raises(AccessDenied):
            await engine.files.get(reader, bucket_id, "k")
        with pytest.raises(AccessDenied):
            await engine.files.get_version(reader, bucket_id, "k", None)
        with pytest.raises(AccessDenied):
            await engine.files.set_acl(reader, bucket_id, "k", None, "public-read", True)
        assert (await engine.files.get(owner, bucket_id, "k")).acl is None
        # The version stands, the bucket's grants moved: refused too; unmoved: applied.
        current = await engine.files.get(owner, bucket_id, "k")
        pinned = replace(reader, judged=current)
        await engine.buckets.update(owner, bucket_id, {"acl": "public-read"})
        with pytest.raises(AccessDenied):
            await engine.files.set_acl(pinned, bucket_id, "k", None, "public-read", True)
        fresh = replace(pinned, decided=await engine.buckets.get(owner, bucket_id))
        await engine.files.set_acl(fresh, bucket_id, "k", None, "public-read", True)
        assert (await engine.files.get(owner, bucket_id, "k")).acl == "public-read"


def test_a_bucket_acl_change_held_past_its_grants_revocation_is_refused(
    local_server: LiveServer, s3: Any
) -> None:
    """Another organization with WRITE_ACP on the bucket asks PutBucketAcl
    (public-read-write) and holds its body back; the owner revokes the grant meanwhile.
    The decision was made on the grant that is gone: the change must not land."""
    org = make_org(local_server)
    credentials = local_server.s3_credentials(org)
    name = unique_name("rvr")
    s3.create_bucket(Bucket=name, GrantWriteACP=f"id={org}")
    path = f"/{name}?acl"
    headers = _signed(local_server, path, {"x-amz-acl": "public-read-write"}, b" ", credentials)
    with rawhttp.connect(local_server.s3_url) as sock:
        sock.sendall(rawhttp.request_head("PUT", path, headers))
        time.sleep(0.3)  # decided on the headers
        s3.put_bucket_acl(Bucket=name, ACL="private")
        sock.sendall(b" ")
        answer = rawhttp.read_response(sock)
    assert answer.status == 403 and b"AccessDenied" in answer.body, answer.body
    assert s3.get_bucket_acl(Bucket=name)["Grants"][1:] == []
    # Unraced, the grant still works.
    s3.put_bucket_acl(Bucket=name, GrantWriteACP=f"id={org}")
    theirs = local_server.s3(*credentials)
    theirs.put_bucket_acl(Bucket=name, GrantWriteACP=f"id={org}", GrantRead=f"id={org}")
    granted = {g["Permission"] for g in s3.get_bucket_acl(Bucket=name)["Grants"]}
    assert {"READ", "WRITE_ACP"} <= granted


def test_an_object_acl_change_held_past_its_policys_removal_is_refused(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    """The grant of an object ACL change was the bucket policy's (s3:PutObjectAcl to another
    organization); the owner deletes the policy while the request holds its body back: the
    change must not land on the owner's object."""
    org = make_org(local_server)
    credentials = local_server.s3_credentials(org)
    name = unique_name("rvq")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"owner's")
    allow = {
        "Effect": "Allow",
        "Principal": {"AWS": [org]},
        "Action": "s3:PutObjectAcl",
        "Resource": f"arn:aws:s3:::{name}/*",
    }
    s3.put_bucket_policy(Bucket=name, Policy=policy(name, allow))
    path = f"/{name}/k?acl"
    headers = _signed(local_server, path, {"x-amz-acl": "public-read"}, b" ", credentials)
    with rawhttp.connect(local_server.s3_url) as sock:
        sock.sendall(rawhttp.request_head("PUT", path, headers))
        time.sleep(0.3)  # decided on the headers
        s3.delete_bucket_policy(Bucket=name)
        sock.sendall(b" ")
        answer = rawhttp.read_response(sock)
    assert answer.status == 403 and b"AccessDenied" in answer.body, answer.body
    assert refused(anonymous.get_object, Bucket=name, Key="k") == "AccessDenied"


def test_a_public_write_held_past_block_public_acls_is_refused(
    local_server: LiveServer, s3: Any, anonymous: Any
) -> None:
    """A WRITE grantee sends PutObject with x-amz-acl: public-read and holds its body back;
    the owner sets BlockPublicAcls meanwhile. The write's public ACL
    was decided on grants that are gone: it must not land. A write that shares nothing is
    not held to it (a long upload outlives an unrelated policy edit)."""
    org = make_org(local_server)
    credentials = local_server.s3_credentials(org)
    name = unique_name("rvh")
    s3.create_bucket(Bucket=name, GrantWrite=f"id={org}")
    held = {}
    for key, acl in (("public", {"x-amz-acl": "public-read"}), ("plain", {})):
        path = f"/{name}/{key}"
        sock = rawhttp.connect(local_server.s3_url)
        sock.sendall(
            rawhttp.request_head("PUT", path, _signed(local_server, path, acl, b"x", credentials))
        )
        held[key] = sock
    time.sleep(0.3)  # decided on the headers
    s3.put_public_access_block(
        Bucket=name, PublicAccessBlockConfiguration={"BlockPublicAcls": True}
    )
    answers = {}
    for key, sock in held.items():
        with sock:
            sock.sendall(b"x")
            answers[key] = rawhttp.read_response(sock)
    assert answers["public"].status == 403, answers["public"].body
    assert refused(s3.head_object, Bucket=name, Key="public") == "404"
    assert refused(anonymous.get_object, Bucket=name, Key="public") == "AccessDenied"
    assert answers["plain"].status == 200, answers["plain"].body
