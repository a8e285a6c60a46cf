"""What SIGHUP changes in a running server, and what waits for a restart.

With several workers the supervisor replaces them one at a time, each new one started
with the settings read again (`workers.py`); a single process applies what it can in
place: the plans (rate limits and quotas, read at each request from the engine's
`PlanTable`), the rate of requests without a key (`ratelimit.anonymous_rpm`), the log
level, and the TLS certificates (loaded into the listeners' SSL contexts, so new
connections get them). Either way the listening addresses, the data dir, the index, the
storage backend, the rate-limit store and window, and test mode keep their values until
a restart.
"""

from __future__ import annotations

import dataclasses
import logging
import ssl
from collections.abc import Callable, Sequence

import uvicorn

from gateway.http.anonymous import AnonymousLimit
from gateway.runtime import logs
from gateway.settings import Settings, SettingsError
from storage.engine import Engine

logger = logging.getLogger("bucketd.reload")

FIXED = (
    "host",
    "port",
    "s3_port",
    "data_dir",
    "workers",
    "index",
    "storage",
    "ratelimit",
    "test_mode",
)
"""Settings a running server keeps until it is restarted (of `ratelimit`, all but
`anonymous_rpm`). `test_mode` among them: a SIGHUP turning it off in new workers would
leave the clock's shared offset where a test put it, with no route left to put it back,
and one turning it on would open the surface without the start-up's warning."""
IN_PLACE = ("plans", "log_level", "tls_cert", "tls_key", "s3_tls_cert", "s3_tls_key")
"""Settings one process applies without a restart."""


def keeping_fixed(fresh: Settings, kept: Settings) -> Settings:
    """`fresh`, with the settings that need a restart as `kept` has them."""
    ratelimit = dataclasses.replace(kept.ratelimit, anonymous_rpm=fresh.ratelimit.anonymous_rpm)
    fixed = {name: getattr(kept, name) for name in FIXED} | {"ratelimit": ratelimit}
    return dataclasses.replace(fresh, **fixed)


def _differ(old: Settings, new: Settings) -> list[str]:
    return [
        f.name for f in dataclasses.fields(Settings) if getattr(old, f.name) != getattr(new, f.name)
    ]


class Reloader:
    """SIGHUP for one process: read the settings again and apply what can change."""

    def __init__(
        self,
        settings: Settings,
        load: Callable[[], Settings],
        engine: Engine,
        listeners: Sequence[uvicorn.Server],
        anonymous: AnonymousLimit,
    ) -> None:
        self.settings = settings
        self._load = load
        self._engine = engine
        self._listeners = listeners
        self._anonymous = anonymous

    def __call__(self) -> None:
        try:
            fresh = self._load()
        except SettingsError as exc:
            logger.error("SIGHUP: the settings do not load (%s); nothing changed", exc)
            return
        old, self.settings = self.settings, keeping_fixed(fresh, self.settings)
        changed = _differ(old, fresh)
        applied = []
        if self._engine.plans.replace(fresh.plans):
            applied.append("plans")
        if fresh.ratelimit.anonymous_rpm != self._anonymous.per_minute:
            self._anonymous.per_minute = fresh.ratelimit.anonymous_rpm
            applied.append("ratelimit.anonymous_rpm")
        if fresh.log_level != old.log_level:
            logs.set_level(fresh.log_level)
            applied.append(f"log level {fresh.log_level}")
        if self._reload_certificates(fresh):
            applied.append("TLS certificates")
        waiting = [name for name in changed if name not in IN_PLACE]
        if "ratelimit" in waiting and self.settings.ratelimit == fresh.ratelimit:
            waiting.remove("ratelimit")  # anonymous_rpm alone, applied
        logger.warning(
            "SIGHUP: settings read again; applied: %s; until a restart: %s",
            ", ".join(applied) or "nothing changed",
            ", ".join(waiting) or "nothing",
        )

    def _reload_certificates(self, fresh: Settings) -> bool:
        """The listeners' certificates read again from their files (they may have been
        renewed in place); False when neither listener serves TLS."""
        reloaded = False
        for listener, tls in zip(self._listeners, (fresh.api_tls(), fresh.s3_tls()), strict=False):
            context = listener.config.ssl
            if context is None or not tls:
                continue
            try:
                context.load_cert_chain(tls["ssl_certfile"], tls["ssl_keyfile"])
            except (OSError, ssl.SSLError) as exc:
                logger.error(
                    "SIGHUP: %s does not load (%s); keeping the old", tls["ssl_certfile"], exc
                )
                continue
            reloaded = True
        return reloaded
