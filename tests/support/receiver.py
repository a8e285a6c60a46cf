"""A webhook receiver on loopback for the tests and benchmarks: it keeps every delivery
(headers and JSON body) and answers 200, or what `status` says (503 while "down")."""

from __future__ import annotations

import http.server
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def record(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.body)["Records"][0]
        return found


@dataclass
class Receiver:
    status: int = 200
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = receiver.status
                if status < 300:
                    with receiver.lock:
                        receiver.received.append(
                            Received(dict(self.headers.items()), body, time.time())
                        )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r.record for r in self.received]

    def wait_for(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.records()
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise AssertionError(f"{len(self.records())} deliveries of {count} after {timeout} s")
