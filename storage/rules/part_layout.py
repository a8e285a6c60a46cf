"""A multipart object's parts, kept with its version (the `parts` column).

S3 keeps a completed upload's parts apart: GetObject and HeadObject with `partNumber`
serve one part's bytes and say how many there are (`x-amz-mp-parts-count`),
GetObjectAttributes lists them with their sizes and checksums, and a completion sent again
is answered as the first was. bucketd stores the joined content as one file, so it keeps
what those answers need beside the version instead: the upload's id, each part's size (as
runs of equal sizes: an upload's parts are mostly one size) and, where the upload had
checksums, each part's, in the object's algorithm.

It is read with the version's row: ~70 bytes for an upload without checksums, whatever its
part count; ~460 KB for 10,000 parts with SHA-256 checksums, which adds ~0.2 ms to each
read of that row on SQLite (10 µs otherwise; measured under load on 2026-11-26 with the
script in the commit message that wrote this), and decoding it (a `partNumber` read) ~3 ms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import groupby


@dataclass(frozen=True)
class PartLayout:
    upload_id: str
    sizes: tuple[int, ...]
    checksums: tuple[str, ...] | None = None
    """Each part's checksum (base64), in the object's algorithm; None: none stored."""

    @property
    def count(self) -> int:
        return len(self.sizes)

    def span(self, number: int) -> tuple[int, int] | None:
        """[start, end) of part `number` (from 1) in the object; None past the last."""
        if not 1 <= number <= self.count:
            return None
        start = sum(self.sizes[: number - 1])
        return start, start + self.sizes[number - 1]

    def checksum(self, number: int) -> str | None:
        if self.checksums is None or not 1 <= number <= self.count:
            return None
        return self.checksums[number - 1]

    def page(self, after: int, limit: int) -> list[tuple[int, int, str | None]]:
        """(number, size, checksum) of up to `limit` parts after part number `after`."""
        first = max(after, 0)
        return [
            (number, self.sizes[number - 1], self.checksum(number))
            for number in range(first + 1, min(first + limit, self.count) + 1)
        ]

    def encode(self) -> str:
        runs = [[size, len(list(group))] for size, group in groupby(self.sizes)]
        fields: dict[str, object] = {"u": self.upload_id, "s": runs}
        if self.checksums is not None:
            fields["c"] = list(self.checksums)
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | None) -> PartLayout | None:
        if not text:
            return None
        fields = json.loads(text)
        sizes = tuple(size for size, times in fields["s"] for _ in range(times))
        found = fields.get("c")
        return cls(fields["u"], sizes, None if found is None else tuple(found))
