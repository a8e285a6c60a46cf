"""Faults on demand (test mode, docs/testing.md): rules that make S3 requests fail as S3's
own front end does, so an application's tests can watch its retries.

A rule names an operation (S3's name, e.g. `PutObject`, or `*`), a bucket and a key (glob
patterns), when it fires (`times`: the next N matching requests; or `probability` with a
`seed`: the n-th matching request fires when a generator seeded with `seed` and n says so,
the same sequence on every run), and the fault: `SlowDown` (503) or `InternalError` (500)
in S3's XML; `delay` (`delaySeconds` before the request is served); `reset` (the connection
closed with a TCP reset, no response); `truncate` (a GetObject answered with its full
Content-Length and only `truncateAfter` bytes of its body, then the connection closed);
`stale` (a ListObjects, ListObjectsV2 or ListObjectVersions answered as it would have been
`staleSeconds` ago by the server's clock, as far as the index still tells: the engine's
"as of" listing, `storage/index/version_listing.py`). Every fault but `truncate` and
`stale` acts before the operation runs, so a faulted PUT stores nothing.

The rules live in a table in shared memory made before `--workers` fork (as the clock's
offset), read and changed under a POSIX record lock: every worker sees the same rules, and
a match is counted once whichever worker served it, so "the next 2" are two requests of
the server, and a seeded sequence does not depend on which worker drew which request. A
request reads one integer when the table is empty; otherwise it decodes the table, which
holds at most `MOST_RULES` rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import mmap
import os
import random
import socket
import struct
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from typing import Any

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .errors import S3Error

SIZE = 1 << 18
LENGTH = struct.Struct("<I")
CLEARED = struct.Struct("<Q")
"""How many times the rules were cleared: the table's last 8 bytes, read without the lock
by the requests a `delay` holds, which end when it changes."""
CLEARED_AT = SIZE - CLEARED.size
HELD_POLL_SECONDS = 0.1
MOST_RULES = 100
FAULTS = ("SlowDown", "InternalError", "delay", "reset", "truncate", "stale")
MOST_DELAY_SECONDS = 300.0
MOST_STALE_SECONDS = 366 * 86400.0
LISTINGS = ("ListObjects", "ListObjectsV2", "ListObjectVersions")
"""The operations a `stale` rule acts on."""
MOST_PATTERN = {"bucket": 255, "key": 1024}
"""The longest `bucket` and `key` patterns (a bucket's name has at most 63 characters, a
key at most 1,024 bytes). The bound is what keeps a rule from stalling the listener: a glob
becomes a regular expression in the worker that first matches a request against it, on
its event loop and under the table's lock, and `fnmatch` takes time quadratic in the
pattern's length to translate some (20,000 `[` took 10 s, and a body of 64 KiB holds
60,000; 1,024 take 50 ms, once per worker); matching one against a key of 1,024
characters takes under a millisecond."""
TRANSPORT = "bucketd.transport"
"""The scope's key for the connection's transport (`capture_transport`)."""


class RuleError(ValueError):
    """A rule that cannot be applied: the control surface answers 400 with its message."""


@dataclass
class FaultRule:
    operation: str
    fault: str
    bucket: str = "*"
    key: str = "*"
    times: int | None = None
    probability: float | None = None
    seed: int = 0
    delay_seconds: float | None = None
    truncate_after: int | None = None
    stale_seconds: float | None = None
    id: str = ""
    matched: int = 0
    """Requests the rule matched (a probability rule's draws)."""
    fired: int = 0
    """Requests it failed (or delayed)."""

    def check(self, operations: frozenset[str]) -> None:
        for field, most in MOST_PATTERN.items():
            if len(getattr(self, field)) > most:
                raise RuleError(f"{field} must be a pattern of at most {most} characters")
        if self.operation != "*" and self.operation not in operations:
            raise RuleError(f"operation must be an S3 operation's name or *: {self.operation}")
        if self.fault not in FAULTS:
            raise RuleError("fault must be one of " + ", ".join(FAULTS))
        if (self.times is None) == (self.probability is None):
            raise RuleError("give one of times and probability")
        if self.times is not None and self.times < 1:
            raise RuleError("times must be at least 1")
        if self.probability is not None and not 0 < self.probability <= 1:
            raise RuleError("probability must be above 0 and at most 1")
        if (self.fault == "delay") != (self.delay_seconds is not None):
            raise RuleError("delaySeconds goes with, and only with, the delay fault")
        if self.delay_seconds is not None and not 0 < self.delay_seconds <= MOST_DELAY_SECONDS:
            raise RuleError(f"delaySeconds must be above 0 and at most {MOST_DELAY_SECONDS:g}")
        if (self.fault == "truncate") != (self.truncate_after is not None):
            raise RuleError("truncateAfter goes with, and only with, the truncate fault")
        if self.fault == "truncate" and self.operation != "GetObject":
            raise RuleError("the truncate fault cuts a body: its operation is GetObject")
        if self.truncate_after is not None and self.truncate_after < 0:
            raise RuleError("truncateAfter must not be negative")
        if (self.fault == "stale") != (self.stale_seconds is not None):
            raise RuleError("staleSeconds goes with, and only with, the stale fault")
        if self.fault == "stale" and (self.operation not in LISTINGS or self.key != "*"):
            raise RuleError(
                "the stale fault acts on listings, which name no key: its operation is one of "
                + ", ".join(LISTINGS)
                + ", its key *"
            )
        if self.stale_seconds is not None and not 0 < self.stale_seconds <= MOST_STALE_SECONDS:
            raise RuleError(f"staleSeconds must be above 0 and at most {MOST_STALE_SECONDS:g}")

    def matches(self, operation: str, bucket: str | None, key: str | None) -> bool:
        if self.operation not in ("*", operation):
            return False
        if self.bucket != "*" and (bucket is None or not fnmatchcase(bucket, self.bucket)):
            return False
        return self.key == "*" or (key is not None and fnmatchcase(key, self.key))

    def draw(self) -> bool:
        """Whether this match fires; counts it."""
        self.matched += 1
        if self.times is not None:
            fire = self.fired < self.times
        else:
            assert self.probability is not None
            fire = random.Random(f"{self.seed}:{self.matched}").random() < self.probability
        self.fired += fire
        return fire

    def shown(self) -> dict[str, Any]:
        """Its wire form (camelCase; unset options left out)."""
        fields = {_camel(name): value for name, value in asdict(self).items()}
        return {name: value for name, value in fields.items() if value is not None}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)


