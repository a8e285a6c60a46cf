"""The schema migrations shipped with bucketd: numbered SQL files per database, applied in
order at start-up and recorded in `schema_migrations`."""

from __future__ import annotations

from importlib import resources

from ..errors import IndexUnavailable


def migrations(dialect: str) -> list[tuple[int, str]]:
    """(version, sql) of every migration shipped for `dialect`, in order."""
    folder = resources.files("storage") / "migrations" / dialect
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text("utf-8")))
    return sorted(found)


def pending(dialect: str, applied: int) -> list[tuple[int, str]]:
    """The migrations after version `applied`; refuses an index newer than this bucketd."""
    known = migrations(dialect)
    newest = known[-1][0] if known else 0
    if applied > newest:
        raise IndexUnavailable(
            f"the index is at schema version {applied}, newer than this bucketd knows "
            f"({newest}); run the newer bucketd, or restore a backup taken before it"
        )
    return [(version, script) for version, script in known if version > applied]
