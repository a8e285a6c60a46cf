"""What the distribution promises its installers (issue 34 point 8): the `testing` extra
brings the fixtures' boto3 resolved with bucketd's own aiobotocore, so the two agree on the
botocore they need (boto3 installed on its own afterwards may pull a botocore aiobotocore
refuses)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


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


@pytest.mark.slow  # a build
def test_make_dist_writes_a_wheel_and_an_sdist_that_hold_everything(tmp_path: Path) -> None:
    """`make dist` (issue 34 point 1: what `pip install` takes while bucketd is on no
    registry), run on a copy of the tree (setuptools writes build files where it builds):
    both archives carry the migrations, the console and the dev config, and the sdist the
    sources a wheel is built from."""
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", ".venv", "data", "*.egg-info", ".*cache")
    source.mkdir()
    for part in ("pyproject.toml", "README.md", "LICENSE", "Makefile"):
        shutil.copy(ROOT / part, source / part)
    for package in ("gateway", "storage", "bucketd_client", "bucketd"):
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    (source / ".venv").symlink_to(Path(sys.executable).parent.parent)
    # -o: the copy's venv is this one, installed already (an install from the copy would
    # point this venv's editable install at it)
    built = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed-dev", "dist"],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (source / "dist").glob("bucketd-*-py3-none-any.whl")
    (sdist,) = (source / "dist").glob("bucketd-*.tar.gz")
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
