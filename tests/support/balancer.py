"""HAProxy (Debian's package, installed by `make test`) on loopback: `Haproxy` runs a
configuration of the test's own (tests/test_anonymous_limits.py: the proxy headers);
`Balancer` is HAProxy in front of several gateways, round-robin per request, no
stickiness, the configuration docs/scale-out.md shows, one frontend for the API port and
one for the S3 port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.support.live import LiveServer, free_port

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"

CONFIG = """\
global
    maxconn 2000

defaults
    mode http
    option http-server-close
    option redispatch
    retries 3
    retry-on conn-failure empty-response response-timeout
    timeout connect 2s
    timeout client 5m
    timeout server 5m
    timeout http-request 30s
    default-server inter 500ms fall 1 rise 2

frontend api
    bind 127.0.0.1:{api_port}
    default_backend gateways_api

frontend s3
    bind 127.0.0.1:{s3_port}
    default_backend gateways_s3

backend gateways_api
    balance roundrobin
    option httpchk GET /healthz
{api_servers}

backend gateways_s3
    balance roundrobin
{s3_servers}
"""
"""`option http-server-close` makes each request a connection of its own towards the
gateways, so round-robin moves every request (a client's keep-alive connection does not
pin it to one gateway); `retry-on conn-failure` and `redispatch` send a request that
could not reach a dead gateway to the next one; the health checks (GET /healthz on the
API port, a connection on the S3 port, every 500 ms) take a dead gateway out at its first
failure."""


class Haproxy:
    """HAProxy on `config` (its frontends bound to loopback `ports`), until stop()."""

    def __init__(self, base: Path, config: str, ports: list[int]) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.config_path = base / "haproxy.cfg"
        self.config_path.write_text(config)
        self.log_path = base / "haproxy.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(self.config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while not all(_listening(port) for port in ports):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start: {self.log_path.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self._log.close()


class Balancer(Haproxy):
    def __init__(self, base: Path, gateways: list[LiveServer]) -> None:
        self.api_port, self.s3_port = free_port(), free_port()
        config = CONFIG.format(
            api_port=self.api_port,
            s3_port=self.s3_port,
            api_servers=_servers(gateways, "port"),
            s3_servers=_servers(gateways, "s3_port"),
        )
        super().__init__(base, config, [self.api_port, self.s3_port])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def s3_url(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"


def _servers(gateways: list[LiveServer], port: str) -> str:
    return "\n".join(
        f"    server g{n} 127.0.0.1:{getattr(gateway, port)} check"
        for n, gateway in enumerate(gateways)
    )


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False
