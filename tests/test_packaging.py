"""What the distribution promises its installers (issue 34 points 1 and 8): every install
line of the README's CI section, run as written in a new environment of its own from a
folder holding a checkout in `./bucketd`; the `testing` extra, whose boto3 is resolved with
bucketd's own aiobotocore (boto3 installed on its own afterwards may pull a botocore
aiobotocore refuses), running the README's pytest example; `make dist`'s archives.

Cost: the checkout is copied, committed and built (`make dist`) once for the module. The
`pip` lines install bucketd alone (`PIP_NO_DEPS`, no build isolation) into a `uv venv` that
sees this venv's packages through a .pth file: what they prove is the build and the install
from that source, the entry point and the package data; the dependencies are resolved for
real by the `uvx` and `pipx` lines, through uv and its cache (seconds once it is warm)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import boto3
import httpx
import pytest
from botocore.config import Config
from packaging.requirements import Requirement

from tests.support import web
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## In CI and in your tests"
BIN = Path(sys.executable).parent
"""This venv's uv, uvx, pipx and python."""
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
INSTALLERS = ("pip install ", "pipx install ", "uvx ")
REGISTRY_INSTALL = re.compile(
    r"\b(?:pip install|pipx install|pipx run|uvx|uv tool install|uv pip install)"
    r"(?:\s+-\S+)*\s+['\"]?bucketd(?![\w/.-])"
)
"""bucketd named as a registry's package (`pip install bucketd`, `uvx bucketd dev`)."""


def ci_blocks(language: str) -> list[str]:
    """The README's code blocks of `language` in the CI section, in order."""
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + 1)]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def install_lines() -> list[str]:
    """Every line of the section's shell blocks that installs or runs bucketd."""
    return [
        line
        for block in ci_blocks("sh")
        for line in block.splitlines()
        if line.startswith(INSTALLERS)
    ]


def command(line: str) -> str:
    """A line without its comment: the test's id."""
    return line.split("#")[0].strip()


def _botocore_range(distribution: str) -> Requirement:
    found = [Requirement(r) for r in metadata.requires(distribution) or []]
    (botocore,) = [r for r in found if r.name == "botocore" and r.marker is None]
    return botocore


def test_the_testing_extra_brings_pytest_and_a_boto3_that_fits_aiobotocore() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    testing = {Requirement(r).name for r in project["optional-dependencies"]["testing"]}
    assert {"pytest", "boto3"} <= testing
    installed = metadata.version("botocore")
    assert _botocore_range("boto3").specifier.contains(installed)
    assert _botocore_range("aiobotocore").specifier.contains(installed)


def test_the_fixtures_are_a_pytest_plugin_of_the_distribution() -> None:
    plugins = {e.name: e.value for e in metadata.entry_points(group="pytest11")}
    assert plugins.get("bucketd") == "bucketd.testing"


def test_no_document_installs_bucketd_from_a_registry() -> None:
    """bucketd is on no registry: no command the docs give fetches it from one (a package
    of that name there would be someone else's)."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(), re.S):
            found = REGISTRY_INSTALL.search(block)
            assert found is None, f"{page.name}: {found and found.group(0)}"
    assert REGISTRY_INSTALL.search("uvx bucketd dev")  # the check can fail
    assert REGISTRY_INSTALL.search("pip install -q 'bucketd[testing]'")
    assert not REGISTRY_INSTALL.search("uvx --from ./bucketd bucketd dev")
    kinds = {line.split()[0] for line in install_lines()}
    assert kinds == {"pip", "pipx", "uvx"}, install_lines()


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `bucketd/`: a copy of this checkout's sources, committed to a git
    repository of its own (what `git+$REPO` clones) and with `make dist` run in it."""
    place = tmp_path_factory.mktemp("place")
    checkout = place / "bucketd"
    checkout.mkdir()
    for part in ("pyproject.toml", "README.md", "LICENSE", "Makefile"):
        shutil.copy(ROOT / part, checkout / part)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*cache")
    for package in ("gateway", "storage", "bucketd_client", "bucketd"):
        shutil.copytree(ROOT / package, checkout / package, ignore=ignore)
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", "c"]):
        subprocess.run([*git, *command], check=True, capture_output=True, timeout=60)
    # -o: this venv, symlinked as the checkout's, has build and setuptools already
    (checkout / ".venv").symlink_to(BIN.parent)
    built = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed-dist", "dist"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (checkout / ".venv").unlink()
    assert built.returncode == 0, built.stdout + built.stderr
    assert "deprecat" not in (built.stderr + built.stdout).lower()  # the SPDX license, for one
    return place


