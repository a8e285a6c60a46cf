"""One S3 request, resolved: who, which bucket and key, what query flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from storage.engine import Engine

from ..settings import Settings
from .auth import S3Principal
from .errors import S3Error


@dataclass
class S3Call:
    request: Request
    principal: S3Principal
    engine: Engine
    settings: Settings
    bucket: str | None
    key: str | None
    params: dict[str, str]
    request_id: str
    deadline: float

    def require(self, scope: str) -> None:
        if scope not in self.principal.key.scopes:
            raise S3Error("AccessDenied", f"the access key lacks the {scope} scope", 403)

    async def bucket_id(self) -> str:
        assert self.bucket is not None
        return (await self.engine.buckets.get_by_name(self.principal.actor, self.bucket)).id


Handler = Callable[[S3Call], Awaitable[Response]]
