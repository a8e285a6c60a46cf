"""The hostile suite of webhook targets (issue 32 point 5): every way of writing an address
webhooks may not reach that a black-box survey and the SSRF literature use is refused when
the webhook is made, and again as it is delivered to (for a URL stored before a check, and
for names, by the addresses they resolve to: the ones connected to)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from gateway.delivery.posting import CheckedResolver
from gateway.delivery.targets import Refused, check_literal
from storage.errors import InvalidInput
from storage.services.webhooks import check_url
from tests.support.live import LiveServer, new_bucket
from tests.support.names import unique_name

ADDRESS_FORMS = (
    "http://127.0.0.1/",
    "http://127.0.0.1./",
    "http://127.0.0.1:0/",
    "http://0.0.0.0/",
    "http://0/",
    "http://2130706433/",  # 127.0.0.1 as one decimal number
    "http://0x7f000001/",
    "http://017700000001/",
    "http://0177.0.0.1/",
    "http://0x7f.0.0.1/",
    "http://0x7f.1/",
    "http://127.1/",
    "http://127.0.1/",
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://[::]/",
    "http://[::1]/",
    "http://[0::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:a00:1]/",
    "http://[::ffff:0:7f00:1]/",  # SIIT
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[64:ff9b::7f00:1]/",  # NAT64
    "http://[2002:7f00:1::]/",  # 6to4
    "http://[fd00::1]/",
    "http://[fe80::1%25eth0]/",
    "http://user:pw@127.0.0.1/",
    "http://127.0.0.1#@example.com/",
    "http://①②⑦.0.0.1/",
    "http://①⓪.0.0.1:9/hook",
    "http://⑩.0.0.1/hook",
    "http://１２７.０.０.１/",  # noqa: RUF001 (full-width, on purpose)
    "http://１６９.２５４.１６９.２５４/latest",  # noqa: RUF001
    "http://127。0。0。1/",
    "http://192。168。0。1:9/hook",
    "http://[::ffff:①⓪.0.0.1]/x",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://api.localhost/",
)
"""Refused when the webhook is made."""

NAME_FORMS = {
    "localhost.localdomain": "127.0.0.1",
    "ip6-localhost": "::1",
    "rebinding.example": "169.254.169.254",
    "internal.example": "10.1.2.3",
    "mapped.example": "::ffff:127.0.0.1",
}
"""Names taken when the webhook is made (their addresses may change): refused at each
delivery by the addresses they resolve to."""


@pytest.mark.parametrize("url", ADDRESS_FORMS)
def test_an_address_in_any_form_is_refused_when_made_and_when_delivered(url: str) -> None:
    with pytest.raises(InvalidInput):
        check_url(url, [])
    try:
        check_literal(url, [])
    except Refused:
        return
    assert "localhost" in url.lower()  # a name: refused by what it resolves to


class _Resolving:
    def __init__(self, address: str) -> None:
        self.address = address

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[Any]:
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        return [
            {
                "hostname": host,
                "host": self.address,
                "port": port,
                "family": family,
                "proto": 0,
                "flags": 0,
            }
        ]


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "address"), list(NAME_FORMS.items()))
async def test_a_name_is_refused_by_the_address_it_resolves_to(name: str, address: str) -> None:
    check_url(f"http://{name}/hook", [])
    resolver = CheckedResolver([])
    resolver._inner = _Resolving(address)  # type: ignore[assignment]
    with pytest.raises(Refused):
        await resolver.resolve(name, 80)
    resolver._inner = _Resolving("93.184.216.34")  # type: ignore[assignment]
    assert await resolver.resolve(name, 80)


def test_the_server_refuses_every_form(local_server: LiveServer) -> None:
    with local_server.client() as http:
        bucket = new_bucket(http, unique_name("ssrf"))
        for url in ADDRESS_FORMS:
            try:
                check_url(url, ["127.0.0.1"])
                continue  # the shared server allows 127.0.0.1: its tests' receivers
            except InvalidInput:
                pass
            made = http.post(f"/buckets/{bucket['id']}/webhooks", json={"url": url})
            assert made.status_code == 400, (url, made.text)
        assert http.get(f"/buckets/{bucket['id']}/webhooks").json()["data"] == []


def test_the_suite_keeps_every_class_of_form() -> None:
    assert len(ADDRESS_FORMS) + len(NAME_FORMS) >= 35
