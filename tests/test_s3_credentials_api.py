"""S3 credentials without a shell on the server: `POST /v1/keys` with `"s3": true` makes an
access key id and a secret (shown once); listings show the access key id, never the
secret; the usual escalation rules hold; revoking ends it on S3."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.support.live import LiveServer
from tests.support.orgs import make_key, make_org

SCOPES = ["buckets:read", "buckets:write", "files:read", "files:write"]


def test_s3_credentials_made_listed_used_and_revoked_over_the_api(
    local_server: LiveServer,
) -> None:
    org = make_org(local_server, "pro")
    admin = make_key(local_server, org, ["keys:manage", *SCOPES])
    with local_server.client(admin) as http:
        made = http.post("/keys", json={"name": "ci", "scopes": SCOPES, "s3": True})
        assert made.status_code == 201, made.text
        key = made.json()["data"]
        assert key["accessKeyId"] and key["secret"] and key["last4"] == key["secret"][-4:]
        listed = [k for k in http.get("/keys").json()["data"] if k["id"] == key["id"]]
        assert listed[0]["accessKeyId"] == key["accessKeyId"] and "secret" not in listed[0]
        plain = http.post("/keys", json={"name": "api", "scopes": ["buckets:read"]}).json()
        assert "accessKeyId" not in plain["data"]
        beyond = http.post("/keys", json={"name": "x", "scopes": ["metrics:read"], "s3": True})
        assert beyond.status_code == 403
        s3 = local_server.s3(key["accessKeyId"], key["secret"])
        s3.create_bucket(Bucket="made-over-api-" + org[-8:].lower())
        assert http.delete(f"/keys/{key['id']}").status_code in (200, 204)
    with pytest.raises(ClientError) as refused:
        s3.list_buckets()
    assert refused.value.response["Error"]["Code"] == "InvalidAccessKeyId"
