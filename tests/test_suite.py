"""The suite's own machinery: a test that hangs is stopped by pytest-timeout and named; the
aws CLI's forks answer as the real script."""

from __future__ import annotations

import ast
import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import cpustats, launch
from tests.support.aws_forks import AwsForks
from tests.support.live import LiveServer, free_port, new_bucket
from tests.support.names import unique_name
from tests.support.shims import _takes, shimmed_venv


def test_a_hanging_test_is_stopped_and_named(tmp_path: Path) -> None:
    hanging = tmp_path / "test_hangs.py"
    hanging.write_text("import time\n\n\ndef test_waits_for_ever():\n    time.sleep(600)\n")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(hanging), "-p", "no:cacheprovider", "-o", "timeout=2"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert time.monotonic() - started < 60
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Timeout" in output and "test_waits_for_ever" in output


def test_earlier_runs_folders_are_deleted_while_the_run_runs(tmp_path: Path) -> None:
    """tests/support/tempdirs.py: pytest deletes the folders of the runs before the last
    three when a session ends; the suite deletes them from its start, so a test of the run
    sees the oldest go, and pytest's rule of three is kept."""
    temproot = tmp_path / "temproot"
    runs = temproot / f"pytest-of-{getpass.getuser()}"
    for n in range(5):
        (runs / f"pytest-{n}" / "data").mkdir(parents=True)
    (tmp_path / "test_sees.py").write_text(
        "import time\n\n\n"
        "def test_the_oldest_goes(tmp_path):\n"
        "    oldest = tmp_path.parent.parent / 'pytest-0'\n"
        "    deadline = time.monotonic() + 20\n"
        "    while oldest.exists() and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "    assert not oldest.exists()\n"
    )
    plugins = ["-p", "no:cacheprovider", "-p", "tests.conftest"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "test_sees.py", *plugins],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTEST_DEBUG_TEMPROOT": str(temproot), "PYTHONPATH": str(launch.ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(path.name for path in runs.glob("pytest-[0-9]*")) == [
        "pytest-3",
        "pytest-4",
        "pytest-5",
    ]


@pytest.fixture(scope="module")
def forks() -> AwsForks:
    """A fork server of this module's own (stopped at the worker's exit)."""
    return AwsForks()


def _aws_env(**more: str) -> dict[str, str]:
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        **more,
    }


