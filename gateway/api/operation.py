"""How a /v1 operation is declared (`routes.py` holds the table of them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from bucketd_client import shapes
from gateway.api.pagination import MAX_LIMIT
from gateway.http.auth import Principal

Handler = Callable[[Request, Principal], Awaitable[Response]]
Answer = Literal["one", "list", "created", "written", "content", "nothing"]
"""`one`: the shape in the envelope; `list`: a page of shapes; `created`: the shape with a
201; `written`: `{object, id}`; `content`: raw bytes (a download); `nothing`: a 204."""


@dataclass(frozen=True, kw_only=True)
class Param:
    name: str
    location: Literal["query", "header"] = "query"
    schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "string"})


@dataclass(frozen=True, kw_only=True)
class Operation:
    method: str
    path: str
    """Under /v1, with `{name}` path parameters; `{key}` takes the rest of the path."""
    operation_id: str
    summary: str
    handler: Handler
    scope: str | None
    """The scope the key needs; None: any valid key."""
    answer: Answer
    shape: type[msgspec.Struct] | None = None
    body: type[shapes.Request] | Literal["content"] | None = None
    optional_body: bool = False
    """The JSON body may be left out (every field has a default)."""
    errors: tuple[int, ...] = ()
    """Statuses beyond 401, 429 and 500 (and 403 when a scope is needed)."""
    params: tuple[Param, ...] = ()
    prefixes: bool = False
    """A list whose meta carries common prefixes, with `hasMore` at the top level too."""
    links: Mapping[str, str] = field(default_factory=dict)
    """Parameters the answer gives to the operations in `link_to` (OpenAPI links)."""
    link_to: tuple[str, ...] = ()
    contents: Mapping[str, str] = field(default_factory=dict)
    """For a `content` answer: its statuses and what each means."""
    guests: bool = False
    """Also served without an API key: with a signed URL's token (`sharing.py`), or as
    nobody, where the bucket grants anyone the action."""
    action: str | None = None
    """On a bucket's path: what the route does to the bucket or file, as a bucket policy
    names it, decided before the handler runs (`access.py`); None: the bucket's
    organization only, the handler deciding each action it takes."""
    outsiders: bool = True
    """False: the bucket's organization's alone, whatever its policy grants others (its
    own keys still decided as `action`, so its Deny binds them)."""
    prefix_params: tuple[str, ...] = ("prefix",)
    """The query parameters that hold what a listing lists (the decision's `s3:prefix`):
    the first one present."""
    touches: frozenset[str] = frozenset()
    """What it reads beyond its path and decides as it reads it: `version` (versionId),
    `bypass` (bypassGovernance), `tagging` (tags a write sets), `rename` (a new key),
    `restore` (another version of a key)."""


LIMIT = Param(
    name="limit", schema={"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20}
)
CURSOR = Param(name="cursor")
