"""The server's log on stderr, set up once at start-up: every line JSON (`log_format =
"json"`, for the journal and `jq`) or text for a person (`auto`: text on a terminal), Uvicorn's own
messages included (its loggers propagate here instead of to handlers of its own). SIGHUP
sets the level again (`set_level`)."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, TextIO

import msgspec

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("auto", "json", "text")
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")
ACCESS = "bucketd.access"
"""The access log's logger: its records carry the line's fields as `access`."""


def stamp(seconds: float) -> str:
    """An RFC 3339 UTC time with milliseconds, as every log line has it."""
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        + f".{int(seconds % 1 * 1000):03d}Z"
    )


class JsonLines(logging.Formatter):
    """One JSON object per record: an access line's fields, or time, level, logger and
    message (with the traceback as `exception`)."""

    def format(self, record: logging.LogRecord) -> str:
        access = getattr(record, "access", None)
        if access is not None:
            return msgspec.json.encode(access).decode()
        line: dict[str, Any] = {
            "time": stamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(line).decode()


class Text(logging.Formatter):
    """`time level logger: message`; an access line as `time listener METHOD route status
    duration`, with its request id."""

    def format(self, record: logging.LogRecord) -> str:
        access = getattr(record, "access", None)
        if access is not None:
            return (
                f"{access['time']} {access['listener']} {access['method']} {access['route']} "
                f"{access['status']} {access['duration_ms']} ms {access['bytes_in']}B in "
                f"{access['bytes_out']}B out id={access['request_id']}"
            )
        text = f"{stamp(record.created)} {record.levelname.lower()} {record.name}: "
        text += record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(log_format: str, level: str, access_log: bool, stream: TextIO = sys.stderr) -> None:
    """Route every logger (bucketd's and Uvicorn's) to one handler on `stream`."""
    if log_format == "auto":
        log_format = "text" if stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLines() if log_format == "json" else Text())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    for name in UVICORN:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    access = logging.getLogger(ACCESS)
    access.disabled = not access_log
    # No line shows the thread or process names, and looking them up is a third of the
    # LogRecord each access line makes (2-3 µs of a request).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    set_level(level)


def set_level(level: str) -> None:
    """bucketd's loggers at `level`; the libraries' at info or above (aiosqlite's debug is
    a line per query) and Uvicorn's own info lines (startup, shutdown) only at debug. The
    access log is at info whatever the level, when it is on."""
    logging.getLogger().setLevel("INFO" if level == "debug" else level.upper())
    logging.getLogger("bucketd").setLevel(level.upper())
    for name in UVICORN:
        logging.getLogger(name).setLevel("DEBUG" if level == "debug" else "WARNING")
    logging.getLogger(ACCESS).setLevel(logging.INFO)
