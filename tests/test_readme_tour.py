"""The README's five-minute tour, run as written: every shell block in order in one bash
session, the Python block with the venv's Python, against `bucketd serve` with the
settings `make run` uses, in a folder laid out as the repository (`.venv`, `data`).

The folder's `.venv` is this venv with `bin/bucketd` and `bin/aws` as shims of preloaded
fork servers (tests/support/shims.py): the tour's 36 commands as the installed scripts
cost 20 s of CPU, a tenth of the suite's on its own."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.commands import serve
from tests.support.shims import shimmed_venv

pytestmark = pytest.mark.slow  # a server, the CLI, curl and the aws CLI

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## A five-minute tour"
RUNS_UNTIL_STOPPED = "Ctrl-C stops it"
"""A line the README marks so is run for two seconds, then interrupted as a person would."""


def tour_script() -> str:
    """The tour's blocks as one bash script."""
    text = (ROOT / "README.md").read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + 1)]
    script = ["set -eo pipefail", "shopt -s expand_aliases"]
    for language, block in re.findall(r"```(sh|python)\n(.*?)```", section, re.S):
        if language == "python":
            script.append(f".venv/bin/python - <<'PYTHON'\n{block}PYTHON")
            continue
        for line in block.splitlines():
            if RUNS_UNTIL_STOPPED in line:  # `timeout` runs a program, not an alias
                assert line.startswith("bucketd ")
                # Interrupted while still starting on a loaded machine, it exits 130.
                command = line.split("#")[0].strip()
                line = f"timeout -s INT --preserve-status 2 .venv/bin/{command} || test $? = 130"
            script.append(line)
    return "\n".join(script) + "\n"


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    dev = (ROOT / "gateway" / "dev.toml").read_text()  # what `make run` serves with
    home = tmp_path / "home"
    home.mkdir()
    (home / "data").symlink_to(tmp_path / "data")
    with serve(tmp_path, {}, config=dev) as served:
        script = (
            tour_script()
            .replace("127.0.0.1:8080", served.api.removeprefix("http://"))
            .replace("127.0.0.1:9000", served.s3.removeprefix("http://"))
        )
        (home / "tour.sh").write_text(script)
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AWS_", "BUCKETD_"))
        }
        env |= {
            "HOME": str(home),
            "AWS_CONFIG_FILE": "/nonexistent",
            "BUCKETD_URL": served.api,  # the tour's server is on 8080; this one is elsewhere
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        with shimmed_venv(home / ".venv", env):
            ran = subprocess.run(
                ["bash", "tour.sh"], cwd=home, env=env, capture_output=True, text=True, timeout=180
            )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert (home / "today.log").read_text() in ran.stdout  # `files get ... -`: to stdout
    listed = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+(\S+)", ran.stdout)
    assert {"copy", "docs", "logs", "photos"} <= set(listed)  # `aws s3 ls`: one organization
    assert (home / "photos-from-s3" / "synced" / "2024" / "dog.jpg").exists()
    assert (home / "public-cat.jpg").read_text() == "not really a cat\n"
