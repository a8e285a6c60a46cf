"""The S3 backend's object names (storage/backends/s3/names.py): every key of the contract gets a
name a file-system-backed cluster stores faithfully, of at most 1,024 bytes, distinct for
distinct keys, that decodes back to the key (or, when too long, is a hash the index maps)."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import example, given

from storage.backends.s3.names import (
    HASHED,
    KEYS_PREFIX,
    MAX_NAME,
    VERSIONS_PREFIX,
    key_of,
    object_name,
    version_of,
)
from storage.rules.validation import MAX_PORTABLE_SEGMENT, portable_key_problem

SEGMENT = st.one_of(
    st.sampled_from(["", ".", "..", "%", "%00", "%2E", ".bucketd-keys", ".bucketd-versions"]),
    st.text(st.characters(blacklist_characters="\x00/", blacklist_categories=("Cs",)), max_size=8),
    st.text(st.sampled_from("xé%."), min_size=250, max_size=300),
)
KEYS = (
    st.lists(SEGMENT, min_size=1, max_size=6)
    .map("/".join)
    .filter(lambda key: 1 <= len(key.encode("utf-8")) <= 1024)
)
VERSION = st.one_of(st.none(), st.just("v" + "0" * 31))


CUT_TO_A_DOT = "x" * 2 * (MAX_PORTABLE_SEGMENT - 1) + "."
"""A segment whose last cut piece was a lone `.`, a forbidden segment (Hypothesis, once)."""


@given(key=KEYS, version=VERSION)
@example(key=CUT_TO_A_DOT, version=None)
def test_every_key_gets_a_faithful_name_that_maps_back(key: str, version: str | None) -> None:
    name = object_name(key, version, portable=True)
    assert portable_key_problem(name) is None
    assert len(name.encode("utf-8")) <= MAX_NAME
    assert version_of(name) == (version or "")
    back = key_of(name)
    if back is None:
        assert name.split("/", 2 if version else 0)[-1].startswith(KEYS_PREFIX + HASHED)
    else:
        assert back == key


@given(first=KEYS, second=KEYS, version=VERSION, portable=st.booleans())
def test_distinct_keys_get_distinct_names(
    first: str, second: str, version: str | None, portable: bool
) -> None:
    if first != second:
        assert object_name(first, version, portable) != object_name(second, version, portable)


def test_keys_the_cluster_can_store_keep_their_own_name() -> None:
    for key in ("photos/cat.jpg", "a%b", "é/x", "dir/.hidden", "a b/c"):
        assert object_name(key, None, portable=True) == key
        assert object_name(key, "v1", portable=True) == f"{VERSIONS_PREFIX}v1/{key}"
    assert object_name("a//b", None, portable=False) == "a//b"  # AWS S3 keeps any key
    assert object_name("a//b", None, portable=True) == f"{KEYS_PREFIX}a/%00/b"
    assert object_name("..", None, portable=True) == f"{KEYS_PREFIX}%2E%2E"


def test_keys_in_bucketds_own_namespace_are_encoded_on_every_cluster() -> None:
    for portable in (True, False):
        name = object_name(".bucketd-versions/v1/x", None, portable)
        assert name == f"{KEYS_PREFIX}%2Ebucketd-versions/v1/x"
        assert key_of(name) == ".bucketd-versions/v1/x"
