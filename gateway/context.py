"""What every endpoint needs, built once by `create_app` and reached through the request."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from gateway.http.auth import Authenticator
from storage.engine import Engine

from .settings import Settings


@dataclass(frozen=True)
class Context:
    settings: Settings
    engine: Engine
    authenticator: Authenticator


def context(request: Request) -> Context:
    ctx: Context = request.app.state.context
    return ctx
