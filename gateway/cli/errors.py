"""How a command's failure becomes its exit status and message: one table.

Classes are named, not imported, so a command that never touches the HTTP client (`orgs
create`, `serve`) does not import it. A failure is looked up along its class hierarchy.
"""

from __future__ import annotations

from collections.abc import Callable


class UsageError(Exception):
    """The command line cannot work as given."""


class Failed(Exception):
    """A command failed after writing its own output and messages."""


POINT_ELSEWHERE = "Point the CLI at a server with --url or BUCKETD_URL"

Message = Callable[[BaseException], str | None]

EXIT_STATUS: dict[tuple[str, str], tuple[int, Message]] = {
    ("gateway", "UsageError"): (2, str),
    ("gateway", "SettingsError"): (2, str),
    ("gateway", "Failed"): (1, lambda exc: None),
    ("storage", "StorageError"): (1, str),
    ("bucketd_client", "BucketdError"): (
        1,
        lambda exc: f"{exc.message} ({exc.status} {exc.code})",  # type: ignore[attr-defined]
    ),
    ("bucketd_client", "ConnectionFailed"): (
        1,
        lambda exc: f"{exc}; is `bucketd serve` running there? {POINT_ELSEWHERE}",
    ),
    ("bucketd_client", "ManifestUnreadable"): (2, str),
    ("httpx", "TransportError"): (1, lambda exc: _unreachable(exc)),
    ("builtins", "KeyboardInterrupt"): (130, lambda exc: None),
}
"""(top-level package, class name) -> exit status and the message printed on stderr."""


def _unreachable(exc: BaseException) -> str:
    """Which URL the CLI tried, and how to point it elsewhere."""
    try:
        url = str(exc.request.url.copy_with(path="/", query=None))  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        url = "the server"
    return f"lost the connection to {url} ({exc or type(exc).__name__}); {POINT_ELSEWHERE}"


def exit_status(exc: BaseException) -> tuple[int, str | None] | None:
    """The exit status and message of a failure, None when it is not a command's failure
    (a bug: let it raise)."""
    for cls in type(exc).__mro__:
        found = EXIT_STATUS.get((cls.__module__.split(".")[0], cls.__qualname__))
        if found is not None:
            status, message = found
            return status, message(exc)
    return None
