"""The bucketing of py-spy's folded stacks into request stages (benchmarks/stages.py)."""

from __future__ import annotations

from benchmarks import stages

LAUNCH = (
    "thread (1): MainThread;_run_module_as_main (<frozen runpy>:198);"
    "<module> (gateway/__main__.py:3);serve (gateway/runtime/serving.py:38);"
    "Runner.run (asyncio/runners.py:118)"
)
APP = (
    LAUNCH + ";RequestResponseCycle.run_asgi (uvicorn/protocols/http/httptools_impl.py:422);"
    "Starlette.__call__ (starlette/applications.py:96);S3Endpoint.handle (gateway/s3/app.py:90)"
)


def test_each_stack_goes_to_the_first_stage_that_names_one_of_its_frames() -> None:
    lines = [
        APP
        + ";S3Authenticator.authenticate (gateway/s3/auth.py:40);sign (gateway/s3/sigv4.py:9) 3",
        # the key lookup made by authentication is authentication's
        APP + ";S3Endpoint._authenticate (gateway/s3/app.py:120);one (storage/index/sql.py:5) 2",
        APP + ";Files.check_upload (storage/services/files.py:160);one (storage/index/sql.py:5) 4",
        APP + ";Files.check_upload (storage/services/files.py:170) 1",
        APP + ";JsonLines.format (gateway/runtime/logs.py:61) 5",
        "thread (2): Thread-1;_connection_worker_thread (aiosqlite/core.py:63);"
        "SQLiteDriver._commit_batch (storage/index/sqlite.py:275);"
        "commit_file (storage/index/files.py:103) 7",
        "thread (2): Thread-1;_connection_worker_thread (aiosqlite/core.py:63);"
        "SQLiteDriver._commit_batch (storage/index/sqlite.py:275);"
        "record_event (storage/index/events.py:20) 2",
        APP + ";HttpToolsProtocol.data_received (uvicorn/protocols/http/httptools_impl.py:120) 6",
        APP + ";Response.__init__ (starlette/responses.py:40) 8",
        APP + ";S3Endpoint.route (gateway/s3/app.py:200) 9",
        LAUNCH + " 10",
        "thread (3): bucketd-io_0;Thread.run (threading.py:982);"
        "_worker (concurrent/futures/thread.py:81) 100",
        "thread (2): Thread-1;Thread.run (threading.py:982);"
        "_connection_worker_thread (aiosqlite/core.py:59) 50",
        "thread (3): bucketd-io_0;_worker (concurrent/futures/thread.py:83);"
        "LocalBackend.write (storage/backends/local/blobs.py:50) 11",
        "",
    ]
    assert stages.bucket(lines) == {
        "authentication and SigV4": 5,
        "index reads": 4,
        "upload pre-checks (limits, quota, name reservation)": 1,
        "logging": 5,
        "commit (index write transaction)": 7,
        "outbox (events written with the commit, delivery wake-up)": 2,
        "parse (request line, headers, body receive)": 6,
        "response (headers, body, send)": 8,
        stages.OTHER_APP: 9,
        stages.SERVER: 10,
        stages.IDLE: 150,
        "content write (blob file, hash, fsync, rename)": 11,
    }


def test_a_frame_is_split_into_function_and_file() -> None:
    assert stages.parse_frame("Class.method (gateway/s3/app.py:12)") == stages.Frame(
        "Class.method", "gateway/s3/app.py"
    )
    assert stages.parse_frame("<module> (<frozen runpy>:88)") == stages.Frame(
        "<module>", "<frozen runpy>"
    )
    assert stages.parse_frame("thread (0x7f): MainThread") == stages.Frame(
        "thread (0x7f): MainThread", ""
    )
