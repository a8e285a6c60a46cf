"""The aws CLI for the tests, run as forks of one process that has already imported it.

An `aws` command spends most of its CPU before it sends anything: the interpreter's start
and the imports of awscli, botocore and the customizations awscli registers (0.6 s of the
0.85 s a command of the suite costs here), and the suite runs it about 55 times. So each
pytest worker keeps one server process (`python -m tests.support.aws_forks SOCKET`) with
those modules imported, and a command is a fork of it that takes the caller's arguments,
environment, working directory and standard streams, then runs `awscli.clidriver.main()`
as the installed `aws` script does after its imports: a process of its own, whose exit
status is the command's.

This is the pattern of `tests/support/launch.py` (bucketd's own processes), with a server
of its own: awscli imports botocore and awscrt, which bucketd's forkserver must not hold
(a server on the S3 backend loads them after its fork). `BUCKETD_TEST_LAUNCH=exec` runs
the real `aws` script instead, as it does every bucketd process.

The request is one JSON line on a Unix socket; the fork answers its pid, then, when the
command has ended, its exit status; the socket closes when the fork exits. The server ends
when its standard input closes, that is when the pytest worker that started it is gone.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

PRELOAD = [
    "awscli.clidriver",
    "awscli.handlers",
    "awscli.customizations.s3.subcommands",
    "s3transfer.manager",
    "botocore.httpsession",
]
"""What `aws s3 cp` and `aws s3api ...` import before their first request; importing does not
start awscrt's native threads (nothing the fork would lose), using it would."""

IMPORT_TIME_KEYS = {"AWS_DATA_PATH"}
"""What awscli's imports read from the environment and set in it (`awscli/__init__.py` puts
its data folder on AWS_DATA_PATH): a command may not change them, and its fork gets the
server's values."""

RUN_TIME_KEYS = {
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
    "AWS_CA_BUNDLE",
}
"""What a command may set differently from the environment the server started with: read
when `main()` makes its session, after the fork. A command whose environment differs in
anything else (but `PER_TEST_KEYS`) is not forked (an import may have read it) but run as
the real script."""

PER_TEST_KEYS = {"PYTEST_CURRENT_TEST"}
"""What pytest changes in the worker's environment at every phase of every test, read by
no import of awscli: a fork gets the caller's value, as every other variable."""


