"""What a test session's reset undoes besides the buckets (`bucketd.testing`): the API keys,
S3 credentials and webhooks a test made.

A server snapshot holds buckets only (docs/api.md, "Snapshots"): restoring the clean one
gives back the buckets, their files and settings, but a key a test made would still open
the server, and a webhook a test put on a declared bucket would still show in S3's
notification configuration and keep delivering. So the clean state also remembers the
operator's organization's keys and each clean bucket's webhooks, and the reset removes
the others, through /v1 as a test would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CleanState:
    keys: frozenset[str]
    """The operator's organization's keys not revoked (its S3 credentials too)."""
    webhooks: dict[str, frozenset[str]]
    """By bucket id: the webhooks of each bucket of the clean state."""


def _listed(http: Any, path: str) -> Iterator[dict[str, Any]]:
    cursor = None
    while True:
        params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        response = http.get(path, params=params)
        response.raise_for_status()
        body = response.json()
        yield from body["data"]
        cursor = body["meta"].get("nextCursor")
        if not cursor:
            return


def _live_keys(http: Any) -> set[str]:
    return {key["id"] for key in _listed(http, "/v1/keys") if key.get("revokedAt") is None}


def _webhooks(http: Any, bucket_id: str) -> set[str]:
    return {hook["id"] for hook in _listed(http, f"/v1/buckets/{bucket_id}/webhooks")}


def record(http: Any) -> CleanState:
    """The keys and webhooks as they are now (`http`: the operator's client)."""
    buckets = [bucket["id"] for bucket in _listed(http, "/v1/buckets")]
    return CleanState(
        keys=frozenset(_live_keys(http)),
        webhooks={bucket: frozenset(_webhooks(http, bucket)) for bucket in buckets},
    )


def undo(http: Any, clean: CleanState) -> None:
    """Revoke the keys and delete the webhooks made since `clean` (once the clean buckets
    are restored: the buckets made since went with their webhooks)."""
    for key in _live_keys(http) - clean.keys:
        http.delete(f"/v1/keys/{key}").raise_for_status()
    for bucket, kept in clean.webhooks.items():
        for hook in _webhooks(http, bucket) - kept:
            http.delete(f"/v1/buckets/{bucket}/webhooks/{hook}").raise_for_status()
