"""The resources of the /v1 API (their shapes are declared once, in `shapes.py`) and a page
of a list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec

from .shapes import Bucket, File, FileVersion, Key, Limits, Organization, Usage

__all__ = [
    "Bucket",
    "File",
    "FileVersion",
    "Key",
    "Limits",
    "Organization",
    "Page",
    "Usage",
    "decode",
]

T = TypeVar("T")


def decode(data: Any, shape: type[T]) -> T:
    """A resource from its JSON value (as the API sends it)."""
    return msgspec.convert(data, shape)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; `next_cursor` fetches the next (None on the last page)."""

    items: list[T]
    next_cursor: str | None
    prefixes: list[str] = field(default_factory=list)
    """File lists with a delimiter: the common prefixes rolled up on this page."""

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @classmethod
    def from_json(cls, body: Mapping[str, Any], item: type[T]) -> Page[T]:
        meta = body.get("meta") or {}
        return cls(
            items=msgspec.convert(body["data"], list[item]),  # type: ignore[valid-type]
            next_cursor=meta.get("nextCursor"),
            prefixes=list(meta.get("prefixes") or []),
        )


PageFetch = Callable[[str | None], Page[T]]
"""How `Client` fetches one page after a cursor."""
AsyncPageFetch = Callable[[str | None], Awaitable[Page[T]]]
"""How `AsyncClient` does (unasync names one for the other)."""
