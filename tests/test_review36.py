"""The hostile review of issue 36's three changes (small contents in the index by default,
the S3 listener as one pure ASGI object, the null content backend): each hole found, shown
through a real server or a real `bucketd` command, beside its fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support import launch, web
from tests.support.live import TEST_CONFIG, LiveServer, new_bucket
from tests.support.names import unique_name


def _command(live: LiveServer, *args: str, **env: str) -> tuple[int, str]:
    argv = [*args, "--data-dir", str(live.data_dir), "--config", str(live.config_path)]
    result = launch.run(argv, env={**os.environ, **live.env, **env})
    return result.returncode, result.stdout + result.stderr


def test_the_null_backend_never_marks_a_real_data_dir_whatever_its_index_setting(
    tmp_path: Path,
) -> None:
    """The null backend looked for an index only where its own settings put it: given an
    in-memory index, or one in another file, it marked a data dir holding a real index, and
    from then on the local backend refused that data dir as one 'whose files have no
    contents'. It must refuse the data dir instead, and leave it as it was."""
    (tmp_path / "data").mkdir()
    local = LiveServer(tmp_path / "data", TEST_CONFIG)
    local.cli("orgs", "create", "someone", "--plan", "free")
    # `check` opens an in-memory index; a command that makes an index makes one elsewhere.
    for args, index_url in (
        (("check",), "sqlite://:memory:"),
        (("orgs", "create", "other", "--plan", "free"), f"sqlite://{tmp_path / 'other.db'}"),
    ):
        status, out = _command(
            local, *args, BUCKETD_STORAGE__BACKEND="null", BUCKETD_INDEX__URL=index_url
        )
        assert status != 0 and "made with another storage backend" in out, (index_url, out)
        assert not (local.data_dir / "NULL-BACKEND").exists(), index_url
    assert _command(local, "check") == (0, "consistent\n")


def test_s3_preflights_answer_under_the_request_id_like_every_s3_answer(
    local_server: LiveServer, s3: Any
) -> None:
    """A preflight the S3 listener answered itself had no x-amz-request-id, and a refusal's
    XML named a RequestId of its own, unlike the X-Request-Id header: the id a client
    quotes from the body found nothing in the access log. S3 gives every answer its id."""
    name = unique_name("review36-cors")
    s3.create_bucket(Bucket=name)
    url = f"{local_server.s3_url}/{name}/a"
    asks = {"Origin": "http://app.example.com", "Access-Control-Request-Method": "GET"}
    refusals = [
        web.options(url),  # no Origin
        web.options(url, headers=asks),  # no CORS configuration
        web.options(f"{local_server.s3_url}/%ff%fe/a", headers=asks),  # no UTF-8 path
    ]
    for refused in refusals:
        assert refused.status_code in (400, 403), refused.text
        rid = refused.headers["x-request-id"]
        assert refused.headers["x-amz-request-id"] == rid
        assert f"<RequestId>{rid}</RequestId>" in refused.text
    rule = {"AllowedOrigins": ["http://app.example.com"], "AllowedMethods": ["GET"]}
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [rule]})
    allowed = web.options(url, headers={**asks, "X-Request-Id": "trace-36"})
    assert allowed.status_code == 200
    assert allowed.headers["x-amz-request-id"] == allowed.headers["x-request-id"] == "trace-36"


def test_an_allowed_origin_is_echoed_as_the_bytes_it_was_sent(
    local_server: LiveServer, s3: Any
) -> None:
    """The S3 listener's CORS headers for an actual request re-encoded the origin, read as
    latin-1, in UTF-8: an origin with a byte above 127 came back as other bytes than the
    browser sent (its preflight's answer echoed them right), so the page could not read
    the answer the rule allowed."""
    name = unique_name("review36-origin")
    s3.create_bucket(Bucket=name)
    rule = {"AllowedOrigins": ["http://*.example.com"], "AllowedMethods": ["GET"]}
    s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": [rule]})
    origin = "http://é.example.com".encode()
    for answer in (
        web.get(f"{local_server.s3_url}/{name}/a", headers={"Origin": origin}),
        web.options(
            f"{local_server.s3_url}/{name}/a",
            headers={"Origin": origin, "Access-Control-Request-Method": "GET"},
        ),
    ):
        echoed = [v for k, v in answer.headers.raw if k.lower() == b"access-control-allow-origin"]
        assert echoed == [origin], (answer.status_code, echoed)


def test_a_served_data_dir_whose_index_is_elsewhere_is_not_the_null_backends(
    tmp_path: Path,
) -> None:
    """A server whose index lives outside its data dir (a file named by `index.url`; a
    PostgreSQL index is the same case) leaves there no index.db, and since small contents
    live in the index, no blob file either: only what the server wrote at its first start.
    The null backend, given an in-memory index on that data dir, took it for a new one and
    marked it, and the server then refused its own data dir."""
    (tmp_path / "data").mkdir()
    env = {"BUCKETD_INDEX__URL": f"sqlite://{tmp_path / 'index-elsewhere.db'}"}
    live = LiveServer(tmp_path / "data", TEST_CONFIG, env=env).start()
    try:
        with live.client() as http:
            bucket = new_bucket(http, unique_name("review36-null"))
            path = f"/buckets/{bucket['id']}/files/small"
            typed = {"Content-Type": "text/plain"}
            assert http.put(path, content=b"kept inline", headers=typed).status_code == 201
    finally:
        live.stop()
    status, out = _command(
        live, "check", BUCKETD_STORAGE__BACKEND="null", BUCKETD_INDEX__URL="sqlite://:memory:"
    )
    assert status != 0 and "made with another storage backend" in out, out
    assert not (live.data_dir / "NULL-BACKEND").exists()
    live.start()
    try:
        with live.client() as http:
            assert http.get(path).content == b"kept inline"
    finally:
        live.stop()
