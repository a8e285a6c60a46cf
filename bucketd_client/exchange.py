"""A bucket as plain files on disk and back: `bucketd export` and `bucketd import`.

Keys become relative paths. A key that cannot be a path here (a `..` segment, an empty or
over-long segment, a key that is also another key's folder) is listed in the manifest
instead of being written. Both directions are resumable: a file already exported or
imported with the same content is skipped. The bucket is reached through an `Side`: the
API (`ApiSide`) or a stopped data dir's engine (`gateway.offline.EngineSide`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .bodies import Sink
from .calls import CHUNK, guess_type
from .models import File

if TYPE_CHECKING:
    from .aio import AsyncClient

MANIFEST = ".bucketd-manifest.json"
PART_SUFFIX = ".bucketd-part"
NAME_MAX = 255
SAVE_EVERY_SECONDS = 2.0


class Side(Protocol):
    """Where a bucket's files come from or go to."""

    def files(self) -> AsyncIterator[File]: ...
    def chunks(self, file: File) -> AsyncIterator[bytes]: ...
    async def upload(self, key: str, path: Path, content_type: str) -> File: ...


class ApiSide:
    def __init__(self, client: AsyncClient, bucket_id: str) -> None:
        self._client = client
        self._bucket_id = bucket_id

    def files(self) -> AsyncIterator[File]:
        return self._client.iter_files(self._bucket_id, page_size=100)

    def chunks(self, file: File) -> AsyncIterator[bytes]:
        return self._client.iter_bytes(self._bucket_id, file.key)

    async def upload(self, key: str, path: Path, content_type: str) -> File:
        return await self._client.upload(self._bucket_id, key, path, content_type=content_type)


def path_problem(key: str) -> str | None:
    """Why `key` cannot be written as a relative path on this file system; None if it can."""
    segments = key.split("/")
    if "" in segments:
        return "an empty segment (leading, trailing or doubled '/')"
    if any(segment in (".", "..") for segment in segments):
        return "a '.' or '..' segment"
    if any(len(os.fsencode(segment)) > NAME_MAX for segment in segments):
        return f"a segment longer than {NAME_MAX} bytes"
    if segments[-1] == MANIFEST or segments[-1].endswith(PART_SUFFIX):
        return "a name bucketd export keeps for itself"
    return None


@dataclass
class Report:
    """What one export or import did."""

    copied: int = 0
    skipped: int = 0
    unwritable: int = 0
    failed: list[str] = field(default_factory=list)
    bytes: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "copied": self.copied,
            "skipped": self.skipped,
            "unwritable": self.unwritable,
            "failed": self.failed,
            "bytes": self.bytes,
        }


Progress = Callable[[str, int, int | None], None]
"""Called with the key, bytes moved so far and the file's size."""


def manifest_path(directory: Path) -> Path:
    """`DIR.bucketd-manifest.json`, beside the folder (beside the name given, a symbolic
    link's included) and not in it: a tool that copies the folder (`rclone copy DIR
    remote:bucket`) would upload a manifest inside as one more object. Inside where there
    is no beside: a folder with no name (`/`), or whose parent this user cannot write."""
    whole = Path(os.path.abspath(directory))
    if not whole.name or not os.access(whole.parent, os.W_OK):
        return whole / MANIFEST
    return whole.with_name(whole.name + MANIFEST)


class Manifest:
    """`manifest_path(DIR)`: every exported key with its ETag and type, and the keys left
    out with the reason. Saved every few seconds and at the end, so a second run picks up
    where the first stopped (an earlier version's manifest inside DIR too: moved beside)."""

    def __init__(self, directory: Path, bucket_id: str) -> None:
        self.path = manifest_path(directory)
        self._inside = directory / MANIFEST
        self.files: dict[str, dict[str, Any]] = {}
        self.unwritable: dict[str, str] = {}
        earlier = self.path if self.path.exists() else self._inside
        if earlier.exists():
            self.files, self.unwritable = _read_manifest(earlier)
        self.bucket_id = bucket_id
        self._saved_at = time.monotonic()

    def save(self, force: bool = True) -> None:
        if not force and time.monotonic() - self._saved_at < SAVE_EVERY_SECONDS:
            return
        body = {
            "bucketId": self.bucket_id,
            "files": self.files,
            "unwritable": [{"key": k, "reason": r} for k, r in sorted(self.unwritable.items())],
        }
        temp = self.path.with_name(self.path.name + PART_SUFFIX)
        temp.write_text(json.dumps(body, indent=1, ensure_ascii=False))
        os.replace(temp, self.path)
        if self._inside != self.path:
            self._inside.unlink(missing_ok=True)
        self._saved_at = time.monotonic()


