"""Typed configuration of the storage engine.

The gateway's `Settings` embeds these classes, so every value is declared once, with its
default and its help text, and the engine receives only the part it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bucketd_client.contract import PLAN_NAMES as PLAN_NAMES


def setting(default: Any, help: str) -> Any:
    """A dataclass field with its documentation attached (read by the settings loader)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help})
    if hasattr(default, "__dataclass_fields__"):
        return field(default_factory=lambda: default, metadata={"help": help})
    return field(default=default, metadata={"help": help})


DEFAULT_REGIONS = [
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-west-2",
    "eu-central-1",
    "ap-southeast-1",
    "ap-northeast-1",
    "sa-east-1",
]


@dataclass(frozen=True)
class UploadSettings:
    default_max_bytes: int = setting(5 * 1024**3, "A bucket's size limit unless it sets its own.")
    deadline_seconds: float = setting(
        300.0, "Whole-upload deadline, from the request headers (408)."
    )
    allowed_content_types: list[str] = setting(
        ["*/*"], "Default MIME allow-list of a bucket; `image/*` style wildcards."
    )
    multipart_expiry_seconds: float = setting(
        7 * 86400.0,
        "A multipart upload not completed this long after it began is aborted, its parts "
        "removed and their bytes no longer counted against the quota.",
    )
    cleanup_interval_seconds: float = setting(
        30.0,
        "How often abandoned multipart uploads are expired, their orphaned part folders "
        "removed and interrupted S3-backend writes settled.",
    )


@dataclass(frozen=True)
class PlanLimits:
    requests_per_minute: int = setting(100, "Requests per clock minute for the organization.")
    max_buckets: int = setting(10, "Buckets the organization may hold (402 past it).")
    max_storage_bytes: int = setting(1024**3, "Logical bytes the organization may store (402).")
    max_snapshots: int = setting(
        1000,
        "Bucket snapshots the organization may keep (402 past it): each copies the bucket's "
        "index rows, which no storage quota counts.",
    )


@dataclass(frozen=True)
class Plans:
    free: PlanLimits = setting(PlanLimits(), "Limits of the free plan.")
    pro: PlanLimits = setting(
        PlanLimits(
            requests_per_minute=1000,
            max_buckets=1000,
            max_storage_bytes=1024**4,
            max_snapshots=10000,
        ),
        "Limits of the pro plan.",
    )

    def get(self, name: str) -> PlanLimits:
        if name not in PLAN_NAMES:
            raise KeyError(name)
        limits: PlanLimits = getattr(self, name)
        return limits


class PlanTable:
    """The plans in force: those of the settings at start-up, replaced whole when the server
    reads its settings again (SIGHUP); every reader holds this table, not a `Plans`, so it
    sees new limits at its next request."""

    def __init__(self, plans: Plans) -> None:
        self._plans = plans

    def get(self, name: str) -> PlanLimits:
        return self._plans.get(name)

    @property
    def free(self) -> PlanLimits:
        return self._plans.free

    def replace(self, plans: Plans) -> bool:
        """Put `plans` in force; whether they differ from those that were."""
        changed = plans != self._plans
        self._plans = plans
        return changed


if tuple(plan.name for plan in fields(Plans)) != PLAN_NAMES:
    raise RuntimeError("Plans and the wire contract's PLAN_NAMES name different plans")


@dataclass(frozen=True)
class S3Settings:
    endpoint_url: str = setting("http://127.0.0.1:8333", "S3 endpoint of the cluster.")
    region: str = setting("us-east-1", "Region sent to the S3 cluster.")
    access_key_id: str = setting("", "Access key id for the S3 cluster.")
    secret_access_key: str = setting("", "Secret access key for the S3 cluster.")
    brand: str = setting("acme", "Prefix of the real S3 bucket names.")
    part_size_bytes: int = setting(
        5 * 1024 * 1024,
        "Multipart part size (at least 5 MiB); grows by itself every 1000 parts.",
    )
    parallel_parts: int = setting(2, "Parts of one upload sent to the cluster at once.")
    connect_timeout_seconds: float = setting(
        3.0, "How long a connection to the cluster may take before the attempt fails."
    )
    read_timeout_seconds: float = setting(
        30.0, "How long the cluster may leave a request unanswered before the attempt fails."
    )
    attempts: int = setting(
        3,
        "Attempts of each request to the cluster, the first included (at least 1), with "
        "botocore's standard backoff between them, before a 503 storage_unavailable.",
    )
    write_lease_seconds: float = setting(
        5.0,
        "How long a write between its publish and its commit is taken for alive without "
        "news from its gateway (renewed every third of it while it runs); past it, any "
        "gateway settles the write: reads and writes of the key wait for no dead gateway "
        "longer than this.",
    )
    portable_keys: bool = setting(
        True,
        "Store keys that file-system-backed S3 servers (SeaweedFS) would alter (empty, "
        "'.' or '..' segments, edge slashes, segments over 255 bytes) under an encoded "
        "name in .bucketd-keys/; false for AWS S3, which stores them as they are.",
    )


INLINE_MAX_BYTES = 16384
"""The default inline limit, chosen by measurement (docs/performance.md, "Small contents in
the index")."""
INLINE_CEILING = 1024 * 1024
"""The highest inline limit: a GET reads an inline content whole, into memory."""


