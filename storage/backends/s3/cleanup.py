"""The S3 backend's multipart uploads that must not outlive their write: aborted when a
write is discarded (at once, or in the background while the cluster is away), and the
stale ones a crash left aborted at start-up. Part of `S3Backend` (its base class)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from storage.backends.s3.errors import s3_errors
from storage.errors import BackendUnavailable

logger = logging.getLogger("bucketd.s3")


@dataclass
class Staged:
    """A write in progress or done but not published: a multipart upload or a small body."""

    location: str
    key: str
    upload_id: str | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    body: bytes | None = None
    published: bool = False


class UploadCleanup:
    _client: Any

    async def _abort_soon(self, staged: Staged) -> None:
        """Abort now; if the cluster is away, keep trying in the background for a while."""
        staged.body = None
        if staged.upload_id is None:
            return
        try:
            await self._abort(staged.location, staged.key, staged.upload_id)
        except BackendUnavailable:
            asyncio.get_running_loop().create_task(self._abort_later(staged))

    async def _abort_later(self, staged: Staged, attempts: int = 120) -> None:
        assert staged.upload_id is not None
        for _ in range(attempts):
            await asyncio.sleep(1.0)
            try:
                await self._abort(staged.location, staged.key, staged.upload_id)
                return
            except BackendUnavailable:
                continue
        logger.warning(
            "could not abort multipart upload %s; start-up clean-up will", staged.upload_id
        )

    async def _abort(self, location: str, key: str, upload_id: str) -> None:
        with s3_errors("abort a multipart upload"):
            try:
                await self._client.abort_multipart_upload(
                    Bucket=location, Key=key, UploadId=upload_id
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") not in ("NoSuchUpload", "404"):
                    raise

    async def _abort_uploads(self, location: str, older_than: float | None) -> int:
        aborted = 0
        paginator = self._client.get_paginator("list_multipart_uploads")
        async for page in paginator.paginate(Bucket=location):
            for upload in page.get("Uploads", []):
                started = upload.get("Initiated")
                if older_than is not None and started and started.timestamp() > older_than:
                    continue
                await self._abort(location, upload["Key"], upload["UploadId"])
                aborted += 1
        return aborted