class ManifestUnreadable(Exception):
    """A file where an export's manifest belongs that is not one: cut short, edited, or
    another program's. Not overwritten: the command stops and says so."""


def _read_manifest(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The exported files and the keys left out that `path` records."""
    try:
        saved = json.loads(path.read_bytes())
        files = saved.get("files", {})
        if not all(isinstance(k, str) and isinstance(v, dict) for k, v in files.items()):
            raise TypeError("'files' is not an object of file objects")
        unwritable = {u["key"]: u["reason"] for u in saved.get("unwritable", [])}
        if not all(isinstance(v, str) for v in (*unwritable, *unwritable.values())):
            raise TypeError("'unwritable' is not a list of {key, reason}")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ManifestUnreadable(
            f"{path} is not an export manifest bucketd can read ({exc}): move it away and "
            "run the command again (an export then fetches every file again)"
        ) from None
    return files, unwritable


def _target(directory: Path, key: str) -> Path:
    return directory.joinpath(*key.split("/"))


def _blocked(directory: Path, key: str) -> str | None:
    """A path conflict: a parent folder that is a file, or a key that is already a folder."""
    target = _target(directory, key)
    if target.is_dir():
        return "another key uses it as a folder"
    parent = target.parent
    while parent != directory:
        if parent.exists() and not parent.is_dir():
            return "another key is a file where this key needs a folder"
        parent = parent.parent
    return None


async def export_bucket(
    side: Side, bucket_id: str, directory: Path, progress: Progress | None = None
) -> Report:
    """Write every file of the bucket under `directory`, skipping what a previous run wrote."""
    manifest = Manifest(directory, bucket_id)
    directory.mkdir(parents=True, exist_ok=True)
    report = Report()
    async for file in side.files():
        problem = path_problem(file.key) or _blocked(directory, file.key)
        if problem is not None:
            manifest.unwritable[file.key] = problem
            manifest.files.pop(file.key, None)
            report.unwritable += 1
            continue
        target = _target(directory, file.key)
        done = manifest.files.get(file.key)
        if (
            done is not None
            and done.get("etag") == file.etag
            and target.is_file()
            and target.stat().st_size == file.size
        ):
            report.skipped += 1
            continue
        try:
            await _fetch(side, file, target, progress)
        except Exception as exc:  # one failed file must not stop the export of the rest
            report.failed.append(f"{file.key}: {exc}")
            continue
        manifest.files[file.key] = {
            "etag": file.etag,
            "size": file.size,
            "contentType": file.content_type,
        }
        manifest.unwritable.pop(file.key, None)
        report.copied += 1
        report.bytes += file.size
        manifest.save(force=False)
    manifest.save()
    return report


async def _fetch(side: Side, file: File, target: Path, progress: Progress | None) -> None:
    sink = Sink(target, file.sha256)
    try:
        async for chunk in side.chunks(file):
            sink.write(chunk)
            if progress is not None:
                progress(file.key, sink.received, file.size)
        sink.finish()
    except BaseException:
        sink.abort()
        raise


async def import_directory(side: Side, directory: Path, progress: Progress | None = None) -> Report:
    """Upload every file under `directory` (keys are the relative paths), skipping the ones
    the bucket already holds with the same content. Types come from the export manifest
    when there is one, else from the file name."""
    manifest = Manifest(directory, "")
    existing = {file.key: file.etag async for file in side.files()}
    report = Report()
    for path in sorted(_walk(directory)):
        key = path.relative_to(directory).as_posix()
        if existing.get(key) == f'"{_sha256(path)}"':
            report.skipped += 1
            continue
        content_type = manifest.files.get(key, {}).get("contentType") or guess_type(key)
        try:
            stored = await side.upload(key, path, content_type)
        except Exception as exc:  # one refused file must not stop the import of the rest
            report.failed.append(f"{key}: {exc}")
            continue
        report.copied += 1
        report.bytes += stored.size
        if progress is not None:
            progress(key, stored.size, stored.size)
    return report


def _walk(directory: Path) -> list[Path]:
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            if name == MANIFEST or name.endswith(PART_SUFFIX):
                continue
            path = Path(root) / name
            if path.is_file():
                found.append(path)
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
