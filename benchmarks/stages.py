"""Folded stacks from `py-spy record --format raw` bucketed into the stages of a request.

A stack goes to the first stage in `STAGES` that any of its frames matches, so a stage
higher in the list owns everything called beneath it (the index reads an authentication
makes count as authentication; the outbox rows a commit writes count as outbox). A stack
whose innermost frame is a thread pool's worker loop is a thread waiting for work (py-spy
does not always see that as idle) and is left out. What no rule names falls into the last
two rows, which are merged on purpose: they cannot be told apart from a stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

IDLE = "idle"
OTHER_APP = "routing, middleware and handlers (other)"
SERVER = "server and event loop (uvicorn, asyncio, uvloop)"


@dataclass(frozen=True)
class Frame:
    function: str
    file: str


@dataclass(frozen=True)
class Rule:
    """A frame matches when its file contains one of `files`, or when it is one of
    `functions` (`Class.method` as py-spy names it) in a file containing `file`."""

    files: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    file: str = ""

    def matches(self, frame: Frame) -> bool:
        if any(part in frame.file for part in self.files):
            return True
        return frame.function in self.functions and self.file in frame.file


STAGES: list[tuple[str, list[Rule]]] = [
    (
        "outbox (events written with the commit, delivery wake-up)",
        [
            Rule(
                files=(
                    "storage/index/events.py",
                    "storage/services/event_log.py",
                    "gateway/delivery/",
                )
            )
        ],
    ),
    (
        "commit (index write transaction)",
        [
            Rule(
                functions=(
                    "SQLiteDriver._commit_batch",
                    "SQLiteDriver._commit_locked",
                    "SQLiteDriver._write_loop",
                    "SQLiteDriver._settle",
                    "SQLiteDriver.write",
                ),
                file="storage/index/sqlite.py",
            ),
            Rule(functions=("BlobCommits.commit",), file="storage/backends/commits.py"),
        ],
    ),
    (
        "parse (request line, headers, body receive)",
        [
            Rule(files=("gateway/http/protocol.py", "starlette/requests.py", "httptools/")),
            Rule(
                functions=(
                    "HttpToolsProtocol.data_received",
                    "HttpToolsProtocol.on_message_begin",
                    "HttpToolsProtocol.on_url",
                    "HttpToolsProtocol.on_header",
                    "HttpToolsProtocol.on_headers_complete",
                    "HttpToolsProtocol.on_body",
                    "HttpToolsProtocol.on_message_complete",
                    "RequestResponseCycle.receive",
                ),
                file="httptools_impl.py",
            ),
            Rule(
                files=(
                    "gateway/s3/payload.py",
                    "gateway/s3/operations.py",
                    "gateway/http/inputs.py",
                )
            ),
            Rule(functions=("limited",), file="storage/rules/limits.py"),
            Rule(
                functions=(
                    "TimedBody.receive",
                    "ObserveMiddleware.__call__.<locals>.counting_receive",
                ),
                file="gateway/http/",
            ),
        ],
    ),
    (
        "content write (blob file, hash, fsync, rename)",
        [
            Rule(files=("storage/backends/local/", "hashlib")),
            Rule(functions=("BlobCommits.store",), file="storage/backends/commits.py"),
        ],
    ),
    ("logging", [Rule(files=("gateway/runtime/logs.py", "logging/"))]),
    ("metrics", [Rule(files=("gateway/http/metrics.py", "prometheus_client/"))]),
    (
        "authentication and SigV4",
        [
            Rule(
                files=(
                    "gateway/s3/auth.py",
                    "gateway/s3/sigv4.py",
                    "gateway/s3/sigv2.py",
                    "gateway/http/auth.py",
                    "gateway/http/key_cache.py",
                    "storage/services/keys.py",
                )
            ),
            Rule(functions=("S3Endpoint._authenticate",), file="gateway/s3/app.py"),
        ],
    ),
    (
        "access decision",
        [
            Rule(
                files=(
                    "gateway/api/access.py",
                    "storage/rules/access.py",
                    "gateway/s3/access.py",
                    "gateway/s3/permissions.py",
                )
            )
        ],
    ),
    (
        "rate limit",
        [
            Rule(
                files=(
                    "gateway/http/ratelimit.py",
                    "gateway/http/shared_limit.py",
                    "gateway/http/worker_limit.py",
                    "gateway/http/anonymous.py",
                )
            )
        ],
    ),
    ("index reads", [Rule(files=("storage/index/", "aiosqlite/", "sqlite3/"))]),
    (
        "upload pre-checks (limits, quota, name reservation)",
        [
            Rule(
                functions=("Files.check_upload", "Files.check_condition", "Buckets.reserve_name"),
                file="storage/services/",
            )
        ],
    ),
    (
        "response (headers, body, send)",
        [
            Rule(
                files=(
                    "starlette/responses.py",
                    "gateway/http/envelope.py",
                    "gateway/http/zero_copy.py",
                    "gateway/s3/xml.py",
                )
            ),
            Rule(functions=("RequestResponseCycle.send",), file="uvicorn/"),
        ],
    ),
    (OTHER_APP, [Rule(files=("gateway/", "storage/", "starlette/", "benchmarks/"))]),
]
WAITS = [
    Rule(functions=("_worker",), file="concurrent/futures/thread.py"),
    Rule(functions=("_connection_worker_thread",), file="aiosqlite/core.py"),
]
"""Innermost frames that are a pool thread blocked on its queue."""
LAUNCH = Rule(files=("gateway/__main__.py", "gateway/cli/", "gateway/runtime/serving.py"))
"""The frames that start the server, beneath every request: no stage's."""

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def parse_frame(text: str) -> Frame:
    """`Class.method (path/file.py:12)` into its function and file; a frame without a
    location (py-spy's thread and process labels) keeps its text as the function."""
    match = _FRAME.match(text)
    if match is None:
        return Frame(text, "")
    return Frame(match["function"], match["file"])


def stage_of(frames: list[Frame]) -> str:
    if frames and any(rule.matches(frames[-1]) for rule in WAITS):
        return IDLE
    for stage, rules in STAGES:
        if any(rule.matches(frame) for frame in frames for rule in rules):
            return stage
    return SERVER


def bucket(lines: Iterable[str]) -> dict[str, int]:
    """Samples per stage from raw folded lines (`frame;frame;... count`), idle included
    under `IDLE`; blank lines are skipped."""
    counts: dict[str, int] = {}
    for line in lines:
        line = line.strip()
        if not line:
            continue
        stack, _, count = line.rpartition(" ")
        frames = [parse_frame(part) for part in stack.split(";")]
        frames = [frame for frame in frames if not LAUNCH.matches(frame)]
        stage = stage_of(frames)
        counts[stage] = counts.get(stage, 0) + int(count)
    return counts


def order() -> list[str]:
    """Every stage in the order the table lists them."""
    return [stage for stage, _ in STAGES] + [SERVER]
