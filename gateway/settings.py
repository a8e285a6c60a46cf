"""Settings: one typed object built once at start-up, from four layers.

Lowest to highest: built-in defaults, the TOML file, `BUCKETD_*` environment variables,
command-line flags. Names in the environment are the setting's path upper-cased with tables
joined by `__` (`BUCKETD_UPLOADS__DEADLINE_SECONDS`); lists are JSON. Unknown keys in the
file are an error; unknown environment variables are ignored (clients use `BUCKETD_URL`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.http.forwarded import HEADERS as CLIENT_ADDRESS_HEADERS
from gateway.http.forwarded import Proxies
from gateway.runtime.logs import FORMATS, LEVELS
from storage.config import (
    DEFAULT_REGIONS,
    INLINE_CEILING,
    PLAN_NAMES,
    EngineConfig,
    EventSettings,
    IndexSettings,
    LifecycleSettings,
    Plans,
    ScrubSettings,
    StorageSettings,
    UploadSettings,
    setting,
)
from storage.errors import InvalidInput
from storage.rules.validation import check_bucket_name, check_s3_credentials

from .settings_loader import (
    SettingsError as SettingsError,
)
from .settings_loader import (
    build,
    env_list,
    leaf_types,
    merge,
)

ENV_PREFIX = "BUCKETD_"


@dataclass(frozen=True)
class RateLimitSettings:
    redis_url: str = setting(
        "",
        'Share rate limits across gateways in this Redis ("redis://HOST:PORT/DB"); empty: '
        "count in each process.",
    )
    window_seconds: int = setting(
        60,
        "Length of a rate-limit window; windows are aligned to multiples of it (60: the "
        "clock minute, as the plans' requests_per_minute mean).",
    )
    anonymous_rpm: int = setting(
        1000,
        "Requests per window without a valid key (public downloads, signed URLs, form "
        "uploads, refused ones) from one client address; 0: no limit. A bucket's own "
        "anonymousRequestsPerMinute replaces it for requests naming that bucket that carry "
        "no key at all. SIGHUP applies a new value.",
    )


@dataclass(frozen=True)
class ConnectionSettings:
    head_timeout_seconds: float = setting(
        10.0,
        "A request line and headers not complete this long after the connection opened (or "
        "the request began) get a 408 and the connection is closed.",
    )
    max_total: int = setting(
        8192,
        "Connections open at once, both listeners together; past it a new one gets a 503. "
        "Kept below the process's file limit.",
    )
    max_per_client: int = setting(
        1024,
        "Connections open at once from one client address (raise it behind a proxy that "
        "does not hide itself); past it a new one gets a 503.",
    )


@dataclass(frozen=True)
class BootstrapSettings:
    access_key_id: str = setting(
        "",
        "On start, an S3 credential with this access key id (and secret_access_key) in the "
        "default organization, with every /v1 scope (not metrics:read); also a /v1 key by "
        "HTTP Basic auth. Env: BUCKETD_ACCESS_KEY_ID. Changing it rotates the credential.",
    )
    secret_access_key: str = setting(
        "", "The secret of access_key_id (never printed). Env: BUCKETD_SECRET_ACCESS_KEY."
    )
    buckets: list[str] = setting(
        [],
        "Buckets made on start in the default organization, active before the server is "
        "ready. Env: BUCKETD_BUCKETS=photos,logs.",
    )
    plan: str = setting(
        "",
        "The default organization's plan, set on start (empty: as made, pro). Env: BUCKETD_PLAN.",
    )


ALIASES = {
    "BUCKETD_ACCESS_KEY_ID": ("bootstrap", "access_key_id"),
    "BUCKETD_SECRET_ACCESS_KEY": ("bootstrap", "secret_access_key"),
    "BUCKETD_BUCKETS": ("bootstrap", "buckets"),
    "BUCKETD_PLAN": ("bootstrap", "plan"),
}
"""Short environment names for the bootstrap settings, the ones CI jobs set."""


@dataclass(frozen=True)
class Settings:
    host: str = setting("127.0.0.1", "Address the HTTP API listens on.")
    port: int = setting(8080, "Port of the HTTP API.")
    workers: int = setting(
        0,
        "Processes serving the same ports and data dir (0: one per core; 1: a single "
        "process, no supervisor). SIGHUP replaces them one at a time.",
    )
    data_dir: Path = setting(Path("./data"), "Blobs, the SQLite index, temp files and admin.key.")
    id_prefix: str = setting("svc_", "Prefix of ids and API keys.")
    provisioning_delay_seconds: float = setting(0.0, "Extra time a new bucket stays provisioning.")
    provisioning_lease_seconds: float = setting(
        30.0,
        "How long a gateway's claim on a bucket it provisions lasts; another gateway takes "
        "over a claim that ran out (its gateway died).",
    )
    regions: list[str] = setting(list(DEFAULT_REGIONS), "Regions a bucket may be created in.")
    max_json_bytes: int = setting(65536, "Largest JSON request body accepted (413 past it).")
    key_cache_seconds: float = setting(
        2.0,
        "How long a verified API key or S3 credential is trusted without a lookup; bounds how "
        "long a key revoked from the command line keeps working (its streams and downloads too).",
    )
    s3_port: int = setting(
        9000, "Port of the S3-compatible endpoint; 0: any free port (the ready file names it)."
    )
    s3_enabled: bool = setting(True, "Serve the S3-compatible endpoint; false turns it off.")
    s3_domain: str = setting(
        "localhost", "Virtual-host-style S3 addressing: <bucket>.<s3_domain> names a bucket."
    )
    tls_cert: str = setting(
        "", "PEM certificate (chain): serve the API, and the S3 endpoint, over HTTPS."
    )
    tls_key: str = setting("", "PEM private key of tls_cert.")
    s3_tls_cert: str = setting(
        "", "PEM certificate of the S3 endpoint alone (empty: tls_cert, if any)."
    )
    s3_tls_key: str = setting("", "PEM private key of s3_tls_cert.")
    trusted_proxies: list[str] = setting(
        [],
        "Addresses or CIDR ranges of the proxies in front (a load balancer) whose "
        "client_address_header (and X-Forwarded-Proto) are believed: the client's address "
        "for aws:SourceIp, per-address rate limits and the access log; empty: nobody's.",
    )
    client_address_header: str = setting(
        "X-Forwarded-For",
        'The header the trusted proxies write the client\'s address in: "X-Forwarded-For" '
        "(nginx, Caddy, Traefik, HAProxy's option forwardfor) or \"Forwarded\" (RFC 7239's "
        "for=, with proto=); the other one is never read.",
    )
    cors_origins: list[str] = setting(
        [],
        "Browser origins (each with at most one '*') allowed to call the /v1 management API "
        'from a page, e.g. ["https://admin.example.com"]; file paths follow their bucket\'s '
        "CORS rules first.",
    )
    access_log: bool = setting(True, "One line per request on stderr (bucketd.access).")
    log_format: str = setting(
        "auto",
        '"json" (every line on stderr a JSON object), "text" (for a person), or "auto": text '
        "when stderr is a terminal, else JSON.",
    )
    log_level: str = setting("info", "debug, info, warning or error; SIGHUP sets it again.")
    metrics_public: bool = setting(
        False, "Serve GET /metrics without a key (else a key with the metrics:read scope)."
    )
    test_mode: bool = setting(
        False,
        "Serve the test-mode control surface under /_bucketd/test/ (the server's clock): "
        "for tests only, off unless turned on; on in `bucketd dev`. Env: BUCKETD_TEST_MODE.",
    )
    test_journal_entries: int = setting(
        10000,
        "Test mode's journal of requests keeps this many, the newest; each new one drops "
        "the oldest beyond it. Env: BUCKETD_TEST_JOURNAL_ENTRIES.",
    )
    connections: ConnectionSettings = setting(
        ConnectionSettings(), "Limits on connections, before a request reaches the app."
    )
    uploads: UploadSettings = setting(UploadSettings(), "Upload limits and defaults.")
    plans: Plans = setting(Plans(), "Rate limits and quotas per plan.")
    storage: StorageSettings = setting(StorageSettings(), "Where file contents are kept.")
    index: IndexSettings = setting(IndexSettings(), "Where the metadata index is kept.")
    ratelimit: RateLimitSettings = setting(RateLimitSettings(), "Where rate limits are counted.")
    scrub: ScrubSettings = setting(ScrubSettings(), "Re-hashing stored contents (deep scrub).")
    lifecycle: LifecycleSettings = setting(
        LifecycleSettings(), "The worker that applies buckets' lifecycle rules."
    )
    events: EventSettings = setting(EventSettings(), "The outbox, webhooks and their delivery.")
    bootstrap: BootstrapSettings = setting(
        BootstrapSettings(), "Credentials, buckets and plan made on start (for CI and dev)."
    )

    def api_tls(self) -> dict[str, str]:
        """Uvicorn's TLS arguments for the API listener (none: plain HTTP)."""
        return _tls(self.tls_cert, self.tls_key)

    def s3_tls(self) -> dict[str, str]:
        if self.s3_tls_cert:
            return _tls(self.s3_tls_cert, self.s3_tls_key)
        return self.api_tls()

    def proxies(self) -> Proxies:
        """Whose word both listeners take for the client's address (`forwarded.py`)."""
        return Proxies.of(self.trusted_proxies, self.client_address_header)

    def worker_count(self) -> int:
        """`workers`, else one per core; one where the index is held in memory (each
        process would have an index of its own)."""
        return self.workers or (1 if self.index.in_memory else len(os.sched_getaffinity(0)))

    def unthrottled_access_key(self) -> str | None:
        """The S3 credential the environment gives (`BUCKETD_ACCESS_KEY_ID`), which no rate
        limit counts: the operator's own (a CI job's 1,001st PUT in a minute is not a
        SlowDown), unless `BUCKETD_PLAN` asks for a plan, whose limits then apply."""
        boot = self.bootstrap
        return boot.access_key_id if boot.access_key_id and not boot.plan else None

    def delivery_process(self) -> bool:
        """Whether `bucketd serve` forks a process of its own to deliver webhooks: as
        `events.process` says, never where the index is held in memory (that process
        would not see it)."""
        return self.events.process and not self.index.in_memory

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            workers=self.worker_count(),
            data_dir=self.data_dir,
            id_prefix=self.id_prefix,
            provisioning_delay_seconds=self.provisioning_delay_seconds,
            provisioning_lease_seconds=self.provisioning_lease_seconds,
            regions=tuple(self.regions),
            uploads=self.uploads,
            plans=self.plans,
            storage=self.storage,
            index=self.index,
            scrub=self.scrub,
            lifecycle=self.lifecycle,
            events=self.events,
        )


