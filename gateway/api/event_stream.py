"""GET /v1/events: the live stream of a bucket's (or the organization's) events, as
Server-Sent Events, resumable from the outbox with `Last-Event-ID`; it ends once its key is
revoked or expires (`key_watch.py`), within CHECK_SECONDS even when no event comes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.api.access import requester
from gateway.context import context
from gateway.http.auth import Principal
from gateway.http.errors import ApiError, bad_request
from gateway.http.inputs import text_param
from gateway.http.key_watch import WatchedKey, key_watch
from storage.errors import StorageError
from storage.rules.events import PATTERNS, Event, event_number, message
from storage.services.event_log import EventLog

BATCH = 200
CHECK_SECONDS = 1.0


def _after(request: Request) -> int | None:
    """The event number (in the key's organization) to resume after, if any."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    if raw is None or raw == "":
        return None
    number = event_number(raw)
    if number is None:
        raise bad_request("Last-Event-ID is an event id (evt_...)", "invalid_event_id")
    return number


def _patterns(request: Request) -> list[str]:
    raw = request.query_params.get("types") or "s3:*"
    patterns = [p.strip() for p in raw.split(",") if p.strip()]
    if not patterns or any(p not in PATTERNS for p in patterns):
        raise bad_request(f"types is a comma-separated list of: {', '.join(PATTERNS)}")
    return patterns


def frame(event: Event) -> bytes:
    data = json.dumps(message(event), separators=(",", ":"))
    return f"id: {event.event_id}\nevent: {event.name}\ndata: {data}\n\n".encode()


async def stream_events(request: Request, principal: Principal) -> Response:
    """Events after `Last-Event-ID` (or `after`), else from now on; `bucketId`, `types`
    and `prefix` narrow them. A comment line every `events.stream_keepalive_seconds` keeps
    proxies from closing it."""
    log = context(request).engine.events
    keepalive = context(request).settings.events.stream_keepalive_seconds
    bucket_id = request.query_params.get("bucketId") or None
    patterns = _patterns(request)
    prefix = text_param(request, "prefix")
    number = _after(request)
    if number is None:
        after = await log.latest()
    else:
        after = await log.seq_after(principal.actor.org_id, number)
    first = await log.after(principal.actor, bucket_id, after, BATCH)  # 404 before streaming
    held = key_watch(request.scope).watch(principal.key)
    visible = Visible(request, principal, keepalive)
    if bucket_id is not None and not await visible.bucket(bucket_id):
        raise ApiError(403, "access_denied", "the bucket's policy refuses its events to this key")

    async def body() -> AsyncIterator[bytes]:
        cursor = after
        found = first
        quiet = 0.0
        yield b"retry: 1000\n\n"
        while await held.holds():
            for event in found:
                cursor = event.seq
                if event.matches(patterns, prefix) and await visible.bucket(event.bucket_id):
                    yield frame(event)
            if len(found) < BATCH:
                started = asyncio.get_running_loop().time()
                if not await _wait(log, held, keepalive - quiet, principal.actor.org_id):
                    return
                quiet += asyncio.get_running_loop().time() - started
            found = await log.after(principal.actor, bucket_id, cursor, BATCH)
            if found:
                quiet = 0.0
            elif quiet >= keepalive - 0.01:
                quiet = 0.0
                yield b": keep-alive\n\n"

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class Visible:
    """Whose events a stream shows: a bucket's, to a key its policy lets list the bucket
    (s3:ListBucket: the events name its keys), decided once per bucket and keep-alive."""

    def __init__(self, request: Request, principal: Principal, keepalive: float) -> None:
        self._engine = context(request).engine
        self._principal = principal
        self._who = requester(request, principal.key)
        self._known: dict[str, bool] = {}
        self._until = 0.0
        self._keepalive = keepalive

    async def bucket(self, bucket_id: str) -> bool:
        now = asyncio.get_running_loop().time()
        if now >= self._until:  # a changed policy is in force within a keep-alive
            self._known.clear()
            self._until = now + self._keepalive
        known = self._known.get(bucket_id)
        if known is None:
            try:
                found = await self._engine.buckets.get(self._principal.actor, bucket_id)
                await self._engine.access.check(self._who, "s3:ListBucket", found)
                known = True
            except StorageError:
                known = False
            self._known[bucket_id] = known
        return known


async def _wait(log: EventLog, held: WatchedKey, timeout: float, org_id: str) -> bool:
    """Until the organization's next events or `timeout` (True), or until the key no longer
    holds (False), checked every CHECK_SECONDS: one waiter throughout, so no wake is lost."""
    waiting = asyncio.ensure_future(log.wait(timeout, org_id))
    try:
        while True:
            done, _ = await asyncio.wait([waiting], timeout=CHECK_SECONDS)
            if not await held.holds():
                return False
            if done:
                return True
    finally:
        waiting.cancel()
