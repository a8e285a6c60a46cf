"""Rules for names, regions, keys, limits and MIME types (docs/api.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bucketd_client.contract import (
    BUCKET_NAME_PATTERN,
    MAX_ALLOW_LIST,
    MAX_KEY_BYTES,
    MAX_NAME_LENGTH,
    MIME_PARAMETER_PATTERN,
    MIME_PATTERN,
    MIME_TYPE_PATTERN,
)
from storage.errors import (
    InvalidBucketName,
    InvalidContentType,
    InvalidInput,
    InvalidKey,
    InvalidRegion,
)

MAX_UPLOAD_BYTES = 2**62
_BUCKET_NAME = re.compile(BUCKET_NAME_PATTERN)
_REGION_FORM = re.compile(r"[a-z]{2,}-[a-z]+-[0-9]+")
_MEDIA_TYPE = re.compile(MIME_TYPE_PATTERN)
_PATTERN = re.compile(MIME_PATTERN)


def check_bucket_name(name: object) -> str:
    if not isinstance(name, str) or not _BUCKET_NAME.fullmatch(name):
        raise InvalidBucketName(
            "name must be 3 to 63 characters of a-z, 0-9, '-' and '.', "
            "starting and ending with a letter or digit" + _which_rule(name)
        )
    return name


def _which_rule(name: object) -> str:
    """The rule a refused bucket name breaks, as a suffix of the message."""
    if not isinstance(name, str):
        return ""
    if not 3 <= len(name) <= 63:
        return f" ({name!r} has {len(name)} characters)"
    if any(c.isupper() for c in name):
        return " (no upper case letters)"
    wrong = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "-."))})
    if wrong:
        return f" ({', '.join(repr(c) for c in wrong)} may not appear)"
    return f" ({name!r} starts or ends with {name[0] if not name[0].isalnum() else name[-1]!r})"


S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
S3_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def s3_bucket_name_problem(name: str) -> str | None:
    """What S3's naming rules refuse beyond the contract's (which /v1 keeps): two adjacent
    periods, the shape of an IP address, reserved prefixes and suffixes. None: fine."""
    if ".." in name:
        return "two adjacent periods"
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", name):
        return "the shape of an IP address"
    for prefix in S3_RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"the reserved prefix {prefix}"
    for suffix in S3_RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"the reserved suffix {suffix}"
    return None


def check_name(name: object, what: str = "name") -> str:
    """The name of an organization or a key; never a NUL, which PostgreSQL cannot store
    (refused on SQLite too, so a name is valid on every index or on none)."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(
            f"{what} must be a non-empty string of at most {MAX_NAME_LENGTH} characters"
        )
    if "\x00" in name:
        raise InvalidInput(f"{what} holds a NUL character")
    return name


def check_s3_credentials(access_key_id: object, secret: object) -> tuple[str, str]:
    """S3 credentials chosen by an operator: an access key id of 1 to 128 letters, digits,
    '.', '_' or '-' (`ci` is one), and a secret of 8 to 128 printable ASCII characters."""
    if not isinstance(access_key_id, str) or not re.fullmatch(
        r"[A-Za-z0-9._-]{1,128}", access_key_id
    ):
        raise InvalidInput("the access key id must be 1 to 128 letters, digits, '.', '_' or '-'")
    if not isinstance(secret, str) or not re.fullmatch(r"[!-~]{8,128}", secret):
        length = len(secret) if isinstance(secret, str) else 0
        raise InvalidInput(
            "the secret access key must be 8 to 128 printable ASCII characters, no spaces"
            + (
                f" (it has {length}: a secret that short is guessed in moments, and a "
                "server reachable from elsewhere would take it; for LocalStack's test/test, "
                "use e.g. test/testtest)"
                if 0 < length < 8
                else ""
            )
        )
    return access_key_id, secret


