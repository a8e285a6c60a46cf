"""S3's XML: building responses and reading the few request bodies (Delete, Complete...)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from starlette.responses import Response

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"

Node = tuple[str, Any]
"""(tag, value): value is text, a number, a bool, None (omitted), a list of nodes, or
`Attributed` nodes."""
XSI = "http://www.w3.org/2001/XMLSchema-instance"


@dataclass(frozen=True)
class Attributed:
    """Child nodes under an element that carries attributes (an ACL's `xsi:type`)."""

    attributes: dict[str, str]
    children: list[Node]


class MalformedXML(Exception):
    pass


def _build(parent: ElementTree.Element, nodes: Iterable[Node]) -> None:
    for tag, value in nodes:
        if value is None:
            continue
        child = ElementTree.SubElement(parent, tag)
        if isinstance(value, Attributed):
            child.attrib.update(value.attributes)
            _build(child, value.children)
        elif isinstance(value, list):
            _build(child, value)
        elif isinstance(value, bool):
            child.text = "true" if value else "false"
        else:
            child.text = str(value)


def render(root: str, nodes: Iterable[Node], namespace: bool = True) -> bytes:
    element = ElementTree.Element(root, {"xmlns": NAMESPACE} if namespace else {})
    _build(element, nodes)
    body: bytes = ElementTree.tostring(element, encoding="utf-8", xml_declaration=True)
    return body


def render_value(root: str, value: str) -> bytes:
    element = ElementTree.Element(root, {"xmlns": NAMESPACE})
    element.text = value or None
    body: bytes = ElementTree.tostring(element, encoding="utf-8", xml_declaration=True)
    return body


def response(
    root: str, nodes: Iterable[Node], status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(render(root, nodes), status, headers, media_type="application/xml")


def timestamp(iso: str) -> str:
    """S3 listings write times as 2026-01-02T03:04:05.000Z."""
    return iso.replace("Z", ".000Z") if iso.endswith("Z") and "." not in iso else iso


def parse(body: bytes) -> ElementTree.Element:
    """A request body's root element (read with `S3Call.read_body`, which caps its size),
    namespace stripped from every tag."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise MalformedXML(str(exc)) from None
    for element in root.iter():
        if "}" in element.tag:
            element.tag = element.tag.split("}", 1)[1]
    return root


def text(element: ElementTree.Element, tag: str, default: str | None = None) -> str | None:
    found = element.find(tag)
    if found is None or found.text is None:
        return default
    return found.text
