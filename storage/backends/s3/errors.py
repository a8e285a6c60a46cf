"""botocore's errors as storage errors, translated once, at the S3 backend's boundary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from storage.errors import BackendUnavailable, FileNotFound, InvalidKey, StorageError

CREDENTIAL_ERRORS = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "InvalidToken",
    "ExpiredToken",
}


@contextmanager
def s3_errors(action: str) -> Iterator[None]:
    """Translate botocore's errors into storage errors, once, at the boundary."""
    try:
        yield
    except StorageError:
        raise
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404", "PreconditionFailed", "412"):
            raise FileNotFound("file not found") from exc
        if code == "KeyTooLongError":
            raise InvalidKey("the S3 cluster refuses keys this long") from exc
        if code in CREDENTIAL_ERRORS:
            raise BackendUnavailable(
                f"the S3 cluster refused bucketd's credentials while trying to {action} ({code})"
            ) from exc
        raise BackendUnavailable(f"the S3 cluster failed to {action}: {code or exc}") from exc
    except (TimeoutError, BotoCoreError, OSError) as exc:
        raise BackendUnavailable(
            f"the S3 cluster is unreachable; could not {action}: {exc}"
        ) from exc
