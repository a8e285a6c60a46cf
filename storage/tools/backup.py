"""`bucketd backup DEST`: a consistent copy of a data dir, taken while the server runs.

The index is copied with SQLite's online backup API; then every blob file the copy points
at is copied (content-addressed and immutable, so one already in DEST from an earlier
backup is kept as it is). While the backup holds its lock the server sets deleted blobs
aside instead of unlinking them (`reaping.py`), so every blob the snapshot names can be
copied. DEST is then a data dir of its own: `bucketd serve --data-dir DEST` restores it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from storage.backends.local.blobs import blob_relpath
from storage.backends.local.reaping import REAPED_DIR, holding_backup_lock
from storage.backends.null import NULL_MARKER
from storage.encryption import MASTER_KEY_FILE
from storage.errors import BackendUnavailable, NotSupported
from storage.index.sqlite import snapshot, stored_blob_ids
from storage.sealing import KEY_FILE

INDEX_FILE = "index.db"
KEPT_FILES = (KEY_FILE, MASTER_KEY_FILE, "README.md")
"""Small files of the data dir every backup copies: the key that unseals S3 secrets, the
data dir's own master key of encrypted contents (when one was made: a backup without it
could not read them), and the README of a repository's `data/` (so a restore by copying
leaves git content)."""


@dataclass
class BackupReport:
    blobs_copied: int = 0
    blobs_present: int = 0
    blobs_removed: int = 0
    index_bytes: int = 0


def backup(
    data_dir: Path, dest: Path, blobs: bool = True, extra_files: tuple[str, ...] = ()
) -> BackupReport:
    """Copy `data_dir` to `dest` (created, or brought up to date). `blobs` is False for
    the S3 backend, whose contents live in the cluster; `extra_files` are small files of
    the data dir to copy too (the key that unseals S3 secrets always is)."""
    if (data_dir / NULL_MARKER).exists():
        raise NotSupported(
            f"the null storage backend keeps no contents: {data_dir} (served by it) has "
            "nothing to back up"
        )
    source_index = data_dir / INDEX_FILE
    if not source_index.exists():
        raise BackendUnavailable(f"{data_dir} holds no bucketd index")
    dest.mkdir(parents=True, exist_ok=True)
    staged = dest / (INDEX_FILE + ".bucketd-backup")
    report = BackupReport()
    with holding_backup_lock(data_dir):
        snapshot(source_index, staged)
        referenced = stored_blob_ids(staged) if blobs else set()
        missing = _copy_blobs(data_dir, dest / "blobs", referenced, report)
    if missing:
        staged.unlink(missing_ok=True)
        raise BackendUnavailable(
            f"{len(missing)} blobs the index names are missing from {data_dir} "
            f"(first: {missing[0]}); run `bucketd check` on it"
        )
    os.replace(staged, dest / INDEX_FILE)
    report.index_bytes = (dest / INDEX_FILE).stat().st_size
    report.blobs_removed = _remove_unreferenced(dest / "blobs", referenced)
    for name in (*KEPT_FILES, *extra_files):
        if (data_dir / name).exists():
            shutil.copy2(data_dir / name, dest / name)
            _fsync(dest / name)
    _fsync(dest)
    return report


def _copy_blobs(
    data_dir: Path, target: Path, referenced: set[str], report: BackupReport
) -> list[str]:
    """Copy the referenced blobs missing from `target`; the ids found nowhere."""
    missing = []
    for blob_id in sorted(referenced):
        relative = blob_relpath(blob_id)
        if (target / relative).exists():
            report.blobs_present += 1
            continue
        folder = (target / relative).parent
        if not folder.exists():
            folder.mkdir(parents=True)
            for created in (folder.parent.parent, folder.parent):
                _fsync(created)
        partial = target / relative.with_name(relative.name + ".bucketd-backup")
        for source in (data_dir / "blobs" / relative, data_dir / REAPED_DIR / blob_id):
            try:
                shutil.copyfile(source, partial)
                break
            except FileNotFoundError:
                continue
        else:
            missing.append(blob_id)
            continue
        _fsync(partial)
        os.replace(partial, target / relative)
        _fsync(partial.parent)
        report.blobs_copied += 1
    return missing


def _remove_unreferenced(blobs: Path, referenced: set[str]) -> int:
    """Blobs of earlier backups (or earlier snapshots) the final index no longer names."""
    removed = 0
    if not blobs.exists():
        return 0
    for root, _, names in os.walk(blobs):
        for name in names:
            if name not in referenced:
                os.unlink(Path(root) / name)
                removed += 1
    return removed


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
