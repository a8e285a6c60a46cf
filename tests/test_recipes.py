"""The README's copy-paste recipes, run as written: the GitHub Actions step (start with two
variables and a bucket list, wait for the ready file, `aws s3 cp`) and the environment
that configures SDK clients."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.commands import CI, bootstrap_env, serve
from tests.support.live import free_port

pytestmark = pytest.mark.slow  # servers, the aws CLI

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## In CI and in your tests"


def blocks(language: str) -> list[str]:
    """The README's code blocks of `language` in the CI section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index(SECTION) : text.index("\n## ", text.index(SECTION) + 1)]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def tools_first() -> str:
    """PATH with this environment's `bucketd`, `aws` and python first."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


def test_the_github_actions_step(tmp_path: Path) -> None:
    (step,) = yaml.safe_load(blocks("yaml")[0])
    env = {
        **os.environ,
        **step["env"],
        "PATH": tools_first(),
        "RUNNER_TEMP": str(tmp_path),
        "BUCKETD_PORT": str(free_port()),  # the recipe's ports may be taken on a test machine
        "BUCKETD_S3_PORT": str(free_port()),
        "BUCKETD_STORAGE__FSYNC": "false",
    }
    ran = subprocess.run(
        ["bash", "-e", "-c", step["run"] + 'kill "$!"\nwait\n'],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode in (0, 143), ran.stdout + ran.stderr  # 143: the server, killed
    assert "upload: ./hello.txt to s3://demo/hello.txt" in ran.stdout
    assert "hello.txt" in ran.stdout.splitlines()[-1]


def test_the_environment_for_sdk_clients(tmp_path: Path) -> None:
    exported: dict[str, str] = {}
    (environment,) = [b for b in blocks("sh") if b.startswith("export ")]
    for line in environment.splitlines():
        words = shlex.split(line)
        assert words[0] == "export"
        exported.update(word.split("=", 1) for word in words[1:])
    with serve(tmp_path, bootstrap_env(CI, BUCKETD_BUCKETS="sdk")) as served:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AWS_", "BUCKETD_"))
        }
        env.update(exported)
        env["AWS_ENDPOINT_URL"] = served.s3  # the recipe's port, here a free one
        env |= {"PATH": tools_first(), "AWS_CONFIG_FILE": "/nonexistent"}
        boto3 = subprocess.run(
            [
                sys.executable,
                "-c",
                "import boto3; s3 = boto3.client('s3'); "
                "s3.put_object(Bucket='sdk', Key='k', Body=b'v'); "
                "print([b['Name'] for b in s3.list_buckets()['Buckets']])",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert boto3.stdout.strip() == "['sdk']", boto3.stderr
        cli = subprocess.run(
            ["aws", "s3", "ls", "s3://sdk/"], env=env, capture_output=True, text=True, timeout=60
        )
        assert cli.returncode == 0 and " k\n" in cli.stdout + "\n", cli.stderr