@dataclass(frozen=True)
class StorageSettings:
    backend: str = setting(
        "local",
        '"local" (blobs on disk), "s3", or "null": for benchmarks only, contents are '
        "discarded and reads answer zero bytes (docs/operations.md).",
    )
    fsync: bool = setting(True, "fsync blobs, directories and the index before acknowledging.")
    inline_max_bytes: int = setting(
        INLINE_MAX_BYTES,
        "Local backend: contents up to this size live in the index, written in the commit "
        "that names them, instead of a blob file (0: every content in a blob file; at most "
        "1 MiB). A content stays where it was written when the limit changes.",
    )
    io_threads: int = setting(32, "Worker threads for blob file I/O.")
    master_key: str = setting(
        "",
        "Encryption at rest (SSE-S3): the master key that wraps each encrypted content's own "
        "key, as base64 of 32 random bytes or `@path` of a file holding them (`bucketd "
        "new-master-key` prints one). Every gateway of one index needs the same. Empty: "
        "the data dir's own `master.key`, made on the first encrypted write (it then sits "
        "beside the data it protects, and in every backup: set this to keep it apart).",
    )
    previous_master_keys: list[str] = setting(
        [],
        "Master keys replaced by `master_key` (same forms), kept to read the contents whose "
        "keys they still wrap until `bucketd rotate-master-key` has rewrapped them all.",
    )
    kms_keys: list[str] = setting(
        [],
        "SSE-KMS keyring (issue 37 point 3): named keys as `name=KEY`, KEY in the forms of "
        "`master_key`; `x-amz-server-side-encryption: aws:kms` wraps a content's key with the "
        "one its key id names. Empty: aws:kms is refused.",
    )
    kms_default_key: str = setting(
        "", "The kms_keys name an aws:kms write without a key id uses (empty: the first)."
    )
    s3: S3Settings = setting(S3Settings(), 'Used when backend = "s3".')


@dataclass(frozen=True)
class ScrubSettings:
    interval_seconds: float = setting(
        0.0,
        "Re-hash every file's content against its SHA-256 in the background, a pass this "
        "often (0: off; `bucketd check --deep` runs one pass on demand).",
    )
    bytes_per_second: float = setting(
        16 * 1024 * 1024.0, "How fast the background scrub reads (0: as fast as it can)."
    )


@dataclass(frozen=True)
class LifecycleSettings:
    day_seconds: float = setting(
        86_400.0, "How long a lifecycle rule's day is (shorter to watch rules act in tests)."
    )
    interval_seconds: float = setting(
        300.0, "How often the lifecycle worker applies every bucket's rules (0: never)."
    )


@dataclass(frozen=True)
class EventSettings:
    retention_seconds: float = setting(
        7 * 86_400.0,
        "How long events stay in the outbox (the live stream resumes from them) once every "
        "webhook has them.",
    )
    timeout_seconds: float = setting(10.0, "How long a webhook delivery may take.")
    retry_seconds: float = setting(
        86_400.0,
        "How long a failing delivery is retried (exponential backoff with jitter) before it "
        "is parked as failed.",
    )
    retry_first_seconds: float = setting(1.0, "The first retry's delay; each next doubles.")
    stream_keepalive_seconds: float = setting(
        15.0,
        "A quiet live stream (GET /v1/events) sends a comment line this often, so proxies "
        "keep it open; a changed bucket policy reaches a running stream within it.",
    )
    allowed_hosts: list[str] = setting(
        [],
        "Hosts and networks webhook URLs may reach beyond public addresses: loopback, "
        'private and link-local ones are refused unless listed, e.g. ["127.0.0.1", '
        '"10.0.0.0/8", "hooks.internal"].',
    )
    concurrency: int = setting(16, "Deliveries in flight at once (one per key at a time).")
    process: bool = setting(
        True,
        "Deliver webhooks from a process of its own (forked by `bucketd serve`), so deliveries "
        "take another core than the requests; false: the serving process delivers.",
    )


@dataclass(frozen=True)
class IndexSettings:
    url: str = setting(
        "",
        'Where the index lives: "" or "sqlite:///PATH" (default: index.db in the data dir), '
        'or "postgresql://USER:PASSWORD@HOST:PORT/DB" for several gateways, or '
        '"sqlite://:memory:", held in memory and lost at exit (tests).',
    )
    pool_size: int = setting(10, "PostgreSQL: connections each gateway keeps.")

    @property
    def postgres(self) -> bool:
        return self.url.startswith(("postgresql://", "postgres://"))

    @property
    def in_memory(self) -> bool:
        return self.url == "sqlite://:memory:"

    def sqlite_path(self, data_dir: Path) -> Path:
        return Path(self.url.removeprefix("sqlite://")) if self.url else data_dir / "index.db"


@dataclass(frozen=True)
class EngineConfig:
    """What the engine needs to run, cut from the gateway's settings."""

    data_dir: Path
    id_prefix: str = "svc_"
    provisioning_delay_seconds: float = 0.0
    provisioning_lease_seconds: float = 30.0
    regions: tuple[str, ...] = tuple(DEFAULT_REGIONS)
    uploads: UploadSettings = field(default_factory=UploadSettings)
    plans: Plans = field(default_factory=Plans)
    storage: StorageSettings = field(default_factory=StorageSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    scrub: ScrubSettings = field(default_factory=ScrubSettings)
    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    events: EventSettings = field(default_factory=EventSettings)
    faults: str = ""
    """Test-only fault injection spec (storage/faults.py); empty in production."""
    workers: int = 1
    """Processes serving this data dir at once (`bucketd serve --workers N`)."""

    @property
    def shared(self) -> bool:
        """Whether other processes use the index at the same time: gateways on one
        PostgreSQL index, or workers on one data dir. A shared engine leaves what it finds
        at start-up (claims, leases, temp files) to the lease rules, not to itself."""
        return self.index.postgres or self.workers > 1
