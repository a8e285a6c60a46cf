"""`python -m benchmarks.s3_stack`: what the S3 listener's wrapper costs a request, against
the Starlette stack it replaced (issue 36 point 3) and against no wrapper at all.

All three run the same trivial endpoint (a 1 KiB GET answered from memory; a 1 KiB PUT
whose body is read) in this process, driven by ASGI messages with no server and no
socket, so only the layering differs:

- `starlette`: what `create_s3_app` built before: Starlette, its Router and Route, and the
  production middlewares (ForwardedMiddleware, ObserveMiddleware, CorsMiddleware,
  BodyMiddleware, which /v1 still uses);
- `listener`: `S3Listener` (`gateway/s3/listener.py`) with the same rules;
- `bare`: the endpoint called and its response sent, nothing else (the floor).

The stacks alternate over the rounds (so drift falls on each) and the median CPU per
request of each is reported. Test mode's journal and transport capture, and the access
line, are left out of both stacks (each is the same code in both).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import uvloop
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.http.cors import Cors, CorsMiddleware
from gateway.http.forwarded import ForwardedMiddleware, Proxies
from gateway.http.inputs import AnyPath  # noqa: F401 (its import registers the `path` convertor)
from gateway.http.metrics import Metrics
from gateway.http.middleware import BodyMiddleware
from gateway.http.observe import ObserveMiddleware, Observer, s3_upload
from gateway.s3.listener import METHODS, S3Listener
from storage.rules.cors import CorsRule

BODY = b"x" * 1024
HEADERS = [
    (b"host", b"127.0.0.1:9000"),
    (b"user-agent", b"Boto3/1.35.0 md/Botocore#1.35.0 ua/2.0 os/linux"),
    (b"accept-encoding", b"identity"),
    (b"x-amz-date", b"20261126T160000Z"),
    (b"x-amz-content-sha256", b"UNSIGNED-PAYLOAD"),
    (
        b"authorization",
        b"AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20261126/us-east-1/s3/aws4_request, "
        b"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + b"0" * 64,
    ),
]


async def _endpoint(request: Request) -> Response:
    if request.method == "PUT":
        await request.body()
        return Response(b"", 200, {"ETag": '"0"', "x-amz-request-id": "0"})
    return Response(BODY, 200, {"ETag": '"0"', "x-amz-request-id": "0"})


async def _no_rules(scope: Scope) -> list[CorsRule]:
    return []


def _refuse(scope: Scope, status: int, code: str, message: str) -> Response:
    return Response(code.encode(), status)


def starlette_stack(metrics: Metrics) -> ASGIApp:
    app = Starlette(
        routes=[Route("/{path:path}", _endpoint, methods=list(METHODS))],
        middleware=[
            Middleware(ForwardedMiddleware, proxies=Proxies()),
            Middleware(
                ObserveMiddleware,
                listener="s3",
                metrics=metrics,
                access_log=False,
                is_upload=s3_upload,
            ),
            Middleware(
                CorsMiddleware, rules_for=_no_rules, refuse=_refuse, options_need_origin=True
            ),
            Middleware(BodyMiddleware, deadline_seconds=300.0),
        ],
    )
    app.router.redirect_slashes = False
    return app


def listener_stack(metrics: Metrics) -> ASGIApp:
    return S3Listener(
        _endpoint,
        Cors(_no_rules, _refuse, options_need_origin=True),
        Observer("s3", metrics, access_log=False),
        None,
        Proxies(),
        300.0,
        capture=False,
    )


async def _bare(scope: Scope, receive: Receive, send: Send) -> None:
    response = await _endpoint(Request(scope, receive))
    await response(scope, receive, send)


def bare_stack(metrics: Metrics) -> ASGIApp:
    return _bare


STACKS = {"starlette": starlette_stack, "listener": listener_stack, "bare": bare_stack}


def _scope(method: str) -> Scope:
    headers = list(HEADERS)
    if method == "PUT":
        headers.append((b"content-length", b"1024"))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "server": ("127.0.0.1", 9000),
        "client": ("127.0.0.1", 50000),
        "root_path": "",
        "path": "/bucket/key",
        "raw_path": b"/bucket/key",
        "query_string": b"",
        "headers": headers,
    }


async def _drive(app: ASGIApp, method: str, count: int) -> float:
    """CPU seconds for `count` requests through `app`."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    body = BODY if method == "PUT" else b""
    started = time.process_time()
    for _ in range(count):
        await app(_scope(method), _one_body(body), send)
        sent.clear()
    return time.process_time() - started


def _one_body(body: bytes) -> Receive:
    """A `receive` that gives `body` in one message, then a disconnect."""
    messages: list[Message] = [{"type": "http.request", "body": body}]

    async def receive() -> Message:
        return messages.pop() if messages else {"type": "http.disconnect"}

    return receive


def run(count: int, rounds: int) -> dict[str, Any]:
    metrics = Metrics()
    apps = {name: build(metrics) for name, build in STACKS.items()}
    samples: dict[str, list[float]] = {f"{name} {m}": [] for name in apps for m in ("GET", "PUT")}
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        for app in apps.values():  # warm up: imports, caches
            runner.run(_drive(app, "GET", 200))
            runner.run(_drive(app, "PUT", 200))
        for _ in range(rounds):
            for name, app in apps.items():
                for method in ("GET", "PUT"):
                    seconds = runner.run(_drive(app, method, count))
                    samples[f"{name} {method}"].append(seconds * 1e6 / count)
    result: dict[str, Any] = {
        "us_per_request": {key: round(statistics.median(v), 1) for key, v in samples.items()},
        "ranges": {key: [round(min(v), 1), round(max(v), 1)] for key, v in samples.items()},
    }
    us = result["us_per_request"]
    for method in ("GET", "PUT"):
        old = us[f"starlette {method}"] - us[f"bare {method}"]
        new = us[f"listener {method}"] - us[f"bare {method}"]
        result[f"wrapper {method}: starlette over bare, listener over bare"] = [
            round(old, 1),
            round(new, 1),
        ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.s3_stack", description=__doc__)
    parser.add_argument("--count", type=int, default=5000, help="requests per stack per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(run(args.count, args.rounds), indent=2))


if __name__ == "__main__":
    main()
