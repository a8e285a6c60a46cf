"""The SSE-KMS keyring (storage/kms.py): how entries are read, which key a request
resolves to, and that a wrapped key opens only under the key and name it was wrapped for."""

from __future__ import annotations

import base64
import os
from dataclasses import replace
from pathlib import Path

import pytest

from storage import kms
from storage.encryption import SSE_KMS, MasterKeys
from storage.errors import (
    ContentTampered,
    EncryptionKeyMissing,
    InvalidInput,
    KmsKeyNotFound,
    NotSupported,
)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_entries_from_text_and_files_and_the_default(tmp_path: Path) -> None:
    (tmp_path / "raw.key").write_bytes(os.urandom(32))
    (tmp_path / "text.key").write_text(_b64(os.urandom(32)) + "\n")
    ring = kms.Keyring(
        [f"a={_b64(os.urandom(32))}", f"b=@{tmp_path / 'raw.key'}", f"c=@{tmp_path / 'text.key'}"]
    )
    assert ring.default == "a"
    assert [ring.resolve(kms.requested(n)) for n in ("b", "c", None)] == ["b", "c", "a"]
    assert ring.resolve(kms.requested("arn:aws:kms:eu-west-1:123456789012:key/c")) == "c"
    assert (
        kms.Keyring([f"a={_b64(os.urandom(32))}", f"b={_b64(os.urandom(32))}"], "b").default == "b"
    )
    for bad, default in [
        (["nameless"], ""),
        ([f"bad name={_b64(os.urandom(32))}"], ""),
        ([f"short={_b64(os.urandom(16))}"], ""),
        ([f"a={_b64(os.urandom(32))}"], "b"),
    ]:
        with pytest.raises(InvalidInput):
            kms.keyring(bad, default)


def test_unknown_names_and_no_keyring_are_refused() -> None:
    ring = kms.Keyring([f"a={_b64(os.urandom(32))}"])
    for key_id in ("b", "alias/a", "a b"):
        with pytest.raises(KmsKeyNotFound):
            ring.resolve(kms.requested(key_id))
    with pytest.raises(NotSupported):
        kms.Keyring().resolve(kms.requested("a"))
    assert kms.is_kms("aws:kms") and kms.is_kms("aws:kms/a")
    assert not kms.is_kms("aws:kms:dsse") and not kms.is_kms("AES256") and not kms.is_kms(None)


def test_a_wrapped_key_opens_under_its_own_key_and_name_only() -> None:
    first, second = os.urandom(32), os.urandom(32)
    ring = kms.Keyring([f"a={_b64(first)}", f"b={_b64(second)}"])
    content_key, envelope = ring.new_content_key(kms.requested("a"))
    assert (envelope.algorithm, envelope.key_id) == (SSE_KMS, "a")
    assert ring.unwrap(envelope) == content_key
    # The same bytes under another name (b holds a's key here) do not open: the name is bound.
    swapped = kms.Keyring([f"a={_b64(second)}", f"b={_b64(first)}"])
    with pytest.raises(ContentTampered):
        swapped.unwrap(replace(envelope, key_id="b"))
    with pytest.raises(ContentTampered):
        swapped.unwrap(envelope)
    with pytest.raises(EncryptionKeyMissing):
        kms.Keyring([f"b={_b64(first)}"]).unwrap(envelope)
    # A master-key rotation leaves aws:kms envelopes alone.
    assert MasterKeys(os.urandom(32)).rewrap(envelope) is None
