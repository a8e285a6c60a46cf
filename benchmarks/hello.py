"""The ceiling: a minimal Starlette app on exactly bucketd's Uvicorn settings.

`python -m benchmarks.hello PORT` serves `GET /` with a small JSON body. No Python ASGI
service on this machine answers faster; bucketd's small-request rates are read against it.
"""

from __future__ import annotations

import asyncio
import os
import sys

import uvicorn
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.http.envelope import ok
from gateway.runtime.server import bind, uvicorn_config


async def hello(request: Request) -> Response:
    return ok({"hello": "world"})


async def echo(request: Request) -> Response:
    async for _chunk in request.stream():
        pass
    return ok({"stored": True}, status=201)


OBJECT = bytes(1024)


async def any_object(request: Request) -> Response:
    """What the S3 peers benchmark asks of the empty app (`benchmarks/peers.py`, `empty`):
    a PUT of any path read and answered 200, a GET answered with 1 KiB; no parsing of the
    S3 request, no signature checked."""
    if request.method == "PUT":
        async for _chunk in request.stream():
            pass
        return Response(status_code=200)
    return Response(OBJECT, media_type="application/octet-stream")


APP = Starlette(
    routes=[
        Route("/", hello),
        Route("/put", echo, methods=["PUT"]),
        Route("/{path:path}", any_object, methods=["GET", "PUT"]),
    ]
)
"""Also served by Granian in `benchmarks/servers.py` (`benchmarks.hello:APP`)."""


def main() -> None:
    """`python -m benchmarks.hello PORT [PROCESSES]`: PROCESSES (1) share one socket, as
    `bucketd serve --workers` does."""
    processes = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sock = bind("127.0.0.1", int(sys.argv[1]))
    sock.listen(2048)
    for _ in range(processes - 1):
        if os.fork() == 0:
            break
    server = uvicorn.Server(uvicorn_config(APP, "127.0.0.1", int(sys.argv[1])))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
