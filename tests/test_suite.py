"""The suite's own machinery: a test that hangs is stopped by pytest-timeout and named."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


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
