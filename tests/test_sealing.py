"""Secrets sealed at rest (`storage/sealing.py`): they open under their data dir's key and
context only, and anything else is a typed error, not cryptography's."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.errors import SecretUnsealable
from storage.sealing import KEY_FILE, Sealer


def test_a_secret_opens_under_its_key_and_context_only(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mine, other = Sealer.for_data_dir(tmp_path / "a"), Sealer.for_data_dir(tmp_path / "b")
    assert (tmp_path / "a" / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert len((tmp_path / "a" / KEY_FILE).read_bytes()) == 32
    sealed = mine.seal("s3cret", "webhook secret")
    assert b"s3cret" not in sealed
    assert Sealer.for_data_dir(tmp_path / "a").open(sealed, "webhook secret") == "s3cret"
    for sealer, context in ((other, "webhook secret"), (mine, "S3 secret")):
        with pytest.raises(SecretUnsealable):
            sealer.open(sealed, context)
