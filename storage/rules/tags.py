"""Tags as S3 states them: the limits of a tag set and the characters a tag may hold.

A tag set is at most 10 tags on an object, 50 on a bucket; keys are 1 to 128 characters,
values 0 to 256, of Unicode letters, digits, white space and `+ - = . _ : / @`; a key
appears once, and keys starting with `aws:` are reserved.
"""

from __future__ import annotations

import json
import re

from bucketd_client.contract import MAX_OBJECT_TAGS as MAX_OBJECT_TAGS
from storage.errors import InvalidTag

MAX_BUCKET_TAGS = 50
MAX_KEY = 128
MAX_VALUE = 256
_ALLOWED = re.compile(r"^[\w\s+\-=.:/@]*$", re.UNICODE)


def check_tags(pairs: list[tuple[str, str]], limit: int) -> dict[str, str]:
    """The tag set of `pairs` (key, value), or InvalidTag."""
    if len(pairs) > limit:
        raise InvalidTag(f"a tag set has at most {limit} tags")
    tags: dict[str, str] = {}
    for key, value in pairs:
        if not 1 <= len(key) <= MAX_KEY:
            raise InvalidTag(f"a tag key is 1 to {MAX_KEY} characters")
        if len(value) > MAX_VALUE:
            raise InvalidTag(f"a tag value is at most {MAX_VALUE} characters")
        if not (_ALLOWED.match(key) and _ALLOWED.match(value)):
            raise InvalidTag("tags hold letters, digits, white space and + - = . _ : / @")
        if key.lower().startswith("aws:"):
            raise InvalidTag("tag keys starting with aws: are reserved")
        if key in tags:
            raise InvalidTag(f"the tag key {key!r} appears twice")
        tags[key] = value
    return tags


def encode_tags(tags: dict[str, str] | None) -> str | None:
    return json.dumps(tags, sort_keys=True) if tags else None


def decode_tags(column: str | None) -> dict[str, str]:
    decoded: dict[str, str] = json.loads(column) if column else {}
    return decoded
