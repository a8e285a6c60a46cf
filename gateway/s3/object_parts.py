"""What GetObject and HeadObject read of an object: a `Range`, or the part `partNumber`
names. A multipart object's parts are those its upload completed with
(`storage/rules/part_layout.py`); an object written in one piece is one part, 1 being all
of it."""

from __future__ import annotations

from gateway.http.ranges import parse_range, well_formed
from storage.errors import RangeNotSatisfiable
from storage.models import FileRecord
from storage.rules.checksums import Checksum
from storage.rules.part_layout import PartLayout
from storage.rules.validation import whole_number

from .call import S3Call
from .errors import S3Error


def ranged(call: S3Call) -> bool:
    header = call.request.headers.get("range")
    return bool(header and well_formed(header)) or "partNumber" in call.params


def _part_number(call: S3Call) -> int | None:
    part = call.params.get("partNumber")
    if part is None:
        return None
    if call.request.headers.get("range"):
        raise S3Error(
            "InvalidRequest", "Cannot specify both Range header and partNumber query parameter."
        )
    number = whole_number(part, 10_000)
    if number is None or number < 1:
        raise S3Error("InvalidArgument", "Part number must be an integer between 1 and 10000")
    return number


def byte_range(call: S3Call, record: FileRecord) -> tuple[int, int]:
    """[start, end) of the bytes a GET or HEAD asks for. A part past the last is 416
    `InvalidPartNumber`, as AWS documents it (ceph's gateway answers 400 `InvalidPart`)."""
    number = _part_number(call)
    if number is not None:
        layout = PartLayout.decode(record.parts)
        span = (0, record.size) if layout is None and number == 1 else None
        if layout is not None:
            span = layout.span(number)
        if span is None:
            raise S3Error("InvalidPartNumber", "The requested partnumber is not satisfiable", 416)
        return span
    header = call.request.headers.get("range")
    if not header or not well_formed(header):
        return 0, record.size
    try:
        return parse_range(header, record.size)
    except RangeNotSatisfiable as exc:
        raise S3Error(
            "InvalidRange",
            "The requested range is not satisfiable",
            416,
            {"Content-Range": f"bytes */{exc.size}"},
        ) from None


def part_headers(call: S3Call, record: FileRecord) -> dict[str, str]:
    """A part read's `x-amz-mp-parts-count` (of a multipart object) and, with
    `x-amz-checksum-mode: ENABLED`, the part's checksum where its upload stored one (the
    whole object's for an object written in one piece), under the object's checksum type."""
    number = _part_number(call)
    if number is None:
        return {}
    layout = PartLayout.decode(record.parts)
    headers = {} if layout is None else {"x-amz-mp-parts-count": str(layout.count)}
    if call.request.headers.get("x-amz-checksum-mode", "").upper() != "ENABLED":
        return headers
    stored = Checksum.from_json(record.checksum)
    value = stored.value if stored is not None and layout is None else None
    if stored is not None and layout is not None:
        value = layout.checksum(number)
    if stored is not None and value is not None:
        headers[f"x-amz-checksum-{stored.algorithm.lower()}"] = value
        headers["x-amz-checksum-type"] = stored.type
    return headers
