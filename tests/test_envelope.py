"""Every JSON response, whatever its path through the app, has the envelope."""

from __future__ import annotations

import httpx
import pytest

from tests.support import web
from tests.support.live import LiveServer


@pytest.fixture(scope="module")
def server(local_server: LiveServer) -> LiveServer:
    """Authentication, routing and the envelope do not depend on the backend: one is enough."""
    return local_server


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"data", "error", "meta"}
    assert body["data"] is None and body["meta"] is None
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert set(body["error"]) == {"message", "code"}
    if code:
        assert body["error"]["code"] == code
    return body


@pytest.mark.parametrize("path", ["/v1/nope", "/v1", "/nope", "/v1/buckets/x/y/z", "/v1/buckets/"])
def test_unknown_routes_are_404_in_the_envelope(server: LiveServer, path: str) -> None:
    for auth in (
        {},
        {"Authorization": "Bearer nonsense"},
        {"Authorization": f"Bearer {server.admin_key}"},
    ):
        assert_error(web.get(server.url + path, headers=auth), 404, "route_not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/v1/buckets"),
        ("PUT", "/v1/buckets"),
        ("POST", "/v1/buckets/x"),
        ("POST", "/v1/buckets/x/files/k"),
        ("POST", "/v1/organization"),
        ("POST", "/healthz"),
    ],
)
def test_wrong_method_is_405_in_the_envelope(server: LiveServer, method: str, path: str) -> None:
    response = web.request(
        method, server.url + path, headers={"Authorization": f"Bearer {server.admin_key}"}
    )
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"]


def test_v1_responses_carry_rate_limit_headers(server: LiveServer) -> None:
    for response in (
        web.get(server.url + "/v1/nope"),
        web.get(server.url + "/v1/buckets"),
        web.get(server.url + "/v1/openapi.json"),
        web.get(
            server.url + "/v1/buckets", headers={"Authorization": f"Bearer {server.admin_key}"}
        ),
    ):
        for name in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
            assert response.headers[name].isdigit()


def test_healthz_is_outside_v1_and_not_limited(server: LiveServer) -> None:
    response = web.get(server.url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"data": {"status": "ok"}, "error": None, "meta": None}
    assert "x-ratelimit-limit" not in response.headers


def test_openapi_describes_every_route(server: LiveServer) -> None:
    response = web.get(server.url + "/v1/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    expected = {
        "/buckets": {"get", "post"},
        "/buckets/{bucket_id}": {"get", "patch", "delete"},
        "/buckets/{bucket_id}/files": {"get"},
        "/buckets/{bucket_id}/files/{key}": {"get", "head", "put", "patch", "delete"},
        "/keys": {"get", "post"},
        "/keys/{key_id}": {"get", "delete"},
        "/organization": {"get"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path


def test_oversized_json_body_is_413(client: httpx.Client) -> None:
    response = client.post("/buckets", content=b'{"name": "' + b"a" * 70_000 + b'"}')
    assert_error(response, 413, "body_too_large")


def test_deeply_nested_json_is_400(client: httpx.Client) -> None:
    response = client.post("/buckets", content=b"[" * 5000 + b"]" * 5000)
    assert_error(response, 400, "invalid_json")


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"name": "abc"}, "invalid_region", "region is required"),
        ({"region": "us-east-1"}, "invalid_bucket_name", "name is required"),
        (
            {"name": 5, "region": "us-east-1"},
            "invalid_bucket_name",
            "name must be a string, not a whole number",
        ),
        (
            {"name": "abc", "region": "us-east-1", "allowedContentTypes": [1]},
            None,
            "allowedContentTypes[0] must be a string, not a whole number",
        ),
        (
            {"name": "abc", "region": "us-east-1", "lifecycle": [{"prefix": 1}]},
            None,
            "lifecycle[0].prefix must be a string, not a whole number",
        ),
        (
            {"name": "abc", "region": "us-east-1", "lifecycle": [{"nope": 1}]},
            "unknown_field",
            "unknown field 'lifecycle[0].nope'",
        ),
    ],
)
def test_a_missing_or_mistyped_field_is_said_in_the_apis_words(
    client: httpx.Client, body: dict, code: str | None, message: str
) -> None:
    """Not the JSON decoder's own text ("Object missing required field `region`")."""
    answer = assert_error(client.post("/buckets", json=body), 400, code)
    assert answer["error"]["message"] == message
