"""Which addresses a webhook delivery may reach: a literal address in the URL, refused here
before anything is sent (names are checked by the resolver the connection uses,
`posting.py`, by every address they resolve to)."""

from __future__ import annotations

import ipaddress

from storage.errors import InvalidInput
from storage.services.webhooks import address_allowed, url_host


class Refused(OSError):
    """The URL's host is, or resolves to, an address no webhook may reach."""


def check_literal(url: str, allowed: list[str]) -> None:
    """Refused when the URL's host is an address webhooks may not reach (names are checked
    by the resolver, as they are connected to)."""
    try:
        host = url_host(url)
    except InvalidInput as exc:
        raise Refused(exc.message) from None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return
    if host not in allowed and not address_allowed(host, allowed):
        raise Refused(f"{host} is an address webhooks may not reach")
