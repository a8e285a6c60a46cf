"""What the distribution promises its installers (issue 34 point 8): the `testing` extra
brings the fixtures' boto3 resolved with bucketd's own aiobotocore, so the two agree on the
botocore they need (boto3 installed on its own afterwards may pull a botocore aiobotocore
refuses)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

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
