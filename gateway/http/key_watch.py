"""Responses that outlive the check of their key (the event stream, large downloads) go on
only while that key holds: once it is revoked or expires, they end.

A check reads the revocation count (`generation.py`: bumped by every revocation this
process hears of, its own and, through commit notices, other processes' and gateways')
and the clock. The key is looked up again only when the count moved (some key was
revoked), its expiry came, or `key_cache_seconds` passed since it was last verified: the
bound the cache of verified keys gives a revocation no count reports (the CLI's, on a
SQLite index). A lookup that fails ends the response, as it would refuse a new request.
"""

from __future__ import annotations

from starlette.types import Scope

from gateway.http.generation import Generation
from storage.engine import Engine
from storage.errors import StorageError
from storage.models import Actor, ApiKey


class KeyWatch:
    """One per process, shared by both listeners' apps (as `app.state.key_watch`)."""

    def __init__(self, engine: Engine, revocations: Generation, seconds: float) -> None:
        self.engine = engine
        self.revocations = revocations
        self.seconds = seconds

    def watch(self, key: ApiKey) -> WatchedKey:
        """`key`, as verified just now (by the request's authentication)."""
        return WatchedKey(self, key)


class WatchedKey:
    def __init__(self, watch: KeyWatch, key: ApiKey) -> None:
        self._watch = watch
        self._key = key
        self._generation = watch.revocations.value()
        self._until = self._deadline(key, watch.engine.clock.time())
        self._ended = False

    def _deadline(self, key: ApiKey, now: float) -> float:
        until = now + self._watch.seconds
        return until if key.expires_at is None else min(until, key.expires_at)

    async def holds(self) -> bool:
        """Whether the key is still neither revoked nor expired. Cheap unless something
        changed (see the module's docstring); once False, always False."""
        if (
            self._generation == self._watch.revocations.value()
            and self._watch.engine.clock.time() < self._until
        ):
            return True
        return await self._verify()

    async def _verify(self) -> bool:
        if self._ended:
            return False
        generation = self._watch.revocations.value()  # read first: a later bump is seen
        owner = Actor(org_id=self._key.org_id, bucket_id=None)
        try:
            key: ApiKey | None = await self._watch.engine.keys.get(owner, self._key.id)
        except StorageError:
            key = None
        now = self._watch.engine.clock.time()
        if (
            key is None
            or key.revoked_at is not None
            or (key.expires_at is not None and now >= key.expires_at)
        ):
            self._ended = True
            return False
        self._generation = generation
        self._until = self._deadline(key, now)
        return True


def key_watch(scope: Scope) -> KeyWatch:
    watch: KeyWatch = scope["app"].state.key_watch
    return watch


def watching(scope: Scope) -> WatchedKey | None:
    """The key that authenticated this request (API key, S3 credential, a signed URL's
    signer), watched; None for a request without one."""
    principal = scope.get("state", {}).get("principal")
    if principal is None or getattr(principal, "anonymous", False):
        return None
    key = getattr(principal, "key", None)
    return key_watch(scope).watch(key) if isinstance(key, ApiKey) else None