def check_max_bytes(value: object) -> int:
    """A bucket's upload size limit."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UPLOAD_BYTES:
        raise InvalidInput("maxUploadBytes must be a non-negative integer")
    return value


def default_region(regions: Sequence[str]) -> str:
    """The region of a bucket made without one, and the one S3 clients are told to use."""
    return "us-east-1" if "us-east-1" in regions else regions[0]


def check_region(region: object, allowed: Sequence[str]) -> str:
    if not isinstance(region, str) or not _REGION_FORM.fullmatch(region):
        raise InvalidRegion("region must have the form <area>-<direction>-<number>, e.g. us-east-1")
    if region not in allowed:
        raise InvalidRegion(f"unknown region {region!r}; allowed: {', '.join(allowed)}")
    return region


def check_key(key: str) -> str:
    if key == "":
        raise InvalidKey("the file key is empty")
    if "\x00" in key:
        raise InvalidKey("the file key holds a NUL character")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKey("the file key is not valid UTF-8") from None
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidKey(f"the file key is longer than {MAX_KEY_BYTES} bytes")
    return key


MAX_PORTABLE_SEGMENT = 255


def portable_key_problem(key: str) -> str | None:
    """Why a file-system-backed S3 server (SeaweedFS, MinIO's FS mode) would alter `key`.

    Such servers map keys to paths: they drop empty segments and a leading slash, refuse
    `.` and `..` segments, keep a trailing slash as a directory and cap segment length.
    Two keys bucketd tells apart could then land on one object; refusing them is the safe
    answer. None when the key is portable.
    """
    segments = key.split("/")
    if key.startswith("/") or key.endswith("/") or "" in segments:
        return "leading, trailing or doubled slashes"
    if any(segment in (".", "..") for segment in segments):
        return "'.' or '..' segments"
    if any(len(segment.encode("utf-8")) > MAX_PORTABLE_SEGMENT for segment in segments):
        return f"a segment longer than {MAX_PORTABLE_SEGMENT} bytes"
    return None


def media_type(content_type: str) -> tuple[str, str] | None:
    """(`type/subtype` lower-cased, the whole value normalised) of a media type, or None
    when the value is not exactly one (`image/png; x=1, text/html` is not). Normalised:
    type, subtype and parameter names lower-cased, `; name=value` with no other spaces."""
    match = _MEDIA_TYPE.fullmatch(content_type.strip(" \t"))
    if match is None:
        return None
    essence = f"{match.group(1)}/{match.group(2)}".lower()
    parameters = "".join(
        f"; {name.lower()}={value}"
        for name, value in re.findall(MIME_PARAMETER_PATTERN, match.group(3))
    )
    return essence, essence + parameters


def mime_essence(content_type: str) -> str | None:
    """`type/subtype` lower-cased, or None when the value is not a media type."""
    parsed = media_type(content_type)
    return None if parsed is None else parsed[0]


def check_content_type_value(content_type: object) -> str:
    """A MIME type given in a JSON body (PATCH of a file), normalised."""
    parsed = media_type(content_type) if isinstance(content_type, str) else None
    if parsed is None:
        raise InvalidContentType("contentType must be a MIME type such as text/plain")
    return parsed[1]


def check_allow_list(patterns: object) -> tuple[str, ...]:
    if (
        not isinstance(patterns, list)
        or not patterns
        or len(patterns) > MAX_ALLOW_LIST
        or not all(isinstance(p, str) and _PATTERN.fullmatch(p) for p in patterns)
    ):
        raise InvalidContentType(
            "allowedContentTypes must be a non-empty list of MIME types or patterns "
            "such as image/png, image/* or */*"
        )
    return tuple(p.lower() for p in patterns)


def content_type_allowed(essence: str, patterns: Iterable[str]) -> bool:
    major = essence.split("/", 1)[0]
    for pattern in patterns:
        if pattern == "*/*" or pattern == essence or pattern == f"{major}/*":
            return True
    return False


LARGEST = 2**63 - 1
"""The largest whole number any input takes (what a 64-bit integer column holds)."""


def whole_number(
    raw: str | bytes | None, largest: int = LARGEST, strip: bool = False
) -> int | None:
    """`raw` as a whole number written in ASCII digits (with `strip`, surrounding spaces
    aside: an XML element's text), at most `largest`; None for anything else: no sign, no
    Unicode digits (superscripts, Arabic-Indic, which `str.isdigit` takes and `int`
    refuses), no number past 19 digits (Python refuses to read past 4,300, SQLite to store
    past 2**63 - 1)."""
    if raw is None:
        return None
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    text = text.strip() if strip else text
    if not text or len(text) > 19 or not text.isascii() or not text.isdigit():
        return None
    number = int(text)
    return number if number <= largest else None
