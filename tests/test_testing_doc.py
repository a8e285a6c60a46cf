"""docs/testing.md's examples, run as written: each Python block is a test module of an
unrelated project, run by one pytest session (one server, through `bucketd.testing`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a pytest run of its own, starting a server

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"


def test_every_example_of_the_testing_guide_passes(tmp_path: Path) -> None:
    examples = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(examples) >= 2
    for number, example in enumerate(examples):
        (tmp_path / f"test_example_{number}.py").write_text(example)
    environ = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
        cwd=tmp_path,
        env={**environ, "BUCKETD_TEST_BUCKETS": "photos"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    tests = sum(len(re.findall(r"^def test_", example, re.M)) for example in examples)
    assert f"{tests} passed" in ran.stdout, ran.stdout
