"""Bucket policies, ACL grants and refusals, as the access tests write them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.names import unique_name
from tests.support.s3 import code, status


def policy(name: str, *statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as error:
        call(**kwargs)
    return code(error.value)


def failure(call: Any, **kwargs: Any) -> tuple[int, str]:
    """The status and S3 error code of a call that must fail."""
    with pytest.raises(ClientError) as error:
        call(**kwargs)
    return status(error.value), code(error.value)


def s3_bucket(s3: Any, prefix: str) -> str:
    name = unique_name(prefix)
    s3.create_bucket(Bucket=name)
    return name


def org_id(s3: Any) -> str:
    """The canonical id of the client's organization (ListBuckets' Owner)."""
    return str(s3.list_buckets()["Owner"]["ID"])


def user_grant(org: str, permission: str) -> dict:
    return {"Grantee": {"Type": "CanonicalUser", "ID": org}, "Permission": permission}


def acl_body(s3: Any, grants: list[dict]) -> dict:
    """An AccessControlPolicy owned by the client's organization."""
    return {"Owner": {"ID": org_id(s3)}, "Grants": grants}


def group_uris(grants: list[dict]) -> list[str]:
    return [g["Grantee"]["URI"] for g in grants if g["Grantee"]["Type"] == "Group"]
