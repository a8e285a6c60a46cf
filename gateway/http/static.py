"""The web console: static files under /console, served as they are in `gateway/console/`.

The console is a client of the public /v1 API like any other; it needs no route of its own.
Its pages get a strict Content-Security-Policy (scripts and styles from this origin only,
images also from blob: URLs for previews), so nothing a file name or a file holds can run.
"""

from __future__ import annotations

from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

CONSOLE_DIR = Path(__file__).parent.parent / "console"
CONSOLE_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}


class ConsoleFiles:
    """StaticFiles with the console's security headers on every answer."""

    def __init__(self, directory: Path) -> None:
        self.files = StaticFiles(directory=directory, html=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in CONSOLE_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.files(scope, receive, send_with_headers)


async def console_redirect(request: Request) -> Response:
    return RedirectResponse("/console/", status_code=308)


def console_routes() -> list[BaseRoute]:
    return [
        Route("/", console_redirect, methods=["GET", "HEAD"]),
        Route("/console", console_redirect, methods=["GET", "HEAD"]),
        Mount("/console", app=ConsoleFiles(CONSOLE_DIR), name="console"),
    ]
