"""The ceiling: a minimal Starlette app on exactly bucketd's Uvicorn settings.

`python -m benchmarks.hello PORT` serves `GET /` with a small JSON body. No Python ASGI
service on this machine answers faster; bucketd's small-request rates are read against it.
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.envelope import ok
from gateway.server import uvicorn_config


async def hello(request: Request) -> Response:
    return ok({"hello": "world"})


async def echo(request: Request) -> Response:
    async for _chunk in request.stream():
        pass
    return ok({"stored": True}, status=201)


def main() -> None:
    app = Starlette(routes=[Route("/", hello), Route("/put", echo, methods=["PUT"])])
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", int(sys.argv[1])))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(server.serve())


if __name__ == "__main__":
    main()
