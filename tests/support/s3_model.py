"""The inputs of S3's operations as the installed botocore's service model names them on the
wire, in `gateway/s3/members.py`'s form: `header:x-amz-acl`, `headers:x-amz-meta-`,
`query:versionId`, `body:Delete/Object/ETag`."""

from __future__ import annotations

import functools
from typing import Any

import botocore.session


@functools.cache
def model() -> Any:
    return botocore.session.get_session().get_service_model("s3")


def _paths(shape: Any, path: str, seen: frozenset[str]) -> list[str]:
    if shape.type_name == "structure":
        if shape.name in seen or not shape.members:
            return [path]
        found = []
        for name, member in shape.members.items():
            wire = member.serialization.get("name", name)
            found += _paths(member, f"{path}/{wire}", seen | {shape.name})
        return found
    if shape.type_name == "list":
        member = shape.member
        inner = (
            path
            if shape.serialization.get("flattened")
            else f"{path}/" + (member.serialization.get("name", "member"))
        )
        return _paths(member, inner, seen)
    return [path]


def members(operation: str) -> set[str]:
    """Every input member of `operation` (path parameters and a streamed body aside)."""
    shape = model().operation_model(operation).input_shape
    if shape is None:
        return set()
    payload = shape.serialization.get("payload")
    found = set()
    for name, member in shape.members.items():
        location = member.serialization.get("location", "body")
        wire = member.serialization.get("name", name)
        if location in ("header", "headers"):
            found.add(f"{location}:{wire.lower()}")
        elif location == "querystring":
            found.add(f"query:{wire}")
        elif location == "body" and name == payload and member.type_name == "structure":
            found |= {f"body:{path}" for path in _paths(member, wire, frozenset())}
    return found