def _run_command(request: dict[str, object]) -> int:
    """In the fork: the streams, environment, directory and signals of a process started by
    the caller, then the `aws` script's body."""
    as_caller(request)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(str(request["stdout"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 1)
    os.dup2(os.open(str(request["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
    return aws_main(request["argv"])


def as_caller(request: dict[str, object]) -> None:
    """In a fork: the signal dispositions Python starts with, and the caller's directory and
    environment (but `IMPORT_TIME_KEYS`, which keep the server's values)."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start
    env = request["env"]
    assert isinstance(env, dict)
    os.chdir(str(request["cwd"]))
    imported = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    for key in IMPORT_TIME_KEYS:  # what awscli's imports made of the environment
        if key in imported:
            os.environ[key] = imported[key]


def aws_main(argv: object) -> int:
    """The `aws` script's body on `argv`, in a fork whose streams are in place; its exit
    status."""
    assert isinstance(argv, list)
    sys.argv = [str(Path(sys.executable).parent / "aws"), *map(str, argv)]
    if os.environ.get("LC_CTYPE", "") == "UTF-8":  # the script's own first lines
        os.environ["LC_CTYPE"] = "en_US.UTF-8"
    import awscli.clidriver

    return run_script(awscli.clidriver.main)


def run_script(main: Callable[[], object]) -> int:
    """`sys.exit(main())` as a console script runs it: the exit status the interpreter would
    give (an uncaught exception reported on stderr)."""
    try:
        code: object = main()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # the interpreter ends by SIGINT: a shell sees 130
        traceback.print_exc()
        return 128 + signal.SIGINT
    except BaseException:  # as the interpreter reports an uncaught exception
        traceback.print_exc()
        return 1
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as the interpreter reports it
    return 1


def serve(path: str) -> None:
    """Fork a command per connection until standard input closes."""
    for module in PRELOAD:
        __import__(module)
    sys.path[0] = str(Path(sys.executable).parent)  # where the `aws` script runs from
    gc.freeze()  # a fork's collections leave the imported objects (and their pages) alone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    forks: set[int] = set()
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [], 1.0)
        reap(forks, block=sys.stdin in ready)
        if sys.stdin in ready:
            return
        if listener in ready:
            conn, _ = listener.accept()
            pid = os.fork()
            if pid == 0:
                listener.close()
                request = json.loads(conn.makefile("rb").readline())
                conn.sendall(f"{os.getpid()}\n".encode())
                exit_fork(_run_command(request), conn)
            forks.add(pid)
            conn.close()


def exit_fork(status: int, conn: socket.socket) -> None:
    """End the fork as the interpreter ends a script (non-daemon threads joined, atexit
    handlers run, streams flushed; then the status to the caller) but for the garbage
    collection of every module the server imported, a tenth of a second for nothing."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    status &= 0xFF  # what a process's exit status keeps of sys.exit(n)
    conn.sendall(f"{status}\n".encode())
    os._exit(status)


def reap(forks: set[int], block: bool) -> None:
    """Wait for the forks that have ended (all of them when `block`): a fork reaped by a
    wait counts in this process's children's CPU time, and so in the worker's."""
    for pid in list(forks):
        if os.waitpid(pid, 0 if block else os.WNOHANG)[0] == pid:
            forks.discard(pid)


class AwsForks:
    """The worker's side: one server, started at the first command, stopped at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[bytes] | None = None
        self._environment: dict[str, str] | None = None
        self._dir = Path()

    def _start(self) -> None:
        with self._lock:
            if self._server is not None:
                return
            root = Path(__file__).resolve().parent.parent.parent
            environment = dict(os.environ)
            self._dir = Path(tempfile.mkdtemp(prefix="bucketd-aws-"))
            server = subprocess.Popen(
                [sys.executable, "-m", "tests.support.aws_forks", str(self._dir / "socket")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=root,
                env=environment,
            )
            assert server.stdout is not None
            assert server.stdout.readline() == b"ready\n", "the aws fork server did not start"
            atexit.register(self._stop)
            self._server, self._environment = server, environment

    def _stop(self) -> None:
        if self._server is not None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            self._server.wait(10)
            self._server = None
            shutil.rmtree(self._dir, ignore_errors=True)

    def takes(self, env: dict[str, str]) -> bool:
        """Whether a fork runs a command with `env` as the script would: the server, started
        with this worker's environment, imported awscli under the same settings."""
        started = self._environment or os.environ
        differ = {k for k in env.keys() | started.keys() if env.get(k) != started.get(k)}
        return differ <= RUN_TIME_KEYS | PER_TEST_KEYS

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """`aws ARGV` with `env` to its end, as `subprocess.run(..., capture_output=True,
        text=True, timeout=timeout)` would run it (`env`: one it `takes`)."""
        self._start()
        args = [str(Path(sys.executable).parent / "aws"), *argv]
        with tempfile.TemporaryDirectory(dir=self._dir) as scratch:
            out, err = Path(scratch) / "out", Path(scratch) / "err"
            request = {"argv": argv, "env": env, "cwd": os.getcwd(), "stdout": str(out)}
            request["stderr"] = str(err)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(self._dir / "socket"))
                conn.sendall(json.dumps(request).encode() + b"\n")
                conn.settimeout(timeout)
                with conn.makefile("rb") as answers:
                    pid = int(answers.readline())
                    try:
                        status = answers.readline()
                        answers.read()  # to the end: the fork has exited
                    except TimeoutError:
                        os.kill(pid, signal.SIGKILL)
                        raise subprocess.TimeoutExpired(args, timeout) from None
            if not status:  # killed before it could answer
                status = b"-9"
            return subprocess.CompletedProcess(args, int(status), out.read_text(), err.read_text())


if __name__ == "__main__":
    serve(sys.argv[1])
