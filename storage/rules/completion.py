"""What a CompleteMultipartUpload asks of the parts it lists, decided from the upload and
its stored parts alone: their order and ETags, sizes and checksums, the claims the request
makes of the whole object, and the object's checksum made from its parts'."""

from __future__ import annotations

import hashlib
import re

from storage.errors import (
    ChecksumMismatch,
    InvalidPart,
    InvalidPartOrder,
    PartTooSmall,
    TooLarge,
    UploadMismatch,
)
from storage.models import Bucket, CompletedPart, CompletionClaim, MultipartUpload, Part
from storage.rules import checksums

MIN_PART_SIZE = 5 * 1024 * 1024


def validate(requested: list[CompletedPart], stored: dict[int, Part], bucket: Bucket) -> list[Part]:
    if not requested:
        raise InvalidPart("a multipart upload needs at least one part")
    numbers = [asked.number for asked in requested]
    if numbers != sorted(numbers):
        raise InvalidPartOrder("the parts must be listed in ascending order")
    # A part uploaded again is listed again by clients that record every answer (each
    # upload's ETag, in the order the uploads finished): as in S3, the last listing of
    # a number names the part, and the number counts once.
    last = {asked.number: asked for asked in requested}
    parts = []
    for asked in last.values():
        part = stored.get(asked.number)
        if part is None or asked.etag.strip().strip('"') != part.md5:
            raise InvalidPart(f"part {asked.number} was not uploaded with that ETag")
        if asked.checksum is not None:
            found = checksums.Checksum.from_json(part.checksum)
            if found is None or (found.algorithm, found.value) != asked.checksum:
                raise InvalidPart(
                    f"part {asked.number} was not uploaded with that {asked.checksum[0]}"
                )
        parts.append(part)
    for part in parts[:-1]:
        if part.size < MIN_PART_SIZE:
            raise PartTooSmall(
                f"part {part.part_number} is {part.size} bytes; all parts but the last "
                f"need at least {MIN_PART_SIZE}"
            )
    total = sum(part.size for part in parts)
    if total > bucket.max_upload_bytes:
        raise TooLarge(f"the object passes the bucket's limit of {bucket.max_upload_bytes} bytes")
    return parts


def check_claim(upload: MultipartUpload, parts: list[Part], claim: CompletionClaim) -> None:
    """Refuse a completion whose claim about the whole object does not hold, before
    anything is written (the upload stays, to retry or abort)."""
    if claim.size is not None and claim.size != sum(part.size for part in parts):
        raise UploadMismatch("the parts do not add up to the object size given")
    if claim.checksum is None and claim.checksum_type is None:
        return
    computed = checksums.Checksum.from_json(combined_checksum(upload, parts))
    if claim.checksum_type is not None and (
        computed is None or computed.type != claim.checksum_type.upper()
    ):
        raise UploadMismatch(f"the upload's checksum type is not {claim.checksum_type}")
    if claim.checksum is not None:
        algorithm, value = claim.checksum
        if computed is None or computed.algorithm != algorithm:
            raise UploadMismatch(f"the upload was not made with {algorithm} checksums")
        if computed.value.split("-")[0] != value.split("-")[0]:
            raise ChecksumMismatch(
                f"The {algorithm} you specified did not match the calculated checksum."
            )


def part_checksums(upload: MultipartUpload, parts: list[Part]) -> tuple[str, ...] | None:
    """The parts' checksums in the upload's algorithm; None if it has none or a part
    lacks its."""
    if not upload.checksum_algorithm:
        return None
    algorithm = upload.checksum_algorithm.split(":")[0]
    values = []
    for part in parts:
        found = checksums.Checksum.from_json(part.checksum)
        if found is None or found.algorithm != algorithm:
            return None
        values.append(found.value)
    return tuple(values)


def combined_checksum(upload: MultipartUpload, parts: list[Part]) -> str | None:
    values = part_checksums(upload, parts)
    if values is None or not upload.checksum_algorithm:
        return None
    algorithm, kind = upload.checksum_algorithm.split(":")
    if kind == "FULL_OBJECT":
        combined = checksums.full_object(
            algorithm, list(zip(values, [p.size for p in parts], strict=True))
        )
    else:
        combined = checksums.composite(algorithm, list(values))
    return combined.to_json()


def lists_version(requested: list[CompletedPart], md5: str | None) -> bool:
    """Whether a completion's list (a number listed again counts once, by its last
    listing) makes the multipart ETag `md5` (`<hex>-<parts>`)."""
    last = {asked.number: asked.etag.strip().strip('"') for asked in requested}
    if not last or not all(re.fullmatch(r"[0-9a-f]{32}", tag) for tag in last.values()):
        return False
    digest = hashlib.md5(b"".join(bytes.fromhex(last[number]) for number in sorted(last)))
    return md5 == f"{digest.hexdigest()}-{len(last)}"
