"""CORS on both listeners, as a browser asks: S3's Put/Get/DeleteBucketCors with boto3,
preflights and actual requests answered by the bucket's rules on the S3 endpoint and on
/v1 file paths, and the server's `cors_origins` on the rest of /v1. (A real browser runs
the same in tests/test_browser_sharing.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name
from tests.support.orgs import make_org
from tests.support.s3 import code

RULES = {
    "CORSRules": [
        {
            "ID": "app",
            "AllowedOrigins": ["http://*.example.com"],
            "AllowedMethods": ["GET", "PUT"],
            "AllowedHeaders": ["content-type", "x-amz-*"],
            "ExposeHeaders": ["ETag"],
            "MaxAgeSeconds": 300,
        },
        {"AllowedOrigins": ["*"], "AllowedMethods": ["HEAD"]},
    ]
}


@pytest.fixture
def bucket(s3: Any) -> str:
    name = unique_name("cors")
    s3.create_bucket(Bucket=name)
    return name


def preflight(
    url: str, origin: str | None, method: str | None, headers: str = ""
) -> httpx.Response:
    sent = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        sent["Access-Control-Request-Headers"] = headers
    return web.options(url, headers={k: v for k, v in sent.items() if v is not None})


def test_bucket_cors_round_trips_and_is_removed(s3: Any, bucket: str) -> None:
    with pytest.raises(ClientError) as missing:
        s3.get_bucket_cors(Bucket=bucket)
    assert code(missing.value) == "NoSuchCORSConfiguration"
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    got = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert got[0] == RULES["CORSRules"][0]
    assert got[1] == {"AllowedOrigins": ["*"], "AllowedMethods": ["HEAD"]}
    s3.delete_bucket_cors(Bucket=bucket)
    with pytest.raises(ClientError):
        s3.get_bucket_cors(Bucket=bucket)


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}, "InvalidArgument"),
        (
            {"AllowedOrigins": ["http://*.*.example.com"], "AllowedMethods": ["GET"]},
            "InvalidArgument",
        ),
        (
            {"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["x-*-*"]},
            "InvalidArgument",
        ),
    ],
)
def test_malformed_rules_are_refused_and_change_nothing(
    s3: Any, bucket: str, rule: dict, expected: str
) -> None:
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    with pytest.raises(ClientError) as refused:
        s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [rule]})
    assert code(refused.value) == expected
    assert len(s3.get_bucket_cors(Bucket=bucket)["CORSRules"]) == 2


def test_s3_preflights_follow_the_rules(local_server: LiveServer, s3: Any, bucket: str) -> None:
    url = f"{local_server.s3_url}/{bucket}/photo.jpg"
    assert preflight(url, "http://app.example.com", "PUT").status_code == 403  # no rules yet
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    allowed = preflight(url, "http://app.example.com", "PUT", "Content-Type, X-Amz-Date")
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://app.example.com"
    assert allowed.headers["access-control-allow-methods"] == "GET, PUT"
    assert allowed.headers["access-control-allow-headers"] == "content-type, x-amz-date"
    assert allowed.headers["access-control-max-age"] == "300"
    assert allowed.headers["access-control-allow-credentials"] == "true"
    anyone = preflight(url, "http://elsewhere.test", "HEAD")
    assert anyone.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in anyone.headers
    for origin, method, headers in [
        ("http://evil.test", "PUT", ""),  # origin not allowed
        ("http://app.example.com", "DELETE", ""),  # method not allowed
        ("http://app.example.com", "PUT", "authorization"),  # header not allowed
    ]:
        refused = preflight(url, origin, method, headers)
        assert refused.status_code == 403
        assert b"<Code>AccessForbidden</Code>" in refused.content
        assert "access-control-allow-origin" not in refused.headers
    assert preflight(url, None, "PUT").status_code == 400
    assert preflight(url, "http://app.example.com", None).status_code == 400


def test_s3_actual_requests_carry_the_matching_rule(
    local_server: LiveServer, s3: Any, bucket: str
) -> None:
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    s3.put_object(Bucket=bucket, Key="k", Body=b"hello")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"})
    read = web.get(url, headers={"Origin": "http://app.example.com"})
    assert read.status_code == 200
    assert read.headers["access-control-allow-origin"] == "http://app.example.com"
    assert read.headers["access-control-expose-headers"] == "ETag"
    other = web.get(url, headers={"Origin": "http://evil.test"})
    assert other.status_code == 200  # CORS is the browser's business: no headers, same answer
    assert "access-control-allow-origin" not in other.headers
    assert "access-control-allow-origin" not in web.get(url).headers


def test_a_name_reached_without_credentials_is_held_across_organizations(
    local_server: LiveServer, s3: Any, bucket: str
) -> None:
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    org = make_org(local_server)
    other = local_server.s3(*local_server.s3_credentials(org))
    other.create_bucket(Bucket=bucket)  # names stay per organization...
    with pytest.raises(ClientError) as taken:  # ...but a shared one is the server's
        other.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    assert code(taken.value) == "BucketAlreadyExists"
    s3.delete_bucket_cors(Bucket=bucket)  # the name stays held (tests/test_bucket_names.py)
    with pytest.raises(ClientError) as still:
        other.put_bucket_cors(Bucket=bucket, CORSConfiguration=RULES)
    assert code(still.value) == "BucketAlreadyExists"


def test_v1_file_paths_follow_the_bucket_and_the_rest_the_server(
    local_server: LiveServer,
) -> None:
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("corsv1"))
        file_url = f"{local_server.url}/v1/buckets/{bucket['id']}/files/a.txt"
        api_url = f"{local_server.url}/v1/buckets"
        # The server's cors_origins (http://allowed.test:*) cover the API and, while the
        # bucket has no rules, its files.
        for url in (api_url, file_url):
            allowed = preflight(url, "http://allowed.test:5000", "GET", "authorization")
            assert allowed.status_code == 200, allowed.text
            assert allowed.headers["access-control-allow-origin"] == "http://allowed.test:5000"
        assert preflight(api_url, "http://evil.test", "GET").status_code == 403
        rules = [
            {
                "allowedOrigins": ["http://app.example.com"],
                "allowedMethods": ["PUT"],
                "allowedHeaders": ["*"],
            }
        ]
        assert http.patch(f"/buckets/{bucket['id']}", json={"cors": rules}).status_code == 200
        assert http.get(f"/buckets/{bucket['id']}").json()["data"]["cors"] == rules
        assert (
            preflight(
                file_url, "http://app.example.com", "PUT", "authorization, content-type"
            ).status_code
            == 200
        )
        assert preflight(file_url, "http://allowed.test:5000", "PUT").status_code == 403
        put = http.put(
            file_url,
            content=b"x",
            headers={"Content-Type": "text/plain", "Origin": "http://app.example.com"},
        )
        assert put.status_code == 201
        assert put.headers["access-control-allow-origin"] == "http://app.example.com"
        listed = http.get("/buckets", headers={"Origin": "http://allowed.test:1"})
        assert listed.headers["access-control-allow-origin"] == "http://allowed.test:1"
        assert "x-ratelimit-remaining" in listed.headers["access-control-expose-headers"].lower()
        bad = http.patch(
            f"/buckets/{bucket['id']}",
            json={"cors": [{"allowedOrigins": ["*"], "allowedMethods": ["TRACE"]}]},
        )
        assert bad.status_code == 400
