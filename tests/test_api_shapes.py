"""The API's shapes are declared once: the served routes, the OpenAPI document and the
examples of docs/api.md all agree with them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest
from starlette.routing import Route

from bucketd_client import shapes
from gateway.api.openapi import openapi_document
from gateway.api.operation import Operation
from gateway.api.routes import OPERATIONS
from gateway.app import routes
from gateway.settings import load_settings

DOCS = Path(__file__).parent.parent / "docs" / "api.md"
HEADING = re.compile(r"^### `([A-Z]+) ([^`\[?]+)(\S*)`", re.M)
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
CURL_BODY = re.compile(r"-d '(\{.*?\})'", re.S)


def _normal(path: str) -> str:
    """A path with its parameters unnamed: `/buckets/{}/files/{}`."""
    return re.sub(r"\{[^}]+\}", "{}", path.removeprefix("/v1"))


def _operation(method: str, path: str) -> Operation:
    for operation in OPERATIONS:
        if operation.method == method and _normal(operation.path) == _normal(path):
            return operation
    raise AssertionError(f"docs/api.md shows {method} {path}, which no operation serves")


def test_every_route_is_documented_and_every_operation_routed() -> None:
    document = openapi_document(load_settings(None, {}, {}))
    documented = {
        (method.upper(), _normal(path))
        for path, entry in document["paths"].items()
        for method in entry
        if method != "parameters"
    }
    routed = set()
    for route in routes(test_mode=True):
        if isinstance(route, Route) and route.path.startswith("/v1/"):
            if route.path == "/v1/openapi.json":
                continue
            methods = route.methods or set()
            path = _normal(re.sub(r":\w+}", "}", route.path))
            routed |= {(method, path) for method in methods if method != "HEAD"}
            if "HEAD" in methods and ("HEAD", path) in documented:
                routed.add(("HEAD", path))
    assert routed == documented


def _examples() -> list[tuple[Operation, str, str]]:
    """(operation, heading suffix, block) for every fenced block of docs/api.md under an
    operation's heading."""
    text = DOCS.read_text("utf-8")
    headings = list(HEADING.finditer(text))
    found = []
    for block in BLOCK.finditer(text):
        before = [h for h in headings if h.start() < block.start()]
        if not before:
            continue
        heading = before[-1]
        next_section = text.find("\n## ", heading.end())
        if next_section != -1 and next_section < block.start():
            continue
        operation = _operation(heading.group(1), heading.group(2))
        found.append((operation, heading.group(3), block.group(0)))
    return found


EXAMPLES = _examples()


def test_docs_show_an_example_of_every_operation() -> None:
    shown = {operation.operation_id for operation, _, _ in EXAMPLES}
    assert shown == {operation.operation_id for operation in OPERATIONS}


@pytest.mark.parametrize(
    ("operation", "suffix", "block"),
    EXAMPLES,
    ids=[f"{op.operation_id}-{n}" for n, (op, _, _) in enumerate(EXAMPLES)],
)
def test_every_example_decodes_against_its_shape(
    operation: Operation, suffix: str, block: str
) -> None:
    body = block.split("\n", 1)[1].rsplit("```", 1)[0]
    if block.startswith("```json"):
        answer = json.loads(body)
        assert set(answer) >= {"data", "error", "meta"}
        if answer["error"] is not None:
            msgspec.convert(answer["error"], shapes.Error)
        elif operation.answer == "written":
            msgspec.convert(answer["data"], shapes.Written)
        elif operation.answer == "list":
            assert operation.shape is not None
            msgspec.convert(answer["data"], list[operation.shape])  # type: ignore[name-defined]
            assert answer["meta"]["hasMore"] == (answer["meta"]["nextCursor"] is not None)
        else:
            assert operation.shape is not None
            assert operation.answer != "content" or "metadata=true" in suffix
            msgspec.convert(answer["data"], operation.shape)
    for sent in CURL_BODY.findall(body):
        assert isinstance(operation.body, type), f"{operation.operation_id} takes no JSON body"
        msgspec.json.decode(sent, type=operation.body)