def _tls(cert: str, key: str) -> dict[str, str]:
    return {"ssl_certfile": cert, "ssl_keyfile": key} if cert else {}


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings; raises SettingsError naming the offending key."""
    layered: dict[str, Any] = {}
    if config_file is not None:
        try:
            with open(config_file, "rb") as handle:
                from_file = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read {config_file}: {exc}") from exc
        merge(layered, from_file)
    merge(layered, _from_environment(environ or {}))
    merge(layered, {k: v for k, v in (flags or {}).items() if v is not None})
    settings: Settings = build(Settings, layered, "")
    _validate(settings)
    if settings.storage.backend == "s3" and "inline_max_bytes" in layered.get("storage", {}):
        raise SettingsError(
            "storage.inline_max_bytes is for the local backend: the S3 backend keeps every "
            "content in the cluster"
        )
    return settings


def iter_settings(defaults: Any = None, path: str = "") -> typing.Iterator[tuple[str, Any, str]]:
    """(dotted name, default, help) of every leaf setting, for docs and their test. Defaults
    are read from the values, not the types: the pro plan's are not PlanLimits()'s."""
    defaults = Settings() if defaults is None else defaults
    for field in dataclasses.fields(defaults):
        name = f"{path}{field.name}"
        value = getattr(defaults, field.name)
        if dataclasses.is_dataclass(value):
            yield from iter_settings(value, name + ".")
        else:
            yield name, value, field.metadata.get("help", "")


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """Each setting by its long name, then the short names of `ALIASES` (which win)."""
    result: dict[str, Any] = {}
    leaves = leaf_types(Settings)
    names = {ENV_PREFIX + "__".join(part.upper() for part in path): path for path in leaves}
    for name, path in [*names.items(), *ALIASES.items()]:
        if name not in environ:
            continue
        raw = environ[name]
        value: Any = raw
        if typing.get_origin(leaves[path]) is list:
            value = env_list(name, raw)
        node = result
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return result


def _validate(settings: Settings) -> None:
    if settings.test_mode and settings.index.postgres:
        raise SettingsError(
            "test_mode needs a SQLite index: several gateways over one PostgreSQL index "
            "would each keep a clock of their own (a test server is one gateway)"
        )
    if settings.test_journal_entries < 1:
        raise SettingsError("test_journal_entries must be at least 1")
    if settings.index.in_memory and settings.workers > 1:
        raise SettingsError(
            'index.url = "sqlite://:memory:" lives in one process: workers must be 1'
        )
    if not re.fullmatch(r"[a-z][a-z0-9]*_", settings.id_prefix):
        raise SettingsError("id_prefix must be lowercase letters and digits ending with '_'")
    for region in settings.regions:
        if not re.fullmatch(r"[a-z]{2,}-[a-z]+-[0-9]+", region):
            raise SettingsError(
                f"regions: {region!r} is not of the form <area>-<direction>-<number>"
            )
    for proxy in settings.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise SettingsError(f"trusted_proxies: {proxy!r} is not an address or range") from None
    if settings.client_address_header.lower() not in CLIENT_ADDRESS_HEADERS:
        raise SettingsError('client_address_header must be "X-Forwarded-For" or "Forwarded"')
    for name in ("port", "s3_port"):
        if not 0 <= getattr(settings, name) <= 65535:
            raise SettingsError(f"{name} must be between 0 (any free port) and 65535")
    if settings.s3_enabled and settings.port == settings.s3_port != 0:
        raise SettingsError(
            f"port and s3_port are both {settings.port}: the S3 endpoint needs a port of its "
            "own (or --no-s3)"
        )
    if not 0 <= settings.workers <= 256:
        raise SettingsError("workers must be between 0 (one per core) and 256")
    if settings.ratelimit.redis_url and not settings.ratelimit.redis_url.startswith(
        ("redis://", "rediss://", "unix://")
    ):
        raise SettingsError('ratelimit.redis_url must be "redis://HOST:PORT/DB"')
    if settings.provisioning_lease_seconds <= 0:
        raise SettingsError("provisioning_lease_seconds must be positive")
    if settings.ratelimit.window_seconds <= 0:
        raise SettingsError("ratelimit.window_seconds must be positive")
    if settings.ratelimit.anonymous_rpm < 0:
        raise SettingsError("ratelimit.anonymous_rpm must not be negative (0: no limit)")
    if settings.uploads.deadline_seconds <= 0:
        raise SettingsError("uploads.deadline_seconds must be positive")
    if settings.events.stream_keepalive_seconds <= 0:
        raise SettingsError("events.stream_keepalive_seconds must be positive")
    if settings.log_format not in FORMATS or settings.log_level not in LEVELS:
        raise SettingsError(f"log_format is one of {FORMATS}, log_level one of {LEVELS}")
    if settings.storage.backend not in {"local", "s3", "null"}:
        raise SettingsError('storage.backend must be "local", "s3" or "null"')
    if settings.storage.backend == "null" and settings.index.postgres:
        raise SettingsError(
            'storage.backend = "null" (benchmarks only) needs the index in the data dir'
        )
    if not 0 <= settings.storage.inline_max_bytes <= INLINE_CEILING:
        raise SettingsError(f"storage.inline_max_bytes must be between 0 and {INLINE_CEILING}")
    if settings.index.url and not (
        settings.index.postgres
        or settings.index.in_memory
        or settings.index.url.startswith("sqlite:///")
    ):
        raise SettingsError(
            'index.url must be "sqlite:///PATH", "sqlite://:memory:" or "postgresql://..."'
        )
    if settings.storage.backend == "s3":
        s3 = settings.storage.s3
        if not s3.access_key_id or not s3.secret_access_key:
            raise SettingsError("storage.s3.access_key_id and secret_access_key are required")
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,39}", s3.brand):
            raise SettingsError("storage.s3.brand must be 1-40 lowercase letters, digits, '-'")
        timeouts = (s3.connect_timeout_seconds, s3.read_timeout_seconds, s3.write_lease_seconds)
        if s3.attempts < 1 or min(timeouts) <= 0:
            raise SettingsError("storage.s3.attempts is at least 1 and its timeouts positive")
    _validate_bootstrap(settings)
    if bool(settings.tls_cert) != bool(settings.tls_key):
        raise SettingsError("tls_cert and tls_key go together (--tls-cert and --tls-key)")
    if bool(settings.s3_tls_cert) != bool(settings.s3_tls_key):
        raise SettingsError("s3_tls_cert and s3_tls_key go together")
    for name in PLAN_NAMES:
        plan = settings.plans.get(name)
        limits = (plan.requests_per_minute, plan.max_buckets, plan.max_storage_bytes)
        if min(*limits, plan.max_snapshots) < 0:
            raise SettingsError(f"plans.{name}: limits must not be negative")


def _validate_bootstrap(settings: Settings) -> None:
    boot = settings.bootstrap
    if bool(boot.access_key_id) != bool(boot.secret_access_key):
        raise SettingsError(
            "BUCKETD_ACCESS_KEY_ID and BUCKETD_SECRET_ACCESS_KEY (bootstrap.access_key_id and "
            "secret_access_key) go together: set both, or neither"
        )
    if boot.access_key_id:
        try:
            check_s3_credentials(boot.access_key_id, boot.secret_access_key)
        except InvalidInput as exc:
            raise SettingsError(
                f"BUCKETD_ACCESS_KEY_ID / BUCKETD_SECRET_ACCESS_KEY: {exc}"
            ) from None
    for name in boot.buckets:
        try:
            check_bucket_name(name)
        except InvalidInput as exc:
            raise SettingsError(f"BUCKETD_BUCKETS (bootstrap.buckets): {name!r}: {exc}") from None
    if boot.plan and boot.plan not in PLAN_NAMES:
        raise SettingsError(f"BUCKETD_PLAN (bootstrap.plan) must be one of {', '.join(PLAN_NAMES)}")
