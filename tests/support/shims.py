"""`bucketd` and `aws` for shell scripts the tests run (the README's tour), as forks of a
process that has already imported them.

A script's `bucketd ...` line costs 0.37 s of CPU as the installed script, two thirds of it
importing bucketd and its libraries, and an `aws ...` line 0.85 s, most of it importing
awscli: the README tour runs 30 and 6 of them. `launch.py` and `aws_forks.py` fork the
tests' own commands from preloaded servers, but a script runs its commands by path. So the
test gives the script a venv whose `bin/bucketd` and `bin/aws` are shims: a Python started
with `-I -S` (a few milliseconds) that hands its arguments, environment, directory and its
three standard streams themselves (the descriptors, over a Unix socket) to a fork server of
that command, passes on the signals it receives (Ctrl-C) to the fork, and exits with the
fork's status (a signal that reaches the shim twice at once, as `timeout` sends it to the
command and then to its process group, reaches the fork once, as it reaches a process once
whose handler has not yet run). The fork runs what the installed script runs after its
imports, writing straight to the script's pipes, files and terminal.

A command whose environment differs from the server's in something an import may have read
(`takes`) is not forked: the shim execs the real script, as `BUCKETD_TEST_LAUNCH=exec` makes
every shim do. What a fork cannot show (the interpreter's start, the imports) is shown by
the tests that run the real scripts (test_cli.py, test_packaging.py, test_suite.py).

The server is `python -m tests.support.shims SOCKET COMMAND`; it ends when its standard
input closes, that is when the test's `Shims` stops it or its pytest worker is gone.
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import aws_forks, launch

PRELOADS = {"bucketd": launch.PRELOAD, "aws": aws_forks.PRELOAD}

SHELL_KEYS = {"_", "SHLVL", "PWD", "OLDPWD"}
"""What bash sets in every command's environment, read by no import."""

RUN_TIME_KEYS = aws_forks.RUN_TIME_KEYS | {"AWS_ENDPOINT_URL", "BUCKETD_URL", "BUCKETD_KEY"}
"""What a script may export between its commands and still have them forked: read when a
command runs (bucketd's settings and client, botocore's session), by no import."""


SHIM = """#!{python} -IS
import json, os, signal, socket, sys, time
argv = sys.argv[1:]
with socket.socket(socket.AF_UNIX) as conn:
    conn.connect({socket!r})
    socket.send_fds(conn, [b"F"], [0, 1, 2])
    umask = os.umask(0o022)
    os.umask(umask)
    request = {{"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "umask": umask}}
    conn.sendall(json.dumps(request).encode() + b"\\n")
    answers = conn.makefile("rb")
    first = answers.readline().strip()
    if first == b"exec":
        os.execv({real!r}, [{real!r}, *argv])
    pid = int(first)
    sent = {{}}
    def forward(sig, frame):
        if time.monotonic() - sent.get(sig, -1.0) > 0.2:
            os.kill(pid, sig)
            sent[sig] = time.monotonic()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    status = answers.readline()
if status:
    sys.exit(int(status))
if sent:  # the fork died of the signal passed on: so does the shim, as the script would
    last = max(sent, key=sent.get)
    signal.signal(last, signal.SIG_DFL)
    os.kill(os.getpid(), last)
print("shim: the fork of {command} ended without a status", file=sys.stderr)
sys.exit(255)
"""


def _takes(env: dict[str, str], started: dict[str, str]) -> bool:
    """Whether a fork runs the command with `env` as the installed script would."""
    differ = {k for k in env.keys() | started.keys() if env.get(k) != started.get(k)}
    return differ <= RUN_TIME_KEYS | SHELL_KEYS | aws_forks.PER_TEST_KEYS


def _run(command: str, request: dict[str, object]) -> int:
    """In the fork, its streams in place: the installed script's body."""
    if command == "aws":
        aws_forks.as_caller(request)
        return aws_forks.aws_main(request["argv"])
    argv, env, umask = request["argv"], request["env"], request["umask"]
    assert isinstance(argv, list) and isinstance(env, dict) and isinstance(umask, int)
    launch.as_caller(env, str(request["cwd"]), umask)
    sys.argv = [str(Path(sys.executable).parent / "bucketd"), *argv]
    from gateway.cli import main

    return aws_forks.run_script(lambda: main(argv))


