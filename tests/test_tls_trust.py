"""Who the outgoing TLS connections trust: the S3 backend's client to its cluster and the
typed client (bucketd_client) to a bucketd server. Each test holds a real TLS listener on
loopback whose certificate comes from a CA made for the test, and checks whether a
handshake with it completes."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trustme

import bucketd_client
from storage.backends.s3.store import S3Backend
from storage.config import S3Settings
from storage.errors import BackendUnavailable
from storage.faults import Faults


@asynccontextmanager
async def tls_listener(authority: trustme.CA) -> AsyncIterator[tuple[int, list[bool]]]:
    """A loopback listener that notes each completed handshake and then hangs up."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    handshakes: list[bool] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handshakes.append(True)
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    async with server:
        yield server.sockets[0].getsockname()[1], handshakes


async def check_cluster(endpoint: str) -> None:
    settings = S3Settings(
        endpoint_url=endpoint,
        access_key_id="any",
        secret_access_key="any",
        attempts=1,
        connect_timeout_seconds=5.0,
        read_timeout_seconds=5.0,
    )
    with ThreadPoolExecutor(1) as executor:
        backend = await S3Backend.open(settings, executor, Faults())
        try:
            with pytest.raises(BackendUnavailable):
                await backend.check()
        finally:
            await backend.close()


@pytest.mark.anyio
async def test_an_https_cluster_endpoint_with_leading_space_is_still_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore reads " https://host" as https (urlsplit drops leading blanks), so the
    client must verify the cluster's certificate as for "https://host"; with the CA named
    by AWS_CA_BUNDLE, the same endpoint is trusted."""
    authority = trustme.CA()
    async with tls_listener(authority) as (port, handshakes):
        for endpoint in (f" https://127.0.0.1:{port}", f"\x0cHTTPS://127.0.0.1:{port}"):
            await check_cluster(endpoint)
            assert handshakes == [], endpoint
        ca = tmp_path / "ca.pem"
        authority.cert_pem.write_to_path(str(ca))
        monkeypatch.setenv("AWS_CA_BUNDLE", str(ca))
        await check_cluster(f" https://127.0.0.1:{port}")
        assert handshakes


@pytest.mark.anyio
async def test_a_plain_http_cluster_redirecting_to_https_is_verified_there() -> None:
    """aiohttp follows a 307: a plain-HTTP cluster that redirects to an https address sends
    the signed request there, which must be verified as any https endpoint (a client made
    with verify=False for http:// endpoints, to skip reading the CA bundle, did not)."""
    authority = trustme.CA()
    async with tls_listener(authority) as (tls_port, handshakes):

        async def redirect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 307 Temporary Redirect\r\n"
                b"Location: https://127.0.0.1:%d/\r\ncontent-length: 0\r\n\r\n" % tls_port
            )
            await writer.drain()
            writer.close()

        plain = await asyncio.start_server(redirect, "127.0.0.1", 0)
        async with plain:
            await check_cluster(f"http://127.0.0.1:{plain.sockets[0].getsockname()[1]}")
        assert handshakes == []


@pytest.mark.anyio
async def test_the_typed_client_reads_a_replaced_ca_bundle_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The typed clients share one TLS context per trust setting; a bundle that SSL_CERT_FILE
    names and that is replaced (rotation, or a CA withdrawn) must govern the next client made,
    as it would with httpx's own context, not the first version read by the process."""
    old, new = trustme.CA(), trustme.CA()
    bundle = tmp_path / "ca.pem"
    old.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))

    def call(url: str) -> None:
        with (
            bucketd_client.Client(url, "bk_any", retry=None) as client,
            pytest.raises(bucketd_client.ConnectionFailed),  # the listener hangs up
        ):
            client.list_buckets()

    async with tls_listener(old) as (port, handshakes):
        await asyncio.to_thread(call, f"https://127.0.0.1:{port}")
        assert len(handshakes) == 1
        staged = tmp_path / "ca.pem.new"
        new.cert_pem.write_to_path(str(staged))
        staged.replace(bundle)
        await asyncio.to_thread(call, f"https://127.0.0.1:{port}")
        assert len(handshakes) == 1
