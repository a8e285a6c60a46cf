"""A stopped data dir's engine as one side of `bucketd export` / `bucketd import`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from bucketd_client.bodies import async_chunks
from bucketd_client.models import File
from storage.engine import Engine
from storage.models import Actor, FileRecord

PAGE = 500


def _file(record: FileRecord) -> File:
    return File(
        key=record.key,
        bucket_id=record.bucket_id,
        size=record.size,
        content_type=record.content_type,
        uploaded_at=record.uploaded_at,
        etag=record.etag,
    )


class EngineSide:
    """Reads and writes a bucket through the engine, as its organization, no HTTP."""

    def __init__(self, engine: Engine, actor: Actor, bucket_id: str) -> None:
        self._engine = engine
        self._actor = actor
        self._bucket_id = bucket_id

    async def files(self) -> AsyncIterator[File]:
        after: str | None = None
        while True:
            page = await self._engine.list_files(
                self._actor, self._bucket_id, after=after, limit=PAGE
            )
            for record in page.items:
                yield _file(record)
            if not page.has_more:
                return
            after = page.last

    async def chunks(self, file: File) -> AsyncIterator[bytes]:
        record = await self._engine.get_file(self._actor, self._bucket_id, file.key)
        async for chunk in await self._engine.open_file(record, 0, record.size):
            yield chunk

    async def upload(self, key: str, path: Path, content_type: str) -> File:
        size = path.stat().st_size
        record = await self._engine.put_file(
            self._actor, self._bucket_id, key, content_type, async_chunks(path, size, None), size
        )
        return _file(record)