def _streams(fds: list[int]) -> None:
    """The caller's three streams as this process's, buffered as Python buffers them at
    start (line by line to a terminal, stderr always)."""
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    sys.stdin = sys.__stdin__ = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = sys.__stdout__ = _text(1, line_buffering=os.isatty(1))
    sys.stderr = sys.__stderr__ = _text(2, errors="backslashreplace", line_buffering=True)


def _text(fd: int, errors: str = "strict", line_buffering: bool = False) -> io.TextIOWrapper:
    binary = open(fd, "wb", closefd=False)  # noqa: SIM115
    return io.TextIOWrapper(binary, errors=errors, line_buffering=line_buffering)


def _fork(command: str, conn: socket.socket, started: dict[str, str]) -> None:
    """In the fork: the request, then the command or a word to exec the real script."""
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)
    request = json.loads(conn.makefile("rb").readline())
    if not _takes(request["env"], started):
        conn.sendall(b"exec\n")
        os._exit(0)
    conn.sendall(f"{os.getpid()}\n".encode())
    _streams(fds)
    aws_forks.exit_fork(_run(command, request), conn)


def serve(path: str, command: str) -> None:
    """Fork a command per connection until standard input closes."""
    started = dict(os.environ)  # before awscli's imports set AWS_DATA_PATH in it
    for module in PRELOADS[command]:
        try:
            importlib.import_module(module)
        except ImportError:
            continue
    gc.freeze()  # a fork's collections leave the imported objects (and their pages) alone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    forks: set[int] = set()
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [], 0.5)
        if sys.stdin in ready:
            _stop(forks)
            return
        aws_forks.reap(forks, block=False)
        if listener in ready:
            conn, _ = listener.accept()
            pid = os.fork()
            if pid == 0:
                try:
                    listener.close()
                    _fork(command, conn, started)
                finally:  # never back into the server's loop
                    traceback.print_exc()
                    os._exit(255)
            forks.add(pid)
            conn.close()


def _stop(forks: set[int]) -> None:
    """The test has ended, and with it the script: a command still running (a server the
    script left, or one a failed test never stopped) gets SIGTERM, then SIGKILL."""
    for pid in forks:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while forks and time.monotonic() < deadline:
        aws_forks.reap(forks, block=False)
        time.sleep(0.05)
    for pid in forks:
        os.kill(pid, signal.SIGKILL)
    aws_forks.reap(forks, block=True)


@contextmanager
def shimmed_venv(folder: Path, env: dict[str, str]) -> Iterator[Path]:
    """A venv at `folder` that is this one but for `bin/bucketd` and `bin/aws`, shims of fork
    servers started with `env` (the environment the script starts with), until the block
    ends."""
    real = Path(sys.executable).parent.parent
    folder.mkdir()
    for entry in real.iterdir():
        if entry.name != "bin":
            (folder / entry.name).symlink_to(entry)
    (folder / "bin").mkdir()
    shimmed = [] if launch.EXEC else list(PRELOADS)
    for entry in (real / "bin").iterdir():
        if entry.name not in shimmed:
            (folder / "bin" / entry.name).symlink_to(entry)
    sockets = Path(tempfile.mkdtemp(prefix="bucketd-shims-"))
    servers: list[subprocess.Popen[bytes]] = []
    try:
        for command in shimmed:
            server = subprocess.Popen(
                [sys.executable, "-m", "tests.support.shims", str(sockets / command), command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=launch.ROOT,
                env=env,
            )
            servers.append(server)
            shim = folder / "bin" / command
            shim.write_text(
                SHIM.format(
                    python=sys.executable,
                    socket=str(sockets / command),
                    real=str(real / "bin" / command),
                    command=command,
                )
            )
            shim.chmod(0o755)
        for server in servers:
            assert server.stdout is not None
            assert server.stdout.readline() == b"ready\n", "a shims' fork server did not start"
        yield folder
    finally:
        for server in servers:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(30)
            assert server.stdout is not None
            server.stdout.close()
        shutil.rmtree(sockets, ignore_errors=True)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
