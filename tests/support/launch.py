"""`bucketd` processes for the tests, started from a process that has already imported it.

A `python -m gateway serve` spends two thirds of its start-up CPU importing bucketd and its
libraries (0.25 s of 0.39 s here), and the suite starts about 350 servers and 200 CLI
commands: a minute of its two cores. So each pytest worker keeps one multiprocessing
forkserver with those modules imported, and a server or command is a fork of it running
`gateway.cli.main(argv)` with its own environment, working directory, standard streams and
signal dispositions: the same code path as the installed `bucketd` after its imports, a
process of its own that signals, SIGKILL and /proc reach as before.

What a fork cannot show (the interpreter's own start, `python -m gateway`, import-time
behaviour) is shown by the tests that run `sys.executable -m gateway` themselves
(test_cli.py, test_signals_and_logs.py, test_newcomer_errors.py, test_packaging.py), and
`BUCKETD_TEST_LAUNCH=exec` runs every server and command of the suite that way.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any, Protocol

from tests.support import cpustats

ROOT = Path(__file__).resolve().parent.parent.parent
EXEC = os.environ.get("BUCKETD_TEST_LAUNCH", "fork") == "exec" or "PYTEST_VERSION" not in os.environ
"""Outside pytest (the benchmarks start servers too) every process is a real exec."""

PRELOAD = [
    "gateway.cli",
    "gateway.cli.admin",
    "gateway.cli.datadir",
    "gateway.cli.remote",
    "gateway.cli.files",
    "gateway.runtime.serving",
    "gateway.runtime.server",
    "gateway.runtime.workers",
    "gateway.runtime.bootstrap",
    "gateway.app",
    "gateway.s3.app",
    "gateway.delivery.process",
    "storage.engine",
    "storage.index.sqlite",
    "storage.backends.s3.store",
    "storage.backends.s3.parts",
    "storage.backends.s3.snapshots",
    "storage.index.postgres",
    "gateway.http.shared_limit",
    "cryptography.hazmat.primitives.ciphers.aead",
    "_strptime",
    "bucketd_client",
    "bucketd_client.client",
    "bucketd_client.orgs",
    "bucketd_client.snapshots",
    "bucketd_client.webhooks",
    "bucketd.testing",
    "httpx",
    "httpcore",
    "h11",
    "certifi",
    "encodings.idna",
    "tests.support.warm",
]
"""What `serve` and the CLI's commands import (a name that does not import is skipped): a
remote command's synchronous client, httpcore and h11 (httpx imports them for its first
transport) were imported again by each fork, 25-35 ms of a command's 60-90 ms of CPU.
The S3 backend's aiobotocore, botocore and aiohttp too: 0.34 s of the 0.6 s of CPU a
server on the S3 backend took to start, and the suite starts about 80. botocore imports
awscrt, whose native threads a fork would not carry, but importing starts none (the
forkserver uses nothing of it; tests/test_suite.py checks that it holds a single thread);
a fork that signs or sends starts its own, as an exec'd server does. What a server imports
only where it uses it, and the suite's forks use often: asyncpg (a PostgreSQL index), redis
(a shared rate limit), cryptography's AES-GCM (a sealed secret), `_strptime` (a SigV4 date):
25, 49, 9 and 1 ms of CPU in each fork that used them.
`tests.support.warm`, last, fills the caches bucketd keeps per process (the CLI's parser,
the S3 models), as a long-running process has them."""


S3_MODELS = ("service-2", "endpoint-rule-set-1")
S3_DATA = ("partitions", "sdk-default-configuration", "_retry", "endpoints")


def warm_caches() -> None:
    """In the forkserver (`tests/support/warm.py`): fill three caches bucketd keeps per
    process, so that each fork finds them filled as a long-running process would.

    - The CLI's argument parser (`gateway.cli.parser`, built on first use: 12 ms of CPU in
      every server and command forked, about 550 in the suite). Its defaults read nothing
      of the environment, so a fork under another environment parses as it would have.
    - The S3 backend's botocore session (`storage.backends.s3.store._session`) with the S3
      service model and endpoint rules loaded: its first client parsed them, 0.15 s of CPU
      in each server on the S3 backend. Loading data files starts no thread and opens no
      connection; each client is still made by the server, with its credentials.
    - The typed client's TLS context (`bucketd_client.calls.tls_context`: 20 ms of CPU in
      each remote command) for the worker's SSL_CERT_FILE / SSL_CERT_DIR; a fork given
      others builds its own, as the cache is keyed by them.

    A name that is gone (the code moved) leaves a cache cold rather than failing the
    forkserver; `tests/test_suite.py` checks that a fork finds all three filled."""
    from bucketd_client.calls import tls_context
    from gateway.cli import parser

    parser()
    tls_context(os.environ)
    try:
        from storage.backends.s3.store import _session

        _load_s3_models(_session())
    except Exception:  # cold, and test_suite.py says so
        return


def _load_s3_models(session: Any) -> None:
    loader = session.get_component("data_loader")
    for model in S3_MODELS:
        loader.load_service_model("s3", model)
    for name in S3_DATA:
        loader.load_data(name)


def cache_report(path: str) -> None:
    """In a fork: whether `warm_caches` filled the caches before it (the parser, the
    session and the TLS context made, and the CPU seconds loading the S3 data files took:
    none to speak of once loaded), written to `path` as JSON."""
    from bucketd_client import calls
    from gateway.cli import parser
    from storage.backends.s3 import store

    made = {
        "parser": parser.cache_info().currsize,
        "session": store._session.cache_info().currsize,
        "tls": calls._tls_context.cache_info().currsize,
    }
    began = time.process_time()
    _load_s3_models(store._session())
    Path(path).write_text(json.dumps(made | {"loading": time.process_time() - began}))


class Process(Protocol):
    """What the tests use of a `subprocess.Popen`."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class Forked:
    """A process forked from the worker's forkserver, answering as a `subprocess.Popen`."""

    def __init__(self, process: multiprocessing.process.BaseProcess, args: list[str]) -> None:
        self._process = process
        self.args = args
        self.returncode: int | None = None
        assert process.pid is not None
        self.pid = process.pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._process.exitcode
            if self.returncode is not None:
                self._process.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._process.join(timeout)
        code = self.poll()
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        """Signal the child unless it has ended.

        The fork server, not this process, reaps the child, and reports its exit code a
        moment later: in between the pid is gone while `poll()` still says running.
        """
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)


