"""Schemathesis against /v1/openapi.json of a live server: no 500, every response as
documented (the envelope, status codes, content types and the rate-limit headers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import SHARED_CONFIG, LiveServer
from tests.support.profiles import PROFILE, scaled

pytestmark = pytest.mark.slow  # a 20-second fuzzing budget

MAX_SECONDS = round(scaled(20))
SEED = ["--seed", "1"] if PROFILE == "ci" else []


def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    live = LiveServer(tmp_path / "data", SHARED_CONFIG).start()
    try:
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "schemathesis"),
                "run",
                f"{live.url}/v1/openapi.json",
                "--header",
                f"Authorization: Bearer {live.admin_key}",
                "--checks",
                "all",
                # A schema-valid request may still be refused for the state it meets (a bucket
                # whose limit an earlier PATCH set to 0 bytes); those answers are documented.
                # A body naming a bucket the caller cannot see is a 404 (the contract: "a
                # bucket of another organization -> 404, exactly as if it did not exist"),
                # which this check reads as the path's resource gone: POST /orgs/{id}/keys
                # with a random bucketId, the organization just made.
                "--exclude-checks",
                "positive_data_acceptance,ensure_resource_availability",
                # Revoking the fuzzer's own key would leave the rest of the run at 401.
                "--exclude-operation-id",
                "revokeKey",
                # The live stream never ends by itself.
                "--exclude-operation-id",
                "streamEvents",
                "--max-examples",
                "10",
                "--max-time",
                str(MAX_SECONDS),
                "--no-color",
                *SEED,
            ],
            capture_output=True,
            text=True,
            timeout=MAX_SECONDS + 120,
            cwd=tmp_path,  # its cache (.schemathesis/) stays out of the checkout
        )
    finally:
        live.stop()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    log = live.log_path.read_text()
    assert "Traceback" not in log, log[-6000:]