class FaultTable:
    """The server's rules, in a shared mapping: a 4-byte length, then their JSON."""

    def __init__(self) -> None:
        self._fd = os.memfd_create("bucketd-faults", 0)
        os.ftruncate(self._fd, SIZE)
        self._memory = mmap.mmap(self._fd, SIZE)

    @contextlib.contextmanager
    def _locked(self) -> Any:
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def _read(self) -> tuple[int, list[FaultRule]]:
        (length,) = LENGTH.unpack_from(self._memory)
        if length == 0:
            return 0, []
        stored = json.loads(self._memory[LENGTH.size : LENGTH.size + length])
        return stored["last"], [FaultRule(**rule) for rule in stored["rules"]]

    def _write(self, last: int, rules: list[FaultRule]) -> None:
        encoded = json.dumps({"last": last, "rules": [asdict(r) for r in rules]}).encode()
        if LENGTH.size + len(encoded) > CLEARED_AT:
            raise RuleError("the rules do not fit the table: clear some first")
        self._memory[LENGTH.size : LENGTH.size + len(encoded)] = encoded
        LENGTH.pack_into(self._memory, 0, len(encoded) if rules else 0)

    def rules(self) -> list[FaultRule]:
        with self._locked():
            return self._read()[1]

    def add(self, rule: FaultRule) -> FaultRule:
        with self._locked():
            last, rules = self._read()
            if len(rules) >= MOST_RULES:
                raise RuleError(f"at most {MOST_RULES} rules: clear them first")
            rule.id = f"fault-{last + 1}"
            self._write(last + 1, [*rules, rule])
            return rule

    def clear(self) -> None:
        """Remove every rule, and end the delays they hold."""
        with self._locked():
            self._write(0, [])
            CLEARED.pack_into(self._memory, CLEARED_AT, self.cleared() + 1)

    def cleared(self) -> int:
        """How many times the rules were cleared (changes when they are)."""
        value: int = CLEARED.unpack_from(self._memory, CLEARED_AT)[0]
        return value

    def pick(self, operation: str, bucket: str | None, key: str | None) -> FaultRule | None:
        """The first rule that matches the request and fires, counted; None (after one
        unlocked read) when there are no rules."""
        if LENGTH.unpack_from(self._memory)[0] == 0:
            return None
        with self._locked():
            last, rules = self._read()
            fired = None
            for rule in rules:
                if rule.matches(operation, bucket, key) and rule.draw():
                    fired = rule
                    break
            self._write(last, rules)
            return fired


