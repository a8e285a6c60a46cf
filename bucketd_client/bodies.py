"""Upload bodies and download targets: streamed in chunks, never read whole."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import anyio.to_thread

from .calls import CHUNK

Progress = Callable[[int, int | None], None]
"""Called with the bytes moved so far and the total (None when unknown)."""

Source = bytes | bytearray | memoryview | os.PathLike[str] | IO[bytes] | Iterable[bytes]
AsyncSource = Source | AsyncIterable[bytes]


class CorruptDownload(Exception):
    """The bytes received do not hash to the ETag the server sent."""


@dataclass
class Body:
    """An upload body: its length when known, and fresh chunk iterators while replayable."""

    length: int | None
    replayable: bool
    _open: Callable[[], Iterator[bytes]]
    _used: bool = False

    def chunks(self, progress: Progress | None = None) -> Iterator[bytes]:
        if self._used and not self.replayable:
            raise RuntimeError("this upload body was a one-shot iterator and is spent")
        self._used = True
        sent = 0
        for chunk in self._open():
            sent += len(chunk)
            yield chunk
            if progress is not None:
                progress(sent, self.length)


def body(source: Source) -> Body:
    if isinstance(source, str):
        raise TypeError("pass the content as bytes, or a file as a pathlib.Path")
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source).cast("B")
        return Body(
            len(view),
            True,
            lambda: (bytes(view[i : i + CHUNK]) for i in range(0, len(view), CHUNK)),
        )
    if isinstance(source, os.PathLike):
        path = Path(source)
        return Body(path.stat().st_size, True, lambda: _read_path(path))
    if hasattr(source, "read"):
        return _file_body(source)  # type: ignore[arg-type]
    iterator = iter(source)
    return Body(None, False, lambda: iterator)


def _read_path(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def _file_body(handle: IO[bytes]) -> Body:
    """An open binary file: its remaining length and a replay from the same position when it
    can seek."""
    try:
        start = handle.tell()
        length: int | None = os.fstat(handle.fileno()).st_size - start
        seekable = handle.seekable()
    except (OSError, ValueError, AttributeError):
        start, length, seekable = 0, None, False

    def chunks() -> Iterator[bytes]:
        if seekable:
            handle.seek(start)
        while chunk := handle.read(CHUNK):
            yield chunk

    return Body(length, seekable, chunks)


@dataclass
class AsyncBody:
    """An upload body of the asynchronous client: as `Body`, from any source `Body` takes
    or an async iterable of bytes (one-shot)."""

    source: AsyncSource
    length: int | None
    replayable: bool

    def chunks(self, progress: Progress | None = None) -> AsyncIterator[bytes]:
        return async_chunks(self.source, self.length, progress)


def async_body(source: AsyncSource) -> AsyncBody:
    if isinstance(source, AsyncIterable):
        return AsyncBody(source, None, False)
    upload = body(source)
    return AsyncBody(source, upload.length, upload.replayable)


async def async_chunks(
    source: AsyncSource, length: int | None, progress: Progress | None
) -> AsyncIterator[bytes]:
    """An async source's chunks; a sync one is read on a worker thread chunk by chunk."""
    sent = 0
    if isinstance(source, AsyncIterable):
        async for chunk in source:
            sent += len(chunk)
            yield chunk
            if progress is not None:
                progress(sent, length)
        return
    iterator = body(source).chunks()
    while True:
        piece = await anyio.to_thread.run_sync(_next_chunk, iterator)
        if piece is None:
            return
        sent += len(piece)
        yield piece
        if progress is not None:
            progress(sent, length)


def _next_chunk(iterator: Iterator[bytes]) -> bytes | None:
    return next(iterator, None)


class Sink:
    """A download target: a path written through a temp file in the same folder and renamed
    only once the bytes are complete and match the ETag, or an open binary file."""

    def __init__(self, dest: os.PathLike[str] | IO[bytes], expected_sha256: str | None) -> None:
        self._expected = expected_sha256
        self._digest = hashlib.sha256()
        self._path: Path | None = None
        self._temp: Path | None = None
        if isinstance(dest, os.PathLike):
            self._path = Path(dest)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(
                prefix=f".{self._path.name[:100]}.", suffix=".bucketd-part", dir=self._path.parent
            )
            self._temp = Path(name)
            os.fchmod(fd, 0o666 & ~_umask())  # as open() would have made it, not mkstemp's 0600
            self._handle: IO[bytes] = os.fdopen(fd, "wb")
        else:
            self._handle = dest
        self.received = 0

    def write(self, chunk: bytes) -> None:
        self._handle.write(chunk)
        self._digest.update(chunk)
        self.received += len(chunk)

    def finish(self) -> None:
        if self._expected is not None and self._digest.hexdigest() != self._expected:
            self.abort()
            raise CorruptDownload(
                f"received {self.received} bytes hashing to {self._digest.hexdigest()}, "
                f"expected {self._expected}"
            )
        if self._temp is not None and self._path is not None:
            self._handle.close()
            os.replace(self._temp, self._path)
            self._temp = None

    def abort(self) -> None:
        if self._temp is not None:
            self._handle.close()
            self._temp.unlink(missing_ok=True)
            self._temp = None


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def etag_sha256(etag: str) -> str | None:
    """The SHA-256 an ETag names, when it is one (64 hex digits in quotes)."""
    value = etag.strip().strip('"')
    return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else None
