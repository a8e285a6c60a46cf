"""Every handler reads a second resource (a copy's source, a version, the ACL, lock, tags or
bypass a request asks for) only through the readers of `touches.py`, and only where its
operation declares it, on both routing tables; the declarations are the ones the docs list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from starlette.requests import Request

from gateway.api import touches as v1_touches
from gateway.api.routes import OPERATIONS as V1_OPERATIONS
from gateway.s3 import touches as s3_touches
from gateway.s3.operations import OPERATIONS as S3_OPERATIONS
from tests.support import web
from tests.support.live import LiveServer
from tests.support.names import bucket_id_named, unique_name
from tests.support.s3 import signed_headers

ROOT = Path(__file__).resolve().parent.parent
S3_NAMES = {name for names in s3_touches.INPUTS.values() for name in names} - {"versionId"}
"""The S3 headers that name a second resource: read in gateway/s3/touches.py only."""
V1_NAMES = {v1_touches.VERSION_ID, v1_touches.BYPASS}
"""The /v1 query parameters that do: read in gateway/api/touches.py only."""
ALLOWED = {
    "gateway/s3/touches.py",
    "gateway/api/touches.py",
    "gateway/s3/sigv2.py",  # signs ?versionId as a subresource: canonical form, not a read
    "gateway/s3/refusals.py",  # names headers to refuse
    "gateway/http/journal.py",  # test mode's journal copies headers as sent: no resource read
}


def _literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_no_handler_reads_a_second_resource_but_through_touches() -> None:
    offenders = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative in ALLOWED:
            continue
        names = S3_NAMES | ({"versionId"} if "/s3/" in relative else V1_NAMES)
        found = _literals(path) & names
        if found:
            offenders.append(f"{relative}: {sorted(found)}")
    assert offenders == []


def test_every_kind_a_declaration_names_is_known_and_decided() -> None:
    for operation in S3_OPERATIONS:
        assert operation.touches <= set(s3_touches.INPUTS), operation.name
    for route in V1_OPERATIONS:
        assert route.touches <= set(v1_touches.ACTIONS), route.operation_id
    assert set(s3_touches.ACTIONS) == set(s3_touches.INPUTS)


def test_reading_an_undeclared_kind_is_refused() -> None:
    route = next(r for r in V1_OPERATIONS if r.operation_id == "listFiles")
    request = Request(
        {
            "type": "http",
            "method": "GET",
            "path": "/",
            "query_string": b"versionId=null",
            "headers": [],
            "state": {"route": route},
        }
    )
    with pytest.raises(v1_touches.Undeclared):
        v1_touches.read(request, "version")
    declared = next(r for r in V1_OPERATIONS if r.operation_id == "downloadFile")
    request.scope["state"]["route"] = declared
    assert v1_touches.read(request, "version") == "null"


EVERY_HEADER = {
    s3_touches.ACL: "public-read",
    s3_touches.MODE: "GOVERNANCE",
    s3_touches.UNTIL: "2099-01-01T00:00:00Z",
    s3_touches.HOLD: "ON",
    s3_touches.BYPASS: "true",
    s3_touches.TAGGING: "a=b",
}
FLAG_VALUES = {"uploadId": "nosuchupload", "partNumber": "1"}


def test_every_s3_operation_takes_every_second_input_without_an_internal_error(
    local_server: LiveServer,
) -> None:
    """Each operation of the dispatch table, sent every second input at once: one its
    declaration does not name would fail as an internal error (`Undeclared`)."""
    access, secret = local_server.s3_credentials(
        None, "buckets:read,buckets:write,files:read,files:write,files:bypass-governance"
    )
    s3 = local_server.s3(access, secret)
    bucket = unique_name("decl")
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    s3.put_object(Bucket=bucket, Key="src", Body=b"s")
    seen = []
    for operation in S3_OPERATIONS:
        if operation.name in ("CreateBucket", "DeleteBucket", "PostObject"):
            continue  # they make or remove the bucket; POST's inputs are form fields
        path = {"service": "/", "bucket": f"/{bucket}", "object": f"/{bucket}/k"}[operation.target]
        params = {flag: FLAG_VALUES.get(flag, "") for flag in operation.flags}
        if operation.target != "service":
            params["versionId"] = "null"
        query = "&".join(f"{k}={v}" if v else k for k, v in sorted(params.items()))
        headers = dict(EVERY_HEADER)
        if operation.copy:
            headers[s3_touches.COPY_SOURCE] = f"/{bucket}/src"
        full = path + ("?" + query if query else "")
        signed = signed_headers(
            local_server, operation.method, full, headers, credentials=(access, secret)
        )
        answer = web.request(operation.method, local_server.s3_url + full, headers=signed)
        seen.append(operation.name)
        assert answer.status_code != 500, (operation.name, answer.text)
    assert len(seen) > 40
    assert "Undeclared" not in local_server.log_path.read_text()


def test_every_v1_route_takes_every_second_input_without_an_internal_error(
    local_server: LiveServer,
) -> None:
    with local_server.client() as http:
        name = unique_name("decl")
        assert http.post("/buckets", json={"name": name, "region": "us-east-1"}).status_code == 201
        bucket_id = bucket_id_named(http, name)
        for route in V1_OPERATIONS:
            if route.method == "DELETE" and route.path in (
                "/buckets/{bucket_id}",
                "/keys/{key_id}",
            ):
                continue
            path = (
                route.path.replace("{bucket_id}", bucket_id)
                .replace("{key}", "k")
                .replace("{version_id}", "null")
                .replace("{key_id}", "key_x")
            )
            if route.operation_id == "streamEvents":
                continue  # a stream that does not end
            answer = http.request(
                route.method,
                path,
                params={"versionId": "null", "bypassGovernance": "true"},
                headers={"Tagging": "a=b", "Content-Type": "text/plain"},
                content=b"{}" if route.body not in (None, "content") else b"x",
            )
            assert answer.status_code != 500, (route.operation_id, answer.text)
    assert "Undeclared" not in local_server.log_path.read_text()


def _s3_actions(operation: object) -> str:
    from gateway.s3.operation import S3Operation
    from storage.rules.access import VERSIONED

    assert isinstance(operation, S3Operation)
    actions = [operation.action]
    if "version" in operation.touches and operation.action in VERSIONED:
        actions.append(VERSIONED[operation.action] + " (with `versionId`)")
    for kind in sorted(operation.touches - {"version"}):
        actions += [a for a in s3_touches.ACTIONS[kind] if a not in actions]
    return ", ".join(
        f"`{a}`" if " " not in a else "`{}` {}".format(*a.split(" ", 1)) for a in actions
    )


def _v1_actions(route: object) -> str:
    from gateway.api.buckets import SETTING_ACTIONS
    from gateway.api.operation import Operation
    from storage.rules.access import VERSIONED

    assert isinstance(route, Operation)
    if route.action is None:
        actions = ["the bucket's organization only"]
        if route.operation_id == "updateBucket":
            actions += [f"`{a}`" for a in SETTING_ACTIONS.values()]
        if route.operation_id == "signFile":
            actions += ["`s3:GetObject` (`s3:PutObject` with `upload`)"]
    else:
        actions = [f"`{route.action}`"]
        if "version" in route.touches and route.action in VERSIONED:
            actions.append(f"`{VERSIONED[route.action]}` (with `versionId`)")
    for kind in sorted(route.touches - {"version"}):
        actions += [f"`{a}`" for a in v1_touches.ACTIONS[kind] if f"`{a}`" not in actions]
    return ", ".join(actions)


def s3_table() -> str:
    rows = {}
    for operation in S3_OPERATIONS:
        rows.setdefault(operation.name, _s3_actions(operation))
    return "\n".join(f"| {name} | {actions} |" for name, actions in rows.items())


def v1_table() -> str:
    return "\n".join(
        f"| `{route.method} /v1{route.path}` | {_v1_actions(route)} |"
        for route in V1_OPERATIONS
        if "{bucket_id}" in route.path
    )


@pytest.mark.parametrize(("doc", "table"), [("s3.md", s3_table), ("api.md", v1_table)])
def test_the_docs_list_the_actions_each_operation_is_decided_as(doc: str, table: object) -> None:
    """The tables in docs/s3.md and docs/api.md are these declarations, row for row
    (`python -m tests.test_access_declarations` writes them there)."""
    assert callable(table)
    assert table() in (ROOT / "docs" / doc).read_text("utf-8")


TABLES = (
    ("s3.md", "| operation | actions |\n|---|---|\n", s3_table),
    ("api.md", "| route | decided as |\n|---|---|\n", v1_table),
)


if __name__ == "__main__":
    for doc, header, render in TABLES:
        path = ROOT / "docs" / doc
        text = path.read_text("utf-8")
        start = text.index(header) + len(header)
        path.write_text(text[:start] + render() + text[text.index("\n\n", start) :], "utf-8")