def test_make_dist_writes_a_wheel_and_an_sdist_that_hold_everything(place: Path) -> None:
    """Both archives carry the migrations, the console and the dev config, and the sdist
    the sources a wheel is built from."""
    dist = place / "bucketd" / "dist"
    (wheel,) = dist.glob("bucketd-*-py3-none-any.whl")
    (sdist,) = dist.glob("bucketd-*.tar.gz")
    packaged = ("storage/migrations/sqlite/0001", "gateway/console/index.html", "gateway/dev.toml")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    for part in packaged:
        assert any(name.startswith(part) for name in names), part
    assert any(n.endswith("entry_points.txt") for n in names)
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    for part in (*packaged, "pyproject.toml", "bucketd/testing.py"):
        assert any(part in member for member in members), part


def _environment(tmp_path: Path, place: Path) -> dict[str, str]:
    """The line's environment: this one's, but no venv active; a `uv venv` whose `pip` the
    `pip` lines use, pipx's home and bin folder, `REPO` the checkout's repository."""
    fresh = tmp_path / "venv"
    subprocess.run(
        [str(BIN / "uv"), "venv", "-q", "--seed", "--python", sys.executable, str(fresh)],
        check=True,
        timeout=120,
    )
    (site,) = fresh.glob("lib/python3*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYTHONPATH") and not key.startswith(("PYTEST_", "BUCKETD_"))
    }
    path = [fresh / "bin", tmp_path / "pipx" / "bin", BIN, env["PATH"]]
    return env | {
        "PATH": os.pathsep.join(map(str, path)),
        "REPO": f"file://{place / 'bucketd'}",
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "pipx" / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "pipx" / "man"),
        "PIP_NO_DEPS": "1",  # the dependencies are this venv's (dependencies.pth)
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling: "0" turns the isolation off
        "BUCKETD_STORAGE__FSYNC": "false",
    }


WHICH_CODE = """
bucketd --version
set -- $(head -1 "$(command -v bucketd)" | cut -c3-)  # its shebang: python [-E]
"$1" -c 'import gateway, storage; print(gateway.__file__); print(storage.__file__)'
"""
"""Which bucketd the line put on PATH, and where the Python behind it finds the code."""


@pytest.mark.slow  # builds and installs
@pytest.mark.parametrize(
    "line", [line for line in install_lines() if not line.startswith("uvx")], ids=command
)
def test_an_install_line_gives_a_working_bucketd(place: Path, tmp_path: Path, line: str) -> None:
    env = _environment(tmp_path, place)
    ran = subprocess.run(
        ["bash", "-e", "-c", line + "\n" + WHICH_CODE],
        cwd=place,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    version, *code = ran.stdout.splitlines()[-3:]
    assert version == f"bucketd {VERSION}"
    installed_into = tmp_path / ("pipx" if line.startswith("pipx") else "venv")
    for module in code:  # the installed copy, not the checkout it was built from
        assert module.startswith(str(installed_into)), (line, module)
    if "[testing]" in line:
        _run_the_readmes_pytest_example(tmp_path, env)


def _run_the_readmes_pytest_example(tmp_path: Path, env: dict[str, str]) -> None:
    """Where `pip install './bucketd[testing]'` put bucketd, the README's test passes, its
    fixture found by pytest through the installed distribution's entry point."""
    (example,) = ci_blocks("python")
    app = tmp_path / "app"
    app.mkdir()
    (app / "test_readme_example.py").write_text(example)
    ran = subprocess.run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:schemathesis"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.slow  # uv resolves bucketd's dependencies, then a server
@pytest.mark.parametrize(
    "line", [line for line in install_lines() if line.startswith("uvx")], ids=command
)
def test_bucketd_dev_without_installing(place: Path, tmp_path: Path, line: str) -> None:
    """`uvx --from ./bucketd bucketd dev`, as written, from the folder of the checkout:
    bucketd and its dependencies in an environment uv makes, the dev config, migrations and
    console from inside the package; the dev credential works and is printed once."""
    env = _environment(tmp_path, place)
    env |= {"BUCKETD_PORT": str(free_port()), "BUCKETD_S3_PORT": str(free_port())}
    env |= {"BUCKETD_BUCKETS": "demo", "BUCKETD_STORAGE__FSYNC": "false"}
    api = f"http://127.0.0.1:{env['BUCKETD_PORT']}"
    log = tmp_path / "dev.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            ["bash", "-c", line],
            cwd=place,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # uvx and the server it starts: stopped as a group
        )
    try:
        deadline = time.monotonic() + 240  # an empty uv cache downloads the dependencies
        while not _ready(api):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        s3 = boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{env['BUCKETD_S3_PORT']}",
            aws_access_key_id="bucketd",
            aws_secret_access_key="bucketd-dev-secret",
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
        )
        s3.put_object(Bucket="demo", Key="k", Body=b"from uvx")
        assert s3.get_object(Bucket="demo", Key="k")["Body"].read() == b"from uvx"
        assert web.get(api + "/console/").status_code == 200
        assert (place / "data" / "index.db").exists()  # ./data of where it was started
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
    assert log.read_text().count("bucketd-dev-secret") == 1


def _ready(api: str) -> bool:
    try:
        return web.get(api + "/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
