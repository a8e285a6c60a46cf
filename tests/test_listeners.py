"""Where `bucketd serve` listens (issue 34 points 2 and 3): port 0 is any free port, for
the API and the S3 endpoint alike, and the ready file names the ports really bound; a port
that cannot be bound stops the start with one line and a non-zero status, the S3 port's
too (default or not), unless S3 is turned off."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support import web
from tests.support.commands import bootstrap_env, serve, serve_command
from tests.support.live import TEST_CONFIG, LiveServer, free_port
from tests.support.rawhttp import read_response, request_head
from tests.tls import make_certificate

pytestmark = pytest.mark.slow  # bucketd processes


@contextmanager
def held_port(port: int | None = None) -> Iterator[int]:
    """A port some other program listens on, for the length of the block."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port if port is not None else free_port()))
        sock.listen()
        yield sock.getsockname()[1]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_port_zero_is_any_free_port_and_the_ready_file_names_it(
    tmp_path: Path, workers: str
) -> None:
    flags = ("--workers", workers)
    with serve(tmp_path, bootstrap_env(), *flags, ports=(0, 0)) as served:
        api, s3 = _port(served.api), _port(served.s3)
        assert api and s3 and api != s3
        assert web.get(served.api + "/healthz").status_code == 200
        anonymous = web.get(served.s3 + "/")  # S3's answer: ListBuckets refused without a key
        assert anonymous.status_code == 403
        assert b"<Error>" in anonymous.content
        banner = served.log.read_text()
        assert f"127.0.0.1:{api}" in banner and f"127.0.0.1:{s3}" in banner
        assert ":0 " not in banner and not banner.rstrip().endswith(":0")


def test_no_s3_serves_the_api_alone(tmp_path: Path) -> None:
    s3_port = free_port()
    with serve(tmp_path, {}, "--no-s3", ports=(0, s3_port)) as served:
        assert served.s3 is None
        assert web.get(served.api + "/healthz").status_code == 200
        with pytest.raises(httpx.ConnectError):
            web.get(f"http://127.0.0.1:{s3_port}/")


