"""Prometheus metrics: one registry per app, and `GET /metrics`.

The workers of `bucketd serve --workers N` (and their delivery process) keep their values
in files of one directory (prometheus_client's multiprocess mode, `share_between_processes`)
and any worker's `/metrics` adds up every process's: counters and histograms summed (a
worker that exited keeps its counts), the index's totals as the rendering worker just read
them, the scrub's from the worker that runs it.
"""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as prometheus_values
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import Response

from gateway.context import context
from gateway.http.auth import require
from storage.engine import Engine
from storage.services.lifecycle import Lifecycle
from storage.services.scrub import Scrub

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
WRITE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5)
REFUSALS = {402: "quota", 408: "timeout", 413: "too_large", 415: "unsupported_type", 429: "rate"}
"""Upload refusals counted by reason, keyed by the status that carries them."""


def share_between_processes(directory: Path) -> None:
    """Keep this process's metric values in `directory`, with its sibling workers'; call
    before any `Metrics` is made (prometheus_client picks the value class per process)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    prometheus_values.ValueClass = prometheus_values.MultiProcessValue()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self, shared: Path | None = None) -> None:
        """`shared`: the directory of every worker's values (`share_between_processes`)."""
        self._shared = shared
        self._per_route: dict[tuple[str, str, str, int], tuple[Counter, Histogram]] = {}
        self._per_listener: dict[str, tuple[Counter, Counter, Counter]] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = Counter(
            "bucketd_requests",
            "Requests answered, by listener, route template, method and status.",
            ["listener", "route", "method", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "bucketd_request_duration_seconds",
            "Time from the request's arrival to the end of its response.",
            ["listener", "route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.bytes_in = Counter(
            "bucketd_received_bytes",
            "Request body bytes received.",
            ["listener"],
            registry=registry,
        )
        self.bytes_out = Counter(
            "bucketd_sent_bytes", "Response body bytes sent.", ["listener"], registry=registry
        )
        self.bytes_zero_copy = Counter(
            "bucketd_sent_by_sendfile_bytes",
            "The part of the response body bytes that went from a file to the socket by "
            "sendfile, never through the server's memory.",
            ["listener"],
            registry=registry,
        )
        self.refused = Counter(
            "bucketd_uploads_refused",
            "Uploads refused, by reason: too_large (413), unsupported_type (415), "
            "timeout (408), quota (402), rate (429).",
            ["reason"],
            registry=registry,
        )
        self.index_writes = Histogram(
            "bucketd_index_write_seconds",
            "Time an index write waited for its durable (group) commit.",
            buckets=WRITE_BUCKETS,
            registry=registry,
        )

        def index_gauge(name: str, documentation: str) -> Gauge:
            """A figure read from the shared index: every process's latest reading is the same."""
            return Gauge(name, documentation, multiprocess_mode="mostrecent", registry=registry)

        self.stored_bytes = index_gauge(
            "bucketd_stored_bytes", "Logical bytes stored (sizes of files)."
        )
        self.files = index_gauge("bucketd_files", "Files stored.")
        self.buckets = index_gauge("bucketd_buckets", "Buckets.")
        self.organizations = index_gauge("bucketd_organizations", "Organizations.")
        self.blobs = index_gauge("bucketd_blobs", "Distinct contents (blobs) stored.")
        self.blob_bytes = index_gauge("bucketd_blob_bytes", "Physical bytes of distinct contents.")
        self.dedupe_ratio = index_gauge(
            "bucketd_dedupe_ratio", "Logical bytes per physical byte (1: no content shared)."
        )

        self.scrub_checked = Gauge(
            "bucketd_scrub_files_checked",
            "Files whose content the deep scrub re-hashed since the server started.",
            multiprocess_mode="livemax",
            registry=registry,
        )
        self.scrub_problems = Gauge(
            "bucketd_scrub_problems",
            "Files the last complete deep-scrub pass found corrupt or missing, by kind.",
            ["kind"],
            multiprocess_mode="livemax",
            registry=registry,
        )
        self.scrub_passes = Gauge(
            "bucketd_scrub_passes",
            "Complete deep-scrub passes since the server started.",
            multiprocess_mode="livemax",
            registry=registry,
        )

        self.lifecycle_passes = Gauge(
            "bucketd_lifecycle_passes",
            "Lifecycle passes this gateway ran since it started (one gateway of a cluster "
            "holds the lease).",
            multiprocess_mode="livemax",
            registry=registry,
        )
        self.lifecycle_failures = Gauge(
            "bucketd_lifecycle_failures",
            "Buckets whose lifecycle rules failed in a pass, and failed passes, since start.",
            multiprocess_mode="livemax",
            registry=registry,
        )

        self.events_written = Gauge(
            "bucketd_events_written",
            "Events written to the outbox (its last sequence number, cluster-wide).",
            multiprocess_mode="mostrecent",
            registry=registry,
        )
        self.deliveries = Counter(
            "bucketd_webhook_deliveries",
            "Webhook delivery attempts by this gateway, by outcome: delivered, pending (to be "
            "retried) or failed (parked).",
            ["outcome"],
            registry=registry,
        )
        self.delivery_lag = Histogram(
            "bucketd_webhook_delivery_lag_seconds",
            "From an event's commit to its delivery's 2xx answer.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    def deliveries_settled(self, settled: list[tuple[str, float | None]]) -> None:
        for outcome, lag in settled:
            self.deliveries.labels(outcome).inc()
            if lag is not None:
                self.delivery_lag.observe(lag)

    def attach(self, engine: Engine) -> None:
        engine.maintenance.observe_index_writes(self.index_writes.observe)
        engine.scrub.observe(self._scrubbed)
        self._scrubbed(engine.scrub)
        engine.lifecycle.observe(self._lifecycle_ran)

    def _lifecycle_ran(self, lifecycle: Lifecycle) -> None:
        self.lifecycle_passes.set(lifecycle.passes)
        self.lifecycle_failures.set(lifecycle.failures)

    def _scrubbed(self, scrub: Scrub) -> None:
        self.scrub_checked.set(scrub.checked)
        self.scrub_passes.set(scrub.passes)
        for kind in ("corrupt", "missing"):
            self.scrub_problems.labels(kind).set(scrub.found[kind])

    def record(
        self,
        listener: str,
        route: str,
        method: str,
        status: int,
        seconds: float,
        received: int,
        sent: int,
        sent_by_sendfile: int,
        upload: bool,
    ) -> None:
        """Count one answered request. The labelled children are looked up once per label
        set and kept: `labels()` validates and hashes its arguments under a lock on every
        call, 4-6 µs of a request for a value that never changes. The dictionaries hold no
        more than the metrics' own children do."""
        route_key = (listener, route, method, status)
        children = self._per_route.get(route_key)
        if children is None:
            children = (
                self.requests.labels(listener, route, method, str(status)),
                self.latency.labels(listener, route),
            )
            self._per_route[route_key] = children
        per_listener = self._per_listener.get(listener)
        if per_listener is None:
            per_listener = (
                self.bytes_in.labels(listener),
                self.bytes_out.labels(listener),
                self.bytes_zero_copy.labels(listener),
            )
            self._per_listener[listener] = per_listener
        children[0].inc()
        children[1].observe(seconds)
        per_listener[0].inc(received)
        per_listener[1].inc(sent)
        if sent_by_sendfile:
            per_listener[2].inc(sent_by_sendfile)
        if upload and status in REFUSALS:
            self.refused.labels(REFUSALS[status]).inc()

    async def render(self, engine: Engine) -> bytes:
        stats = await engine.maintenance.stats()
        self.stored_bytes.set(stats.stored_bytes)
        self.files.set(stats.files)
        self.buckets.set(stats.buckets)
        self.organizations.set(stats.organizations)
        self.blobs.set(stats.blobs)
        self.blob_bytes.set(stats.blob_bytes)
        self.dedupe_ratio.set(stats.dedupe_ratio)
        self.events_written.set(await engine.events.latest())
        if self._shared is None:
            return generate_latest(self.registry)
        every_process = CollectorRegistry()
        MultiProcessCollector(every_process, str(self._shared))  # type: ignore[no-untyped-call]
        return generate_latest(every_process)


async def metrics_endpoint(request: Request) -> Response:
    """`GET /metrics`: open when `metrics_public`, else a key with the metrics:read scope."""
    ctx = context(request)
    if not ctx.settings.metrics_public:
        require(request, "metrics:read")
    metrics: Metrics = request.app.state.metrics
    return Response(await metrics.render(ctx.engine), media_type=CONTENT_TYPE_LATEST)
