"""What the S3 endpoint refuses with 501 `NotImplemented`, never accepting and ignoring it:
the query flags of operations bucketd does not implement, and every input `members.py`
classifies as refused (headers, query parameters, XML elements, POST form fields), checked
before the handler reads anything. docs/s3.md lists the same (tests hold them together)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from xml.etree import ElementTree

from starlette.datastructures import Headers

from .errors import S3Error, not_implemented
from .member_kinds import HONOURED, How, Table
from .members import EVERYWHERE, FORM, OPERATIONS

UNSUPPORTED_SUBRESOURCES = (
    "website",
    "logging",
    "replication",
    "torrent",
    "restore",
    "select",
    "accelerate",
    "requestPayment",
    "inventory",
    "metrics",
    "analytics",
    "intelligent-tiering",
    "abac",
    "annotation",
    "metadataConfiguration",
    "metadataTable",
    "metadataAnnotationTable",
    "metadataInventoryTable",
    "metadataJournalTable",
    "session",
    "events",
)
"""Query flags of operations bucketd does not implement: refused with 501, whatever the
method, so a request never silently does something else (a listing, say). Every flag of
botocore's S3 model is here or served (tests/test_s3_operations.py walks the model);
`events` is MinIO's listen API, which minio-py's `listen_bucket_notification` sends."""


@dataclass(frozen=True)
class Inputs:
    """One operation's classified inputs, as the checks below use them."""

    headers: dict[str, How]
    """Refused or value-restricted headers, by lower-case name."""
    query: dict[str, How]
    body: dict[str, How]
    """Every element path the operation's XML body may hold (intermediate ones as
    honoured); an element elsewhere is MalformedXML, as S3 answers one off its schema."""

    def refuse(self, headers: Headers, params: Mapping[str, str]) -> None:
        """Refuse a request asking for what bucketd does not do."""
        for name, value in headers.items():  # every copy of a repeated header too
            how = self.headers.get(name)
            if how is not None:
                _check(f"the {name} header", how, value)
        for name, value in params.items():
            how = self.query.get(name)
            if how is not None:
                _check(f"the {name} query parameter", how, value)

    def check_body(self, root: ElementTree.Element) -> None:
        """Refuse an XML body (namespaces stripped) holding a refused element or a value
        outside what is taken; MalformedXML for an element the operation does not have."""
        stack = [(root, root.tag)]
        while stack:
            element, path = stack.pop()
            how = self.body.get(path)
            if how is None:
                raise S3Error("MalformedXML", f"{path} is not part of this request's schema")
            _check(path, how, element.text or "", leaf=len(element) == 0)
            tags = [child.tag for child in element]
            twice = {tag for tag in tags if tags.count(tag) > 1} - REPEATED
            if twice:  # read once, so never one of two silently
                raise S3Error("MalformedXML", f"{path}/{min(twice)} is given twice")
            stack += [(child, f"{path}/{child.tag}") for child in element]


REPEATED = frozenset(
    {
        "Rule",
        "Tag",
        "Part",
        "Object",
        "CORSRule",
        "AllowedHeader",
        "AllowedMethod",
        "AllowedOrigin",
        "ExposeHeader",
        "Grant",
        "Event",
        "FilterRule",
        "TopicConfiguration",
        "QueueConfiguration",
        "CloudFunctionConfiguration",
        "Prefix",
    }
)
"""Elements a body may hold several of under one parent (the model's lists); any other
given twice is MalformedXML."""


def _check(what: str, how: How, value: str, leaf: bool = True) -> None:
    if how.kind == "refused":
        raise not_implemented(f"{what} ({how.why})")
    taken = value.strip().upper()
    if how.values and leaf and taken not in {v.upper() for v in how.values}:
        if how.known and taken not in {v.upper() for v in how.known}:
            raise S3Error(
                "InvalidArgument", f"{what}: {value.strip()[:40]!r} is not a value S3 takes"
            )
        raise not_implemented(f"{what}: {value.strip()[:40]!r} ({how.why or 'not taken'})")


def _classified(names: tuple[str, ...]) -> Table:
    table = dict(EVERYWHERE)
    for name in names:
        table |= OPERATIONS.get(name, {})
    return table


@functools.cache
def inputs_of(names: tuple[str, ...]) -> Inputs:
    """The inputs of an operation of the dispatch table (`names`, AWS's names for it)."""
    table = _classified(names)
    checked = {key: how for key, how in table.items() if how.kind == "refused" or how.values}
    body: dict[str, How] = {}
    for key, how in sorted(table.items()):
        if key.startswith("body:") and "xsi:" not in key:
            path = key.removeprefix("body:")
            body[path] = how
            while "/" in path:  # an element holding only refused ones is refused itself
                path = path.rsplit("/", 1)[0]
                if path not in body or body[path].kind == "refused":
                    body[path] = how if how.kind == "refused" else HONOURED
    return Inputs(
        headers={
            k.split(":", 1)[1].lower(): h for k, h in checked.items() if k.startswith("header:")
        },
        query={k.split(":", 1)[1]: h for k, h in checked.items() if k.startswith("query:")},
        body=body,
    )


def check_form(fields: Mapping[str, str]) -> None:
    """Refuse a POST upload's field asking for what bucketd does not do: one FORM refuses,
    a value outside what it takes, or an `x-amz-` field FORM does not have."""
    for name, value in fields.items():
        how = FORM.get("form:x-amz-meta-" if name.startswith("x-amz-meta-") else f"form:{name}")
        if how is None:
            if name.startswith("x-amz-"):
                raise not_implemented(f"the {name} field of a POST upload")
            continue
        _check(f"the {name} field of a POST upload", how, value)
