"""A /v1 signed URL can be made only by the server: its MAC key derives from the data dir's
sealing key (secrets.key, 0600) and the signing key's hash, so the index, or a backup of
it, is not enough to forge one (the hash was the MAC key before); a token lasting longer
than a signed URL can is refused whoever signed it; the index and its backups are 0600."""

from __future__ import annotations

import sqlite3
import stat
import time
from contextlib import closing
from pathlib import Path

from gateway.api.sharing import Token, encode_token
from storage.sealing import KEY_FILE, Sealer
from tests.support import web
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

TEXT = {"Content-Type": "text/plain"}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_signed_url_cannot_be_forged_from_the_index(local_server: LiveServer) -> None:
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("sig"))
        url = f"/buckets/{bucket['id']}/files/doc.txt"
        assert http.put(url, content=b"secret", headers=TEXT).status_code == 201
        signed = http.post(f"/buckets/{bucket['id']}/sign/doc.txt", json={"expiresIn": 60})
        assert web.get(signed.json()["data"]["url"]).content == b"secret"
        key_id = http.get("/keys").json()["data"][0]["id"]
    index = local_server.data_dir / "index.db"
    with closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True)) as db:
        digest = bytes(
            db.execute("SELECT secret_hash FROM api_keys WHERE id = ?", (key_id,)).fetchone()[0]
        )
    far = int(time.time()) + 10 * 365 * 24 * 3600
    token = Token(key_id, bucket["id"], "doc.txt", "GET", far, False)
    forged = web.get(f"{local_server.url}/v1{url}", params={"token": encode_token(token, digest)})
    assert forged.status_code == 401
    # With the sealing key too, the token is well made: still refused, for its 10 years.
    secret = Sealer.for_data_dir(local_server.data_dir).derive("signed-url", digest)
    long = web.get(f"{local_server.url}/v1{url}", params={"token": encode_token(token, secret)})
    assert long.status_code == 401 and "longer" in long.json()["error"]["message"]
    week = Token(key_id, bucket["id"], "doc.txt", "GET", int(time.time()) + 600, False)
    fine = web.get(f"{local_server.url}/v1{url}", params={"token": encode_token(week, secret)})
    assert fine.content == b"secret"


def test_the_index_and_its_backups_are_private(local_server: LiveServer, tmp_path: Path) -> None:
    local_server.s3_credentials()  # a sealed secret: secrets.key exists
    assert mode(local_server.data_dir / "index.db") == 0o600
    assert mode(local_server.data_dir / KEY_FILE) == 0o600
    local_server.cli("backup", str(tmp_path / "backup"))
    assert mode(tmp_path / "backup" / "index.db") == 0o600
    assert mode(tmp_path / "backup" / KEY_FILE) == 0o600
