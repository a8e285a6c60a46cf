"""The encrypted content format (issue 37 point 4): packages open only where and as they
were sealed, a range opens only the packages it covers, and master keys wrap and rewrap
content keys."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
from collections.abc import AsyncIterator

import pytest

from storage import encryption as enc
from storage.errors import ContentTampered, EncryptionKeyMissing

KEY = bytes(range(32))


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


async def _gather(stream: AsyncIterator[bytes]) -> bytes:
    return b"".join([piece async for piece in stream])


def _sealed(plain: bytes, chunk: int = 10_000) -> bytes:
    return asyncio.run(_gather(enc.seal_stream(KEY, _chunks(plain, chunk))))


def _read(stored: bytes, start: int, end: int, plain_size: int, chunk: int = 7_777) -> bytes:
    where = enc.span(start, end, plain_size)
    fetched = stored[where.stored_start : where.stored_end]
    return asyncio.run(
        _gather(enc.open_stream(KEY, _chunks(fetched, chunk), start, end, plain_size))
    )


@pytest.mark.parametrize(
    "size", [0, 1, enc.PACKAGE - 1, enc.PACKAGE, enc.PACKAGE + 1, 3 * enc.PACKAGE + 5]
)
def test_a_stream_seals_to_its_size_and_opens_whole(size: int) -> None:
    plain = os.urandom(size)
    stored = _sealed(plain)
    assert len(stored) == enc.sealed_size(size)
    assert stored == enc.seal(KEY, plain)
    assert plain not in stored or size < 8  # a byte or two may turn up in any ciphertext
    assert enc.open_all(KEY, stored, size) == plain
    assert _read(stored, 0, size, size) == plain


def test_a_range_fetches_only_the_packages_it_covers() -> None:
    size = 10 * enc.PACKAGE + 123
    plain = os.urandom(size)
    stored = _sealed(plain)
    for start, end in [
        (0, 1),
        (5, 5),
        (enc.PACKAGE - 1, enc.PACKAGE + 1),
        (3 * enc.PACKAGE, 4 * enc.PACKAGE),
        (7 * enc.PACKAGE + 9, size),
        (size - 1, size),
    ]:
        where = enc.span(start, end, size)
        covered = (where.stored_end - where.stored_start) // enc.SEALED_PACKAGE
        assert covered <= (end - start) // enc.PACKAGE + 2
        assert _read(stored, start, end, size) == plain[start:end]
    one = enc.span(3 * enc.PACKAGE, 4 * enc.PACKAGE, size)
    assert one.stored_end - one.stored_start == enc.SEALED_PACKAGE


def test_a_flipped_byte_is_an_error() -> None:
    plain = os.urandom(3 * enc.PACKAGE)
    stored = bytearray(_sealed(plain))
    stored[enc.SEALED_PACKAGE + 100] ^= 1
    with pytest.raises(ContentTampered):
        _read(bytes(stored), 0, len(plain), len(plain))
    with pytest.raises(ContentTampered):
        enc.open_all(KEY, bytes(stored), len(plain))
    # The packages before the flipped one still open: a range never needs the others.
    assert _read(bytes(stored), 0, 10, len(plain)) == plain[:10]


def test_reordered_packages_are_an_error() -> None:
    plain = os.urandom(3 * enc.PACKAGE)
    stored = _sealed(plain)
    p = [stored[n * enc.SEALED_PACKAGE : (n + 1) * enc.SEALED_PACKAGE] for n in range(3)]
    swapped = p[1] + p[0] + p[2]
    with pytest.raises(ContentTampered):
        _read(swapped, 0, len(plain), len(plain))
    # A last package moved before the end (or a middle one moved last) fails too.
    with pytest.raises(ContentTampered):
        _read(p[0] + p[2] + p[1], 0, len(plain), len(plain))


@pytest.mark.parametrize("cut", [enc.SEALED_PACKAGE, enc.SEALED_PACKAGE + 5, 1])
def test_a_truncated_content_is_an_error(cut: int) -> None:
    plain = os.urandom(2 * enc.PACKAGE + 10)
    stored = _sealed(plain)
    with pytest.raises(ContentTampered):
        _read(stored[:-cut], 0, len(plain), len(plain))
    with pytest.raises(ContentTampered):
        enc.open_all(KEY, stored[:-cut], len(plain))


def test_a_content_cut_at_a_package_boundary_is_not_a_shorter_content() -> None:
    """The first package of a two-package content, read as a one-package content, fails:
    it was not sealed as the last."""
    plain = os.urandom(enc.PACKAGE + 1)
    stored = _sealed(plain)
    with pytest.raises(ContentTampered):
        enc.open_all(KEY, stored[: enc.SEALED_PACKAGE], enc.PACKAGE)


def test_another_key_does_not_open() -> None:
    stored = enc.seal(os.urandom(32), b"secret")
    with pytest.raises(ContentTampered):
        enc.open_all(KEY, stored, 6)


def test_master_keys_wrap_and_rotation_rewraps() -> None:
    old, new = os.urandom(32), os.urandom(32)
    keys = enc.MasterKeys(old)
    content_key, envelope = keys.new_content_key()
    envelope = dataclasses.replace(envelope, content_sha256="ab" * 32)
    assert content_key not in envelope.wrapped
    assert enc.Envelope.decode(envelope.encode()) == envelope
    assert keys.unwrap(envelope) == content_key
    assert keys.rewrap(envelope) is None

    rotated = enc.MasterKeys(new, [old])
    moved = rotated.rewrap(envelope)
    assert moved is not None and moved.key_id == rotated.current_id != envelope.key_id
    assert moved.content_sha256 == envelope.content_sha256
    assert rotated.unwrap(moved) == content_key == rotated.unwrap(envelope)
    with pytest.raises(EncryptionKeyMissing):
        enc.MasterKeys(new).unwrap(envelope)
    tampered = enc.Envelope(envelope.algorithm, envelope.key_id, bytes(len(envelope.wrapped)))
    with pytest.raises(ContentTampered):
        keys.unwrap(tampered)


def test_master_keys_load_from_text_or_file(tmp_path: object) -> None:
    assert isinstance(tmp_path, os.PathLike)
    raw = os.urandom(32)
    text = base64.b64encode(raw).decode()
    raw_file, text_file = os.path.join(tmp_path, "raw"), os.path.join(tmp_path, "text")
    with open(raw_file, "wb") as handle:
        handle.write(raw)
    with open(text_file, "w") as handle:
        handle.write(text + "\n")
    ids = {enc.MasterKeys.load(v).current_id for v in (text, f"@{raw_file}", f"@{text_file}")}
    assert ids == {enc.key_id(raw)}
    with pytest.raises(ValueError):
        enc.MasterKeys.load(base64.b64encode(b"short").decode())
    with pytest.raises(ValueError):
        enc.MasterKeys.load("not base64!")
