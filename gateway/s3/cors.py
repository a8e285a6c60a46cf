"""S3 CORS configuration: Get/Put/DeleteBucketCors, S3's XML to and from
`storage/cors.CorsRule` (preflights and the headers of actual requests are
`gateway/http/cors.py`'s)."""

from __future__ import annotations

from xml.etree import ElementTree

from starlette.responses import Response

from storage.rules.cors import CorsRule, decode_rules
from storage.rules.validation import whole_number

from . import xml
from .call import S3Call
from .errors import S3Error


def _rule(element: ElementTree.Element) -> CorsRule:
    def every(tag: str) -> list[str]:
        return [(child.text or "").strip() for child in element.findall(tag)]

    max_age = xml.text(element, "MaxAgeSeconds")
    if max_age is not None and whole_number(max_age, strip=True) is None:
        raise S3Error("MalformedXML", "MaxAgeSeconds is a whole number")
    return CorsRule(
        id=xml.text(element, "ID") or "",
        allowed_origins=every("AllowedOrigin"),
        allowed_methods=every("AllowedMethod"),
        allowed_headers=every("AllowedHeader"),
        expose_headers=every("ExposeHeader"),
        max_age_seconds=None if max_age is None else int(max_age),
    )


async def put_cors(call: S3Call) -> Response:
    root = await call.read_xml()
    rules = [_rule(element) for element in root.findall("CORSRule")]
    if not rules:
        raise S3Error("MalformedXML", "CORSConfiguration holds at least one CORSRule")
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"cors": rules})
    return Response(b"", 200)


async def get_cors(call: S3Call) -> Response:
    rules = decode_rules((await call.target_bucket()).cors)
    if not rules:
        raise S3Error("NoSuchCORSConfiguration", "The CORS configuration does not exist", 404)
    body: list[xml.Node] = [
        (
            "CORSRule",
            [
                ("ID", rule.id or None),
                *[("AllowedOrigin", origin) for origin in rule.allowed_origins],
                *[("AllowedMethod", method) for method in rule.allowed_methods],
                *[("AllowedHeader", header) for header in rule.allowed_headers],
                *[("ExposeHeader", header) for header in rule.expose_headers],
                ("MaxAgeSeconds", rule.max_age_seconds),
            ],
        )
        for rule in rules
    ]
    return xml.response("CORSConfiguration", body)


async def delete_cors(call: S3Call) -> Response:
    bucket = await call.target_bucket()
    await call.engine.buckets.update(call.actor, bucket.id, {"cors": None})
    return Response(b"", 204)