_context: ForkServerContext | None = None


def _forkserver() -> ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        reaper = ["tests.support.reaper"] if cpustats.folder() is not None else []
        _context.set_forkserver_preload(PRELOAD + reaper)
    return _context


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _child(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    umask: int,
    stdin: str,
    stdout: str,
    stderr: str,
) -> None:
    """In the fork: the streams, environment, directory, umask and signals that a process
    started by the caller would have."""
    as_caller(env, cwd, umask)
    os.dup2(os.open(stdin, os.O_RDONLY), 0)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own, as at start)
    out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out if stderr == stdout else os.open(stderr, os.O_WRONLY | os.O_CREAT, 0o644), 2)
    sys.argv = ["bucketd", *argv]
    from gateway.cli import main

    main(argv)


def as_caller(env: dict[str, str], cwd: str, umask: int) -> None:
    """In a fork: the signal dispositions Python starts with, and the caller's environment,
    directory and umask."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start
    os.chdir(cwd)
    os.umask(umask)
    os.environ.clear()
    os.environ.update(env)


def forkable(env: dict[str, str]) -> bool:
    """A fork runs under this interpreter's settings; anything else (or
    `BUCKETD_TEST_LAUNCH=exec`) execs."""
    python = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    ours = {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}
    return not EXEC and python == ours


def _forkable(env: dict[str, str], cwd: Path) -> bool:
    """A fork runs this checkout under this interpreter's settings; anything else execs."""
    return cwd == ROOT and forkable(env)


def start(
    argv: Sequence[str], *, env: dict[str, str], log: Path, cwd: Path = ROOT, stdin: str = ""
) -> Process:
    """`bucketd ARGV` with both its output streams appended to `log`."""
    args = [sys.executable, "-m", "gateway", *argv]
    if not _forkable(env, cwd):
        with open(log, "ab") as out:
            return subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
            )
    process = _forkserver().Process(
        target=_child,
        args=(list(argv), env, str(cwd), _umask(), stdin or os.devnull, str(log), str(log)),
        daemon=True,  # a server a test left running is stopped when its worker exits
    )
    process.start()
    forked = Forked(process, args)
    cpustats.launched(forked.pid)
    return forked


def run(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    cwd: Path = ROOT,
    stdin: str = "",
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`bucketd ARGV` to its end, as `subprocess.run(..., capture_output=True, text=True)`."""
    args = [sys.executable, "-m", "gateway", *argv]
    if not _forkable(env, cwd):
        return subprocess.run(
            args, capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, input=stdin
        )
    with tempfile.TemporaryDirectory(prefix="bucketd-run-") as scratch:
        files = Path(scratch)
        (files / "in").write_text(stdin)
        process = _forkserver().Process(
            target=_child,
            args=(
                list(argv),
                env,
                str(cwd),
                _umask(),
                str(files / "in"),
                str(files / "out"),
                str(files / "err"),
            ),
            daemon=True,
        )
        process.start()
        forked = Forked(process, args)
        cpustats.launched(forked.pid)
        try:
            code = forked.wait(timeout)
        except subprocess.TimeoutExpired:
            forked.kill()
            forked.wait()
            raise
        read = lambda name: (files / name).read_text() if (files / name).exists() else ""  # noqa: E731
        return subprocess.CompletedProcess(args, code, read("out"), read("err"))