def test_a_forked_aws_command_answers_as_the_installed_script(forks: AwsForks) -> None:
    """tests/support/aws_forks.py: what the aws tests see of a fork (exit status, both
    streams) is what the real script gives, for a usage error and a request that fails."""
    env = _aws_env(AWS_MAX_ATTEMPTS="1")
    closed = f"http://127.0.0.1:{free_port()}"
    commands = [
        ["s3api", "put-object", "--no-such-option"],
        ["--endpoint-url", closed, "s3", "ls", "s3://b"],
    ]
    assert forks.takes(env)
    for argv in commands:
        forked = forks.run(argv, env, timeout=60)
        real = subprocess.run(
            [str(Path(sys.executable).parent / "aws"), *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert forked.returncode == real.returncode != 0
        assert (forked.stdout, forked.stderr) == (real.stdout, real.stderr)
    assert not forks.takes({**env, "AWS_DATA_PATH": "/elsewhere"})


def test_the_aws_forks_serve_the_tests_after_the_first(
    forks: AwsForks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server starts with the environment of the test that first runs aws; pytest
    changes PYTEST_CURRENT_TEST for every test after it, which must not send their
    commands to the real script (three times a fork's CPU)."""
    assert forks.run(["--version"], _aws_env(), timeout=60).returncode == 0
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_later.py::test_later (call)")
    assert forks.takes(_aws_env())
    monkeypatch.setenv("AWS_CA_BUNDLE_UNKNOWN_TO_US", "x")
    assert not forks.takes(_aws_env())


def test_a_forked_aws_command_that_overruns_is_killed(forks: AwsForks) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            forks.run(["--endpoint-url", endpoint, "s3", "ls"], _aws_env(), timeout=2)
    assert time.monotonic() - started < 30


def test_a_shimmed_command_answers_as_the_installed_script(tmp_path: Path) -> None:
    """tests/support/shims.py: a script's `bucketd` and `aws` through the shims give the
    exit status and both streams the real scripts give (through a pipe too), and stop on
    Ctrl-C (the tour reads their standard input); an environment an import may have read
    goes to the real script."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "BUCKETD_"))}
    env |= {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    env |= {"BUCKETD_DATA_DIR": str(tmp_path / "data"), "BUCKETD_PORT": "0"}
    env |= {"BUCKETD_S3_PORT": "0"}
    real = Path(sys.executable).parent
    commands = [
        "$BIN/bucketd --version",
        "$BIN/bucketd buckets create",  # a usage error: 2
        "$BIN/bucketd --help | head -3",  # stdout a pipe its reader leaves
        "$BIN/aws s3api put-object --no-such-option",
    ]
    with shimmed_venv(tmp_path / "venv", env) as venv:
        assert (venv / "bin" / "bucketd").read_text().startswith("#!")
        for command in commands:
            shimmed, installed = (
                subprocess.run(
                    ["bash", "-c", command],
                    env={**env, "BIN": str(bin)},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                for bin in (venv / "bin", real)
            )
            assert (shimmed.returncode, shimmed.stdout, shimmed.stderr) == (
                installed.returncode,
                installed.stdout,
                installed.stderr,
            ), command
        # The fork stops when the shim is interrupted (unless it did, the shim would wait).
        dev = ["timeout", "-s", "INT", "--preserve-status", "2", f"{venv}/bin/bucketd", "dev"]
        stopped = subprocess.run(dev, env=env, capture_output=True, text=True, timeout=60)
        assert stopped.returncode in (0, 130), stopped.stderr
        # A command that dies of SIGTERM (waiting on a server that never answers) dies of
        # it through the shim too.
        with socket.create_server(("127.0.0.1", 0)) as silent:
            url = f"http://127.0.0.1:{silent.getsockname()[1]}"
            statuses = [
                subprocess.run(
                    ["timeout", "--preserve-status", "1", f"{bin}/bucketd", "buckets", "list"],
                    env={**env, "BUCKETD_URL": url, "BUCKETD_KEY": "k"},
                    capture_output=True,
                    timeout=60,
                ).returncode
                for bin in (venv / "bin", real)
            ]
        assert statuses == [128 + signal.SIGTERM] * 2
    started = {"HOME": "/h"}
    assert _takes({"HOME": "/h", "BUCKETD_KEY": "k", "PWD": "/x", "AWS_ENDPOINT_URL": "u"}, started)
    assert not _takes({"HOME": "/h", "PYTHONHASHSEED": "1"}, started)
    assert not _takes({"HOME": "/h", "AWS_DATA_PATH": "/elsewhere"}, started)


REAPING = """
import os, sys, time
import tests.support.reaper  # noqa: F401 (os.waitpid becomes os.wait4, as in the forkserver)
pid = os.fork()
if pid == 0:
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    os._exit(0)
assert os.waitpid(pid, 0)[0] == pid
print(pid)
"""


def test_the_cpu_table_charges_each_fork_to_the_modules_it_served(tmp_path: Path) -> None:
    """`BUCKETD_TEST_CPU`: a process that imported tests/support/reaper.py (the forkserver
    does) writes the CPU of each child it reaps, and the table charges a fork's CPU to the
    modules whose tests it served, the rest to the module that launched it."""
    env = {**os.environ, "BUCKETD_TEST_CPU": str(tmp_path), "PYTEST_XDIST_WORKER": "gw9"}
    ran = subprocess.run(
        [sys.executable, "-c", REAPING],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    pid = ran.stdout.strip()
    (reap,) = (tmp_path / "gw9.tsv").read_text().splitlines()
    kind, reaped, user, system = reap.split("\t")
    assert (kind, reaped) == ("reap", pid)
    assert 0.15 <= float(user) + float(system) < 5  # the child's CPU, not the parent's
    with open(tmp_path / "gw9.tsv", "a") as log:
        log.write(f"launch\t{pid}\ttests/test_a.py\nserve\t{pid}\ttests/test_b.py\t0.100\n")
        log.write("test\ttests/test_b.py\t0.500\t0.250\n")
    rows = {row[0]: row[1:] for row in cpustats.table(tmp_path)}
    spent = float(user) + float(system)
    assert rows["tests/test_b.py"] == (0.5, 0.25, 0.1, 0)
    assert rows["tests/test_a.py"][2] == pytest.approx(spent - 0.1)
    assert rows["tests/test_a.py"][3] == 1


def test_the_forkserver_holds_the_s3_libraries_and_no_thread_of_theirs(
    s3_server: LiveServer,
) -> None:
    """Servers on the S3 backend are forks that find aiobotocore, botocore and awscrt's
    native library already loaded (tests/support/launch.py PRELOAD), and the forkserver they
    came from runs one thread: a thread awscrt had started there would be missing in every
    fork, which would fail once it signed or sent (the shared S3 server serving answers
    that it does not)."""
    if launch.EXEC:
        pytest.skip("BUCKETD_TEST_LAUNCH=exec: no forkserver")
    assert s3_server.process is not None
    stat = Path(f"/proc/{s3_server.process.pid}/stat").read_text()
    forkserver = int(stat.rsplit(")", 1)[1].split()[1])
    status = Path(f"/proc/{forkserver}/status").read_text()
    assert "\nThreads:\t1\n" in status, status
    maps = Path(f"/proc/{forkserver}/maps").read_text()
    assert "_awscrt" in maps and "aiohttp" in maps
    with s3_server.client() as http:  # the fork signs and sends to SeaweedFS
        bucket = new_bucket(http, unique_name("preloaded"))
        put = http.put(
            f"/buckets/{bucket['id']}/files/k",
            content=b"signed and sent",
            headers={"Content-Type": "text/plain"},
        )
        assert put.status_code in (200, 201), put.text
        assert http.get(f"/buckets/{bucket['id']}/files/k").content == b"signed and sent"


def test_a_fork_finds_the_parser_and_the_s3_models_made(tmp_path: Path) -> None:
    """`launch.warm_caches` filled bucketd's per-process caches in the forkserver: a fork
    finds the CLI's parser, the S3 session and the typed client's TLS context made, and
    loading the S3 models again costs it nothing to speak of (parsing them took 0.15 s)."""
    if launch.EXEC:
        pytest.skip("BUCKETD_TEST_LAUNCH=exec: no forkserver")
    report = tmp_path / "warm.json"
    process = launch._forkserver().Process(target=launch.cache_report, args=(str(report),))
    process.start()
    process.join(60)
    assert process.exitcode == 0
    found = json.loads(report.read_text())
    assert found["parser"] == 1 and found["session"] == 1 and found["tls"] == 1, found
    assert found["loading"] < 0.02, found


HTTPX_MAKERS = {
    *("Client", "AsyncClient", "request", "stream"),
    *("get", "head", "options", "post", "put", "patch", "delete"),
}
"""httpx's names that make a client (its module-level calls make one per call)."""


def _httpx_makers_in(source: str) -> list[tuple[int, str]]:
    """(line, name) of each httpx client maker `source` reaches other than in an annotation:
    called (`httpx.get(...)`), passed or subclassed (`factory=httpx.Client`), through an alias
    (`import httpx as h`) or imported by name (`from httpx import Client`)."""
    tree = ast.parse(source)
    modules = {"httpx"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "httpx" and a.asname}
    annotations = set()
    for node in ast.walk(tree):
        parts: list[ast.AST | None] = []
        if isinstance(node, ast.arg):
            parts.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            parts.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            parts.append(node.annotation)
        annotations |= {id(n) for part in parts if part is not None for n in ast.walk(part)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "httpx":
            found += [(node.lineno, a.name) for a in node.names if a.name in HTTPX_MAKERS]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr in HTTPX_MAKERS
            and id(node) not in annotations
        ):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def test_the_check_sees_the_other_ways_to_make_an_httpx_client() -> None:
    source = (
        "import httpx\nimport httpx as h\nfrom httpx import Client as C\n"
        "from httpx import AsyncClient\n"
        "def f(http: httpx.Client) -> httpx.AsyncClient:\n"
        "    x: httpx.Client = make(factory=httpx.Client)\n"
        "    return h.get('u')\n"
        "class Mine(httpx.Client): pass\n"
    )
    assert sorted(_httpx_makers_in(source)) == [
        (3, "Client"),
        (4, "AsyncClient"),
        (6, "httpx.Client"),
        (7, "h.get"),
        (8, "httpx.Client"),
    ]


def test_the_tests_make_their_http_clients_with_one_tls_context() -> None:
    """Each `httpx.Client()` or `httpx.get()` builds an SSL context from certifi's bundle
    (23 ms of CPU); tests/support/web.py makes the same calls on one context per process."""
    root = Path(__file__).resolve().parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "support" / "web.py":
            continue
        for line, name in _httpx_makers_in(path.read_text("utf-8")):
            found.append(f"{path.relative_to(root)}:{line}: {name}")
    assert found == []
