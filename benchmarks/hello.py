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


APP = Starlette(routes=[Route("/", hello), Route("/put", echo, methods=["PUT"])])
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
