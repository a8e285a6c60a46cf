"""Reading what a request sends: JSON bodies, query flags, file keys from the raw path."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import TypeVar
from urllib.parse import unquote_to_bytes

import msgspec
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request

from bucketd_client import shapes
from gateway.api.touches import read
from gateway.http.errors import ApiError, bad_request
from storage.rules.ids import NULL_VERSION, is_version_id
from storage.rules.validation import whole_number

R = TypeVar("R", bound=shapes.Request)


class AnyPath(Convertor[str]):
    """The rest of a path, whatever it holds. Starlette's own `path` convertor stops at a
    line feed, and a key may hold one: bucketd's routes get this one under the same name."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("path", AnyPath())

FILES_SEGMENT = 4
"""Index of `files` in /v1/buckets/<id>/files/<key> split on '/' (after the leading '')."""


class BodyTooLarge(Exception):
    """A body bucketd parses (JSON, XML, a form) is over its cap."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the body is larger than {max_bytes} bytes")
        self.max_bytes = max_bytes


async def read_capped(chunks: AsyncIterator[bytes], declared: int | None, max_bytes: int) -> bytes:
    """A whole body of at most `max_bytes`: refused by its declared length before a byte is
    read, and the moment the bytes received pass the cap (a chunked body declares none), so
    memory never holds more than the cap."""
    if declared is not None and declared > max_bytes:
        raise BodyTooLarge(max_bytes)
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > max_bytes:
            raise BodyTooLarge(max_bytes)
    return bytes(body)


def declared_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    return whole_number(raw)


def given(body: msgspec.Struct) -> dict[str, object]:
    """The fields a PATCH body sets (those left UNSET are left as they are)."""
    return {
        name: value
        for name, value in msgspec.structs.asdict(body).items()
        if value is not msgspec.UNSET
    }


async def read_json(request: Request, max_bytes: int, shape: type[R]) -> R:
    """A JSON body of at most `max_bytes`, decoded into its request shape.

    Malformed JSON and non-objects are `invalid_json`, a field the shape lacks is
    `unknown_field`, a field of the wrong type gets the shape's code for it.
    """
    try:
        body = await read_capped(request.stream(), declared_length(request), max_bytes)
    except BodyTooLarge:
        raise ApiError(
            413, "body_too_large", f"the JSON body is larger than {max_bytes} bytes"
        ) from None
    if not body.strip():
        raise bad_request("the request needs a JSON object body", "invalid_json")
    try:
        return msgspec.json.decode(body, type=shape)
    except msgspec.ValidationError as exc:
        raise _refusal(str(exc), shape) from None
    except msgspec.DecodeError as exc:
        raise bad_request(f"the body is not valid JSON: {exc}", "invalid_json") from None
    except UnicodeDecodeError:  # msgspec raises it, not DecodeError, for a string's bytes
        raise bad_request("the body is not UTF-8 JSON", "invalid_json") from None


async def read_optional_json(request: Request, max_bytes: int, shape: type[R]) -> R:
    """As `read_json`, where every field is optional: no body at all (no Content-Length, or
    0, and no chunked body) is the shape's defaults, so `curl -X POST` alone works."""
    chunked = "chunked" in request.headers.get("transfer-encoding", "").lower()
    absent = request.headers.get("content-length") is None or declared_length(request) == 0
    if absent and not chunked:
        return shape()
    return await read_json(request, max_bytes, shape)


_UNKNOWN = re.compile(r"Object contains unknown field `([^`]*)`")
_MISSING = re.compile(r"Object missing required field `([^`]*)`")
_AT = re.compile(r" - at `\$\.?([^`]*)`")


def _refusal(message: str, shape: type[shapes.Request]) -> ApiError:
    """msgspec's refusal in the API's words, naming the field by its whole path
    (`objectLock.defaultRetention.days`); the code is the top field's."""
    at = _AT.search(message)
    where = at.group(1) if at else ""
    unknown = _UNKNOWN.match(message)
    if unknown:
        return bad_request(f"unknown field {_joined(where, unknown.group(1))!r}", "unknown_field")
    missing = _MISSING.match(message)
    path = _joined(where, missing.group(1)) if missing else where
    if not path:
        return bad_request("the body must be a JSON object", "invalid_json")
    code = shape.codes.get(re.split(r"[.\[]", path)[0], "invalid_request")
    if missing:
        return bad_request(f"{path} is required", code)
    expected = _EXPECTED.match(message)
    if expected:  # msgspec's "Expected `str`, got `int` - at `$.name`", in the API's words
        want, got = (_JSON_NAMES.get(t, t) for t in expected.groups())
        return bad_request(f"{path} must be {want}, not {got}", code)
    return bad_request(f"{path}: {message.split(' - at ')[0]}", code)


def _joined(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


_EXPECTED = re.compile(r"Expected `([^`]+)`, got `([^`]+)`")
_JSON_NAMES = {
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
    "array": "a list",
    "object": "an object",
    "str | null": "a string or null",
    "int | null": "a whole number or null",
    "array | null": "a list or null",
}


def check_query(request: Request) -> None:
    """Refuse a query string that is not UTF-8 once percent-decoded (instead of reading it
    with U+FFFD in place of what was sent)."""
    raw: bytes = request.scope.get("query_string", b"")
    if not raw:
        return
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("the query string is not valid UTF-8 once percent-decoded") from None


def flag(request: Request, name: str) -> bool:
    return parse_flag(request.query_params.get(name), name)


def parse_flag(raw: str | None, name: str) -> bool:
    if raw is None or raw.lower() in {"false", "0"}:
        return False
    if raw.lower() in {"true", "1"}:
        return True
    raise bad_request(f"{name} must be true or false")


def text_param(request: Request, name: str, max_bytes: int = 1024) -> str:
    value = request.query_params.get(name, "")
    if "\x00" in value or len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise bad_request(f"{name} must be at most {max_bytes} bytes and hold no NUL")
    return value


def file_key(request: Request) -> str:
    """The key exactly as sent: the raw path after /files/ (or /sign/), percent-decoded once.

    `a%2Fb` is the key `a/b`; `..`, `.` and empty segments stay as written. Invalid UTF-8
    is a 400 (key checks after decoding are the engine's).
    """
    raw: bytes = request.scope.get("raw_path") or request.scope["path"].encode("utf-8")
    parts = raw.split(b"?", 1)[0].split(b"/", FILES_SEGMENT + 1)
    encoded = parts[FILES_SEGMENT + 1] if len(parts) > FILES_SEGMENT + 1 else b""
    try:
        return unquote_to_bytes(encoded).decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("the file key is not valid UTF-8", "invalid_key") from None


def version_param(request: Request) -> tuple[bool, str | None]:
    """(whether `versionId` names a version, which: None for the null version)."""
    raw = read(request, "version")
    if raw is None:
        return False, None
    if not is_version_id(raw):
        raise bad_request("versionId is not a version id", "invalid_version_id")
    return True, None if raw == NULL_VERSION else raw
