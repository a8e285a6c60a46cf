"""The parts of an encrypted multipart upload (issue 37): each sealed under a content key
of its own on its way to the part store, and opened again, in order, when the upload is
completed and the whole object sealed anew (`SealedContents.store`).

An SSE-C upload keeps no customer key: its row holds an envelope sealing a random key under
the customer's key (`sse_c.wrap_for_customer`), which opens only under that key. It is
what verifies the key every request that writes or joins the upload's parts must give; each
part's own content key is sealed under the customer's key likewise."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import AsyncIterator
from dataclasses import replace

from storage import encryption, sse_c
from storage.backends.local.parts import PartStore
from storage.errors import (
    CustomerKeyMismatch,
    CustomerKeyNotApplicable,
    CustomerKeyRequired,
    UploadKeyMismatch,
)
from storage.models import MultipartUpload, Part
from storage.services.sealed import SealedContents


def customer_envelope(upload: MultipartUpload) -> encryption.Envelope | None:
    """An SSE-C upload's verifier; None for any other upload (whose `encryption` is what it
    asks: AES256, an aws:kms key, or nothing)."""
    text = upload.encryption
    if text is None or not text.startswith("{"):
        return None
    envelope = encryption.Envelope.decode(text)
    return envelope if envelope.algorithm == encryption.SSE_C else None


def verifier(customer_key: bytes) -> str:
    """What an SSE-C upload keeps of its customer's key: a random key sealed under it."""
    return sse_c.wrap_for_customer(os.urandom(encryption.KEY_BYTES), customer_key).encode()


def check_key(upload: MultipartUpload, customer_key: bytes | None) -> None:
    """That a request on `upload` gives the customer key it was created with (SSE-C), and
    none for any other upload: CustomerKeyRequired, UploadKeyMismatch or
    CustomerKeyNotApplicable, before a byte is read."""
    envelope = customer_envelope(upload)
    if envelope is None:
        if customer_key is not None:
            raise CustomerKeyNotApplicable(
                "the multipart upload was not created with a customer-provided key: send no "
                "x-amz-server-side-encryption-customer-* headers for it"
            )
        return
    if customer_key is None:
        raise CustomerKeyRequired(
            "the multipart upload was created with a customer-provided key (SSE-C): its "
            "parts and its completion need that key (x-amz-server-side-encryption-customer-*)"
        )
    try:
        sse_c.unwrap_for_customer(envelope, customer_key)
    except CustomerKeyMismatch:
        raise UploadKeyMismatch(
            "The provided encryption parameters did not match the ones used originally."
        ) from None


def sealed_checksum(checksum: str | None, customer_key: bytes | None) -> str | None:
    """A part's checksum as its row keeps it: an SSE-C part's sealed under the customer's
    key (`sse_c.seal_checksum`), as its object's will be."""
    if customer_key is None:
        return checksum
    return sse_c.seal_checksum(checksum, customer_key)


def opened_checksum(part: Part, customer_key: bytes | None) -> Part:
    """The part with its checksum in clear, for a completion that gives the upload's key
    (`check_key` verified it) to check and combine."""
    if customer_key is None:
        return part
    return replace(part, checksum=sse_c.open_checksum(part.checksum, customer_key))


def part_etag(customer_key: bytes) -> hmac.HMAC:
    """The digest an SSE-C part's ETag is taken from: HMAC-SHA-256 of its plaintext under a
    key derived from the customer's. S3's SSE-C ETag is not the plaintext's MD5, and a
    digest anyone could compute would tell a guessed plaintext; this one needs the key, yet
    the same part sent again under the same key has the same ETag, so a client that
    retries a part completes with either answer's (s3-tests' resent parts do)."""
    derived = hashlib.sha256(b"bucketd SSE-C part ETag v1\x00" + customer_key).digest()
    return hmac.new(derived, digestmod=hashlib.sha256)


class SealedParts:
    def __init__(self, sealed: SealedContents, parts: PartStore) -> None:
        self._sealed = sealed
        self._parts = parts

    async def write(
        self,
        upload: MultipartUpload,
        number: int,
        stream: AsyncIterator[bytes],
        customer_key: bytes | None,
    ) -> tuple[int, str, str, str]:
        """Store a part of an encrypted upload sealed under a content key of its own (the
        package format of `storage/encryption.py`): only its packages reach the part store.
        Returns its size, its ETag, its envelope and its sealed bytes' MD5. The ETag is the
        plaintext's MD5, as AWS gives for SSE-S3; under SSE-C, `part_etag`'s digest keyed
        by the customer's key. The part's key is found through its own row (upload, part
        number), so a part file put in another part's place does not open."""
        assert upload.encryption is not None
        if customer_key is None:
            content_key, envelope = self._sealed.new_content_key(upload.encryption)
            digest: hashlib._Hash | hmac.HMAC = hashlib.md5()
        else:
            content_key = os.urandom(encryption.KEY_BYTES)
            envelope = sse_c.wrap_for_customer(content_key, customer_key)
            digest = part_etag(customer_key)
        size = 0

        def observe(chunk: bytes) -> None:
            nonlocal size
            size += len(chunk)
            digest.update(chunk)

        packages = encryption.seal_stream(content_key, stream, self._sealed.offload, observe)
        _, stored_md5 = await self._parts.write(upload.upload_id, number, packages)
        return size, digest.hexdigest()[:32], envelope.encode(), stored_md5

    async def read(
        self, upload_id: str, parts: list[Part], customer_key: bytes | None = None
    ) -> AsyncIterator[bytes]:
        """The plaintext of the parts, in order: an encrypted part is opened package by
        package as the part store streams it (a changed, cut or moved package fails); an
        SSE-C part under `customer_key`."""
        if all(part.encryption is None for part in parts):
            async for chunk in self._parts.read(
                upload_id, [(part.part_number, part.md5) for part in parts]
            ):
                yield chunk
            return
        for part in parts:
            stored = self._parts.read(upload_id, [(part.part_number, part.stored_name)])
            if part.encryption is None:
                async for chunk in stored:
                    yield chunk
                continue
            envelope = encryption.Envelope.decode(part.encryption)
            if envelope.algorithm == encryption.SSE_C:
                assert customer_key is not None  # `check_key` asked for it
                key = sse_c.unwrap_for_customer(envelope, customer_key)
            else:
                key = self._sealed.unwrap(envelope)
            async for chunk in encryption.open_stream(key, stored, 0, part.size, part.size):
                yield chunk
