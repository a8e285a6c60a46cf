"""The tests' HTTP calls: httpx's own, with one TLS context per process.

httpx builds a new SSL context for every client it makes, reading certifi's CA bundle each
time: 23 ms of CPU per `httpx.get` or `httpx.Client()`, the largest single cost of the
test processes (the suite makes thousands, and a server start polls /healthz with them).
Every client made here shares `CONTEXT` instead; a test that needs its own trust passes
`verify=` as it would to httpx. Each call still makes a client of its own, so no connection
is reused between calls that httpx would not reuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

CONTEXT = httpx.create_ssl_context()
CLIENT_OPTIONS = ("cookies", "proxy", "verify", "timeout", "trust_env")


def client(**options: Any) -> httpx.Client:
    options.setdefault("verify", CONTEXT)
    return httpx.Client(**options)


def async_client(**options: Any) -> httpx.AsyncClient:
    options.setdefault("verify", CONTEXT)
    return httpx.AsyncClient(**options)


def _split(options: dict[str, Any]) -> dict[str, Any]:
    return {name: options.pop(name) for name in CLIENT_OPTIONS if name in options}


def request(method: str, url: str, **options: Any) -> httpx.Response:
    """`httpx.request`: the client's options (timeout, verify...) and the request's."""
    with client(**_split(options)) as http:
        return http.request(method, url, **options)


@contextmanager
def stream(method: str, url: str, **options: Any) -> Iterator[httpx.Response]:
    with client(**_split(options)) as http, http.stream(method, url, **options) as response:
        yield response


def get(url: str, **options: Any) -> httpx.Response:
    return request("GET", url, **options)


def head(url: str, **options: Any) -> httpx.Response:
    return request("HEAD", url, **options)


def options(url: str, **options: Any) -> httpx.Response:
    return request("OPTIONS", url, **options)


def post(url: str, **options: Any) -> httpx.Response:
    return request("POST", url, **options)


def put(url: str, **options: Any) -> httpx.Response:
    return request("PUT", url, **options)


def patch(url: str, **options: Any) -> httpx.Response:
    return request("PATCH", url, **options)


def delete(url: str, **options: Any) -> httpx.Response:
    return request("DELETE", url, **options)