async def before(rule: FaultRule, scope: Scope, table: FaultTable) -> Response | None:
    """Apply a rule before the operation: raise its S3 error, wait its delay (None: serve
    the request), or reset the connection (a response that sends nothing). A delay ends
    early when the rules are cleared, as a test's fixture does when the test ends: a
    request still held would otherwise keep the server from stopping until its graceful
    shutdown's 10 s ran out."""
    if rule.fault == "SlowDown":
        raise S3Error("SlowDown", "Please reduce your request rate.", 503)
    if rule.fault == "InternalError":
        raise S3Error("InternalError", "We encountered an internal error. Please try again.", 500)
    if rule.fault == "delay":
        assert rule.delay_seconds is not None
        loop = asyncio.get_running_loop()
        until, cleared = loop.time() + rule.delay_seconds, table.cleared()
        while (left := until - loop.time()) > 0 and table.cleared() == cleared:
            await asyncio.sleep(min(left, HELD_POLL_SECONDS))
        return None
    if rule.fault == "reset":
        transport = scope.get(TRANSPORT)
        if transport is not None:
            sock = transport.get_extra_info("socket")
            if sock is not None:  # a zero linger: close() sends a reset, not a FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            await asyncio.sleep(0)  # the server hears of the loss: nothing more is sent
        return Response(b"", 500)
    return None


class _Cut(Exception):
    pass


class TruncatedResponse(Response):
    """`inner`'s status, headers (its Content-Length whole) and first `limit` bytes; then
    the connection is closed, as a connection lost mid-body ends."""

    def __init__(self, inner: Response, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.status_code = inner.status_code
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        left = self.limit

        async def cutting(message: Message) -> None:
            nonlocal left
            if message["type"] != "http.response.body":
                await send(message)
                return
            body: bytes = message.get("body", b"")
            if len(body) < left or (len(body) == left and not message.get("more_body")):
                left -= len(body)
                await send(message)
                return
            await send({"type": "http.response.body", "body": body[:left], "more_body": True})
            raise _Cut

        with contextlib.suppress(_Cut):
            await self.inner(scope, receive, cutting)
            return  # a body no longer than the limit went whole
        transport = scope.get(TRANSPORT)
        if transport is not None:
            transport.close()  # sends what was written, then closes
            await asyncio.sleep(0)  # the server hears of it, and logs no unfinished answer


def capture_transport(scope: Scope, receive: Receive) -> None:
    """Test mode: the connection's transport into the scope, for `reset` and `truncate`
    (first thing the S3 listener does with a request). uvicorn's `receive` is a method of
    its request cycle, which holds the transport; under another server there is none, and
    a reset becomes a 500, a truncated body one that uvicorn's own handling closes."""
    cycle = getattr(receive, "__self__", None)
    scope[TRANSPORT] = getattr(cycle, "transport", None)