def _start_fails(tmp_path: Path, port: int, s3_port: int, *flags: str) -> str:
    (tmp_path / "bucketd.toml").write_text(TEST_CONFIG)
    ready = tmp_path / "ready.json"
    command = serve_command(tmp_path, tmp_path / "bucketd.toml", port, s3_port, *flags)
    result = subprocess.run(
        [*command, "--ready-file", str(ready)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert not ready.exists()
    assert "Traceback" not in result.stderr
    return result.stderr


def test_a_taken_s3_port_stops_the_start(tmp_path: Path) -> None:
    with held_port() as taken:
        said = _start_fails(tmp_path, free_port(), taken)
    lines = [line for line in said.splitlines() if f":{taken}" in line]
    assert len(lines) == 1 and "--s3-port" in lines[0], said
    assert not (tmp_path / "data" / "index.db").exists()  # refused before anything was made


def test_a_taken_api_port_stops_the_start(tmp_path: Path) -> None:
    with held_port() as taken:
        said = _start_fails(tmp_path, taken, free_port())
    assert f":{taken}" in said and "--port" in said


def test_the_default_s3_port_taken_stops_the_start_too(tmp_path: Path) -> None:
    """9000 (MinIO's default too) held by another program: the start fails rather than
    serving without S3 while a ready file would name :9000."""
    (tmp_path / "bucketd.toml").write_text(TEST_CONFIG)
    command = serve_command(tmp_path, tmp_path / "bucketd.toml", free_port(), None)
    try:
        holder = held_port(9000)
        holder.__enter__()
    except OSError:  # something else already listens there: the same situation
        holder = None
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    finally:
        if holder is not None:
            holder.__exit__(None, None, None)
    assert result.returncode == 1, result.stdout + result.stderr
    assert ":9000" in result.stderr and "--no-s3" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_ready_file_is_one_json_line(tmp_path: Path) -> None:
    with serve(tmp_path, {}, ports=(0, 0)) as served:
        ready = json.loads((tmp_path / "ready.json").read_text())
        assert ready == {"api": served.api, "s3": served.s3, "pid": served.pid}


ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def make_run(env: dict[str, str], *variables: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        ["make", "-s", "run", *variables],
        cwd=ROOT,
        env={**os.environ, "BUCKETD_STORAGE__FSYNC": "false", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(20)
        if process.stdout is not None:
            process.stdout.close()


def _healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            if web.get(url + "/healthz").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"make run did not serve {url}")


def test_make_run_takes_ports_and_data_dir_from_its_variables(tmp_path: Path) -> None:
    port, s3_port = free_port(), free_port()
    variables = (f"PORT={port}", f"S3_PORT={s3_port}", f"DATA={tmp_path / 'data'}")
    with make_run({}, *variables) as process:
        _healthy(f"http://127.0.0.1:{port}", process)
        assert web.get(f"http://127.0.0.1:{s3_port}/").status_code == 403  # S3, unsigned
    assert (tmp_path / "data" / "admin.key").exists()


def test_make_run_takes_its_port_from_the_environment(tmp_path: Path) -> None:
    """BUCKETD_PORT and BUCKETD_DATA_DIR are bucketd's to read (a folder name with a space
    and a ';' reaches it whole: make never puts it into the shell line); a PORT that only
    sits in the environment is some other program's."""
    port = free_port()
    data = tmp_path / "my data; touch INJECTED"
    env = {"BUCKETD_PORT": str(port), "BUCKETD_DATA_DIR": str(data), "PORT": "1"}
    with make_run(env, "S3_PORT=0") as process:
        _healthy(f"http://127.0.0.1:{port}", process)
    assert (data / "admin.key").exists()
    assert not (ROOT / "INJECTED").exists() and not (tmp_path / "INJECTED").exists()


@pytest.mark.parametrize(
    ("ports", "said"),
    [
        ("same", "port and s3_port are both"),
        ("70000", "s3_port must be between 0 (any free port) and 65535"),
    ],
)
def test_ports_that_cannot_work_are_refused_in_one_line(
    tmp_path: Path, ports: str, said: str
) -> None:
    port = free_port()
    s3_port = port if ports == "same" else int(ports)
    (tmp_path / "bucketd.toml").write_text(TEST_CONFIG)
    result = subprocess.run(
        serve_command(tmp_path, tmp_path / "bucketd.toml", port, s3_port),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists()


def test_s3_port_zero_says_it_is_a_free_port_now(tmp_path: Path) -> None:
    """s3_port 0 turned S3 off before; it takes a free port now, and the log says so."""
    with serve(tmp_path, {}, ports=(0, 0)) as served:
        assert served.s3 is not None
    assert "--no-s3 or s3_enabled = false turns it off" in served.log.read_text()


def test_a_stop_does_not_wait_for_an_idle_tls_clients_close_notify(tmp_path: Path) -> None:
    """A client that keeps its TLS connection idle in a pool (boto3 does, until it closes the
    response it holds) never answers the server's close_notify: the stop waited for it until
    Uvicorn's graceful limit, 10 s and an error in the log, with nothing in flight
    (gateway/http/protocol.py `TLS_CLOSE_NOTIFY_SECONDS`)."""
    cert, key = make_certificate(tmp_path)
    tls = f's3_tls_cert = "{cert}"\ns3_tls_key = "{key}"\n'
    live = LiveServer(tmp_path / "data", tls + TEST_CONFIG).start()
    context = ssl.create_default_context(cafile=str(cert))
    with (
        socket.create_connection(("127.0.0.1", live.s3_port)) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as client,
    ):
        client.sendall(request_head("GET", "/", {"Host": "127.0.0.1"}))
        assert read_response(client).status == 403  # anonymous: answered, the connection kept
        started = time.monotonic()
        live.stop()
        took = time.monotonic() - started
    assert "graceful shutdown exceeded" not in live.log_path.read_text()
    assert took < 5, f"the stop took {took:.1f} s"


def test_a_stop_answers_a_tls_connection_whose_handshake_ends_just_after_it(
    tmp_path: Path,
) -> None:
    """A TLS connection is Uvicorn's only once its handshake is done: one accepted just
    before the stop, its handshake finishing just after (one round trip from a distant
    client), was in no list the stop looked at and was dropped unanswered, where a plain
    connection gets the first request's grace (`FIRST_REQUEST_GRACE_SECONDS`)."""
    cert, key = make_certificate(tmp_path)
    tls = f's3_tls_cert = "{cert}"\ns3_tls_key = "{key}"\n'
    live = LiveServer(tmp_path / "data", tls + TEST_CONFIG).start()
    assert live.process is not None
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context = ssl.create_default_context(cafile=str(cert))
    tls_state = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with socket.create_connection(("127.0.0.1", live.s3_port), timeout=10) as raw:
        with contextlib.suppress(ssl.SSLWantReadError):
            tls_state.do_handshake()
        raw.sendall(outgoing.read())  # ClientHello
        incoming.write(raw.recv(65536))  # up to the server's Finished: its side waits for ours
        live.process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        tls_state.do_handshake()
        tls_state.write(request_head("GET", "/", {"Host": "127.0.0.1", "Connection": "close"}))
        raw.sendall(outgoing.read())
        answer = b""
        while chunk := raw.recv(65536):
            incoming.write(chunk)
            with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                answer += tls_state.read(65536)
    live.stop()
    assert answer.startswith(b"HTTP/1.1 403"), answer


@pytest.mark.serial  # a stop's time, told from one second more: run alone, not under load
def test_a_failed_tls_handshake_does_not_hold_the_stop(tmp_path: Path) -> None:
    """A stop waits for the TLS handshakes in progress (above), not for one that failed: a
    plain request to the TLS port (a health check, a scanner) leaves a connection that never
    became Uvicorn's, held by its parser in a cycle; the stop waited the whole grace, 1 s,
    for it."""
    cert, key = make_certificate(tmp_path)
    tls = f's3_tls_cert = "{cert}"\ns3_tls_key = "{key}"\n'
    live = LiveServer(tmp_path / "data", tls + TEST_CONFIG).start()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", live.s3_port), timeout=10) as plain:
            plain.sendall(request_head("GET", "/", {"Host": "127.0.0.1"}))
            with contextlib.suppress(OSError):
                plain.recv(100)  # the server gives up on the handshake
    started = time.monotonic()
    live.stop()
    took = time.monotonic() - started
    assert took < 1.0, f"the stop took {took:.1f} s"


class _HeldLoop:
    """A loop whose timers fire when the test says (`time` is where it stands)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append((self.now + delay, callback))

    def fire_at(self, moment: float) -> None:
        (due, callback) = self.timers.pop(0)
        assert moment >= due
        self.now = moment
        callback()


class _ClosingTransport:
    aborted = False

    def is_closing(self) -> bool:
        return True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> None:
        return None

    def abort(self) -> None:
        self.aborted = True


def test_the_tls_close_cut_does_not_trust_a_look_the_loop_held_up() -> None:
    """Over TLS the transport's buffer is the TLS layer's: bytes the TCP transport under it
    still holds are counted nowhere, and the kernel's queue (SIOCOUTQ) stands for them only
    while the loop sends them as the socket takes them. A loop held up (a long callback),
    the client drains the kernel's queue meanwhile, and the next look runs before the loop
    sends the rest (libuv runs timers before it polls): it sees nothing unacknowledged. Two
    such looks 0.5 s apart cut the connection with its last bytes unsent."""
    from gateway.http.protocol import TLS_CLOSE_NOTIFY_SECONDS, EnvelopeProtocol

    loop, transport = _HeldLoop(), _ClosingTransport()
    protocol = EnvelopeProtocol.__new__(EnvelopeProtocol)
    protocol.loop, protocol.transport = loop, transport  # type: ignore[assignment]
    protocol._cut_tls_close()  # the stop's first look, held up itself
    loop.fire_at(TLS_CLOSE_NOTIFY_SECONDS + 0.2)  # the next, 0.6 s late: the loop was held
    assert not transport.aborted
    trusted_from = loop.timers[0][0]  # looks on time from here: the cut comes after 0.5 s
    while not transport.aborted and loop.timers:
        loop.fire_at(loop.timers[0][0])
    assert transport.aborted and loop.now >= trusted_from + TLS_CLOSE_NOTIFY_SECONDS
