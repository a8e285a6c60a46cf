"""The container image built and run with podman, as docs/operations.md says, on a machine
that reaches no image registry: the base image is a Debian root file system made here with
mmdebstrap (Debian's packages, from the mirror apt uses), and pip inside the build installs
from a folder of wheels made beforehand, with no network. Both are cached under the user's
cache dir, keyed by what they are made from, so only a machine's first run pays for them
(tests/test_container.py)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support import web
from tests.support.live import ROOT

CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    / "bucketd-tests"
    / "containers"
)
SUITE = "bookworm"
"""Debian 12: Python 3.11, the version of the Dockerfile's default base (python:3.11-slim)."""
PACKAGES = ("python3", "python3-venv", "passwd")
"""What the Dockerfile needs of a base: python3 with its venv module, and useradd."""
NO_DOCS = tuple(
    f"--dpkgopt=path-exclude=/usr/share/{folder}/*" for folder in ("doc", "man", "info", "locale")
)
RUNC = shutil.which("runc") or "/usr/sbin/runc"


class Podman:
    """podman with this machine's container settings in a containers.conf of the test's:
    the runc runtime (crun, and the file limit podman asks for by default, are refused in
    some sandboxes) and limits within the host's hard ones. Every podman command of the
    test, podman-compose's included, reads it from CONTAINERS_CONF."""

    def __init__(self, folder: Path) -> None:
        nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
        nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 4096)
        conf = folder / "containers.conf"
        conf.write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
            "[engine]\n"
            f'runtime = "{RUNC}"\n'
        )
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}

    def run(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args], capture_output=True, text=True, env=self.env, timeout=timeout
        )
        assert done.returncode == 0 or not check, f"podman {args[0]}: {done.stderr[-3000:]}"
        return done

    def inspect(self, *args: str) -> Any:
        return json.loads(self.run(*args).stdout)[0]


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One maker of the cached base and wheels at a time (pytest runs in several worktrees
    of one machine may start together)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def debian_mirror() -> str:
    """The Debian archive apt uses here (deb822 `URIs:` or a one-line `deb` entry)."""
    sources = Path("/etc/apt")
    for path in [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]:
        if path.suffix not in (".list", ".sources") or not path.is_file():
            continue
        for uri in re.findall(r"(?:^URIs:|^deb(?: \[[^]]*\])?)\s+(\S+)", path.read_text(), re.M):
            if uri.rstrip("/").endswith("/debian"):
                return uri
    return "http://deb.debian.org/debian"


def base_image(podman: Podman) -> str:
    """A Debian image with Python made here: mmdebstrap's root file system as a tar (cached
    under CACHE), `podman import`ed once per machine."""
    mirror = debian_mirror()
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    key = _key(SUITE, PACKAGES, NO_DOCS, mirror, arch)
    tag = f"localhost/bucketd-test-base:{key}"
    with _locked():
        if podman.run("image", "exists", tag, check=False).returncode == 0:
            return tag
        rootfs = CACHE / f"base-{key}.tar"
        if not rootfs.exists():
            partial = CACHE / f"base-{key}.partial.tar"  # mmdebstrap: a tar by its name
            partial.unlink(missing_ok=True)  # what a run stopped half-way left
            made = subprocess.run(
                [
                    "mmdebstrap",
                    "--variant=essential",
                    f"--include={','.join(PACKAGES)}",
                    f"--architectures={arch}",
                    *NO_DOCS,
                    SUITE,
                    str(partial),
                    mirror,
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert made.returncode == 0, made.stderr[-3000:]
            partial.rename(rootfs)
        podman.run("import", "--change", "CMD=/bin/sh", str(rootfs), tag)
    return tag


def build_requirements() -> list[str]:
    """What pip installs in the build: bucketd's dependencies and its build backend."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def wheelhouse(podman: Podman, base: str) -> Path:
    """Wheels of every requirement, resolved by the base's own Python (a dependency's
    markers may name its version: redis wants async-timeout below 3.11.3), fetched once by
    pip in a container on the host's network, with the host's certificate authorities (a
    proxy's included) and proxy variables."""
    requirements = build_requirements()
    folder = CACHE / f"wheels-{_key(base, requirements)}"
    with _locked():
        if folder.exists():
            return folder
        partial = folder.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        (partial / "requirements.txt").write_text("\n".join(requirements) + "\n")
        trust = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
        passed = [
            f"--env={name}"
            for name in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy")
            if name in os.environ
        ]
        if Path(trust).is_file():
            passed += [f"--volume={trust}:/etc/host-ca.crt:ro", "--env=PIP_CERT=/etc/host-ca.crt"]
        podman.run(
            "run",
            "--rm",
            "--network=host",
            f"--volume={partial}:/wheels",
            *passed,
            base,
            "sh",
            "-c",
            "python3 -m venv /tmp/pip && /tmp/pip/bin/pip wheel --quiet "
            "--disable-pip-version-check --wheel-dir /wheels -r /wheels/requirements.txt",
            timeout=600,
        )
        partial.rename(folder)
    return folder


def build_image(podman: Podman, base: str, wheels: Path, iidfile: Path) -> str:
    """The repository's Dockerfile built as the docs say, with the base and wheels made here
    and no network; podman's layer cache makes a build of unchanged sources a matter of
    seconds, and one of changed sources rebuilds only bucketd's own layers."""
    podman.run(
        "build",
        "--format=docker",  # the OCI format has no HEALTHCHECK
        "--network=none",
        f"--build-arg=BASE={base}",
        f"--volume={wheels}:/wheels:ro",
        "--build-arg=PIP_NO_INDEX=1",
        "--build-arg=PIP_FIND_LINKS=/wheels",
        f"--iidfile={iidfile}",
        "--tag=localhost/bucketd-test:latest",
        str(ROOT),
        timeout=900,
    )
    return iidfile.read_text().strip()


def wait_healthy(podman: Podman, container: str, timeout: float = 60) -> None:
    """Waits for /readyz on the published port, then runs the image's HEALTHCHECK, which must
    pass (podman schedules it with systemd timers, which a machine without systemd lacks;
    `healthcheck run` is the same check, and sets the container's health status)."""
    ready = f"http://{published(podman, container, 8080)}/readyz"
    deadline = time.monotonic() + timeout
    checked = time.monotonic()
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if web.get(ready, timeout=2).status_code == 200:
                break
        now = time.monotonic()
        if now - checked > 1:  # a container that exited fails at once, asked once a second
            checked = now
            if not _running(podman, container):
                deadline = now
        if now >= deadline:
            logs = podman.run("logs", container, check=False)
            raise AssertionError(f"{container} is not ready: {logs.stdout}{logs.stderr}")
        time.sleep(0.1)
    podman.run("healthcheck", "run", container)
    health = podman.inspect("container", "inspect", container)["State"]["Health"]
    assert health["Status"] == "healthy", health


def _running(podman: Podman, container: str) -> bool:
    state = podman.run("container", "inspect", "--format={{.State.Running}}", container)
    return state.stdout.strip() == "true"


def published(podman: Podman, container: str, port: int) -> str:
    """The host address a container's port is published on (`127.0.0.1:PORT`)."""
    return podman.run("port", container, f"{port}/tcp").stdout.strip().splitlines()[0]
