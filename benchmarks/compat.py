"""`python -m benchmarks.compat --suite PATH`: ceph's s3-tests against bucketd.

A developer's tool, never run by `make test` (the suite lives outside this repository and
CI cannot fetch it). It starts `bucketd serve` on loopback with three organizations (the
suite's main, alt and tenant users: bucketd has no tenants, so the third is one more
organization), writes the `s3tests.conf` the suite reads, installs the suite's
requirements in a virtualenv of their own (under /tmp by default, made once), runs
`s3tests/functional/test_s3.py` with the marker expression below, and writes a summary:
passed, failed, errors, and the failing tests grouped by area, each with the last line of
its failure. docs/s3.md, "The compatibility suite", says why each marker is left out.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.support.live import ROOT, TEST_CONFIG, LiveServer

EXCLUDED_MARKERS = (
    "fails_on_aws",
    "fails_on_rgw",
    "iam_account",
    "iam_user",
    "iam_role",
    "iam_tenant",
    "iam_cross_account",
    "sns",
    "s3select",
    "s3website",
    "bucket_logging",
    "bucket_logging_cleanup",
    "fails_without_logging_rollover",
    "lifecycle_transition",
    "cloud_transition",
    "cloud_restore",
    "target_by_bucket",
    "storage_class",
    "appendobject",
)
"""What bucketd does not claim: tests AWS itself fails; IAM, STS, SNS, S3 Select and
website hosting (not implemented: 501); server access logging (not implemented); storage
classes and transitions (one storage class); Ceph's append extension. `fails_on_rgw`
marks tests Ceph's own gateway fails, most of them because the test is wrong."""
MARKERS = " and ".join(f"not {name}" for name in EXCLUDED_MARKERS)
TESTS = "s3tests/functional/test_s3.py"
DEFAULT_VENV = Path(tempfile.gettempdir()) / "bucketd-s3tests-venv"
DAY_SECONDS = 10
"""The suite's `lc_debug_interval`: a lifecycle day lasts this many seconds on both sides."""
KMS_KEYS = ("testkey-1", "testkey-2")
"""The key ids the suite's SSE-KMS tests name when its configuration gives none."""


def config() -> str:
    """bucketd's settings for the run: no rate limit, the suite's lifecycle day, a keyring
    holding the suite's KMS key ids (random keys, made for the run)."""
    keys = ", ".join(
        f'"{name}={base64.b64encode(secrets.token_bytes(32)).decode()}"' for name in KMS_KEYS
    )
    return TEST_CONFIG + (
        "[plans.free]\nrequests_per_minute = 10000000\n"
        "[ratelimit]\nanonymous_rpm = 10000000\n"
        f"[lifecycle]\nday_seconds = {float(DAY_SECONDS)}\ninterval_seconds = 1.0\n"
        f"[storage]\nkms_keys = [{keys}]\n"
    )


API_NAME = "us-east-2"
"""The LocationConstraint the suite creates a bucket with and expects back: not us-east-1,
for which S3 answers none (and refuses it as a constraint)."""
USERS = ("main", "alt", "tenant")
SCOPES = "buckets:read,buckets:write,files:read,files:write,files:bypass-governance"
"""The suite's users may bypass GOVERNANCE retention: its clean-up between tests asks to."""

REPORTER = '''
"""Writes each test's outcome, markers and last failure line to $COMPAT_REPORT."""
import json, os

OUTCOMES = {}


def pytest_runtest_logreport(report):
    entry = OUTCOMES.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    entry["markers"] = sorted(k for k, v in report.keywords.items() if v == 1)
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        lines = [l for l in str(report.longreprtext).splitlines() if l.strip()]
        entry["message"] = next(
            (l for l in reversed(lines) if l.startswith("E ")), lines[-1] if lines else ""
        )[:300]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        with open(os.environ["COMPAT_REPORT"], "w") as out:
            json.dump(OUTCOMES, out)
'''


def ensure_venv(venv: Path, suite: Path) -> Path:
    """The suite's own interpreter, with its requirements (made once, then reused)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        requirements = str(suite / "requirements.txt")
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "-r", requirements, "pytest-xdist"],
            check=True,
        )
    return python


def make_user(live: LiveServer, role: str) -> dict[str, str]:
    name = f"s3tests-{role}"
    org = live.cli("orgs", "create", name, "--plan", "pro").strip().splitlines()[-1]
    access, secret = live.s3_credentials(org, SCOPES)
    return {
        "display_name": name,
        "user_id": org,
        "email": f"{role}@s3tests.invalid",
        "access_key": access,
        "secret_key": secret,
    }


def conf_text(port: int, users: dict[str, dict[str, str]]) -> str:
    """The suite's configuration; its IAM sections (which it reads even when its IAM tests
    are left out) get credentials bucketd does not know."""
    sections = [
        f"[DEFAULT]\nhost = 127.0.0.1\nport = {port}\nis_secure = False\nssl_verify = False\n",
        "[fixtures]\nbucket prefix = s3t-{random}-\n",
    ]
    for role, user in users.items():
        lines = [f"[s3 {role}]"] + [f"{k} = {v}" for k, v in user.items()]
        if role == "main":
            lines += [f"api_name = {API_NAME}", f"lc_debug_interval = {DAY_SECONDS}"]
        if role == "tenant":
            lines.append("tenant = s3tests")
        sections.append("\n".join(lines) + "\n")
    for section, key in (("iam", "A"), ("iam root", "B"), ("iam alt root", "C")):
        sections.append(
            f"[{section}]\naccess_key = {key * 20}\nsecret_key = {key.lower() * 40}\n"
            f"user_id = {key * 20}\nemail = {key.lower()}@s3tests.invalid\n"
            "display_name = nobody\n"
        )
    return "\n".join(sections)


def run_suite(
    python: Path,
    suite: Path,
    conf: Path,
    report: Path,
    workers: int,
    markers: str,
    extra: list[str],
) -> None:
    """`extra` may name other test files (`s3tests/functional/test_headers.py`)."""
    plugin_dir = report.parent / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    (plugin_dir / "compat_report.py").write_text(REPORTER)
    env = {
        **os.environ,
        "S3TEST_CONF": str(conf),
        "COMPAT_REPORT": str(report),
        "PYTHONPATH": str(plugin_dir),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    command = [str(python), "-m", "pytest", "-q", "-p", "compat_report", "-p", "no:cacheprovider"]
    command += ["-m", markers, "-o", "addopts=", "--tb=line", "-rN"]
    command += ["-n", str(workers)] if workers > 1 else []
    tests = [] if any(arg.endswith(".py") for arg in extra) else [TESTS]
    subprocess.run([*command, *extra, *tests], cwd=suite, env=env, check=False)


def area(name: str, markers: list[str]) -> str:
    """A failing test's area: its first marker that names one, else its name's first words."""
    for marker in markers:
        if marker in USEFUL_MARKERS:
            return marker
    words = name.removeprefix("test_").split("[")[0].split("_")
    return "_".join(words[:2])


USEFUL_MARKERS = (
    "object_lock", "lifecycle", "lifecycle_expiration", "bucket_policy", "tagging",
    "encryption", "sse_s3", "bucket_encryption", "checksum", "conditional_write", "copy",
    "versioning", "object_ownership", "list_objects_v2", "delete_marker",
)  # fmt: skip


def summary(outcomes: dict[str, dict[str, Any]], seconds: float, markers: str) -> str:
    counts: dict[str, int] = defaultdict(int)
    groups: dict[str, list[str]] = defaultdict(list)
    for nodeid, entry in sorted(outcomes.items()):
        counts[entry["outcome"]] += 1
        if entry["outcome"] in ("failed", "error"):
            name = nodeid.rpartition("::")[2]
            tag = "" if entry["outcome"] == "failed" else " [error]"
            groups[area(name, entry.get("markers", []))].append(
                f"  {name}{tag}: {entry['message']}"
            )
    total = sum(counts.values())
    lines = [
        f"ceph s3-tests against bucketd, {time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}"
        f" ({seconds:.0f} s)",
        f"selected {total}: passed {counts['passed']}, failed {counts['failed']}, "
        f"errors {counts['error']}, skipped {counts['skipped']}",
        f"marker expression: {markers}",
        "",
    ]
    for group in sorted(groups, key=lambda g: (-len(groups[g]), g)):
        lines.append(f"{group} ({len(groups[group])})")
        lines += groups[group]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compat", description=__doc__)
    parser.add_argument("--suite", type=Path, required=True, help="a checkout of s3-tests")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the suite's venv")
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("-m", dest="markers", default=MARKERS, help="instead of the default")
    parser.add_argument("--out", type=Path, help="the summary's file (default: results/)")
    parser.add_argument(
        "--root", type=Path, help="the source tree whose bucketd to run (a before/after pair)"
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="more pytest arguments after --: -k NAME, a test file"
    )
    args = parser.parse_args()
    suite = args.suite.resolve()
    python = ensure_venv(args.venv, suite)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bucketd-compat-") as folder:
        base = Path(folder)
        live = LiveServer(base / "data", config(), root=(args.root or ROOT).resolve()).start()
        try:
            users = {role: make_user(live, role) for role in USERS}
            conf = base / "s3tests.conf"
            conf.write_text(conf_text(live.s3_port, users))
            report = base / "report.json"
            run_suite(python, suite, conf, report, args.workers, args.markers, args.pytest_args)
        finally:
            live.stop()
        outcomes = json.loads(report.read_text()) if report.exists() else {}
    text = summary(outcomes, time.monotonic() - started, args.markers)
    out = args.out or Path(__file__).parent / "results" / f"compat-{time.strftime('%H%M')}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"saved {out}")


if __name__ == "__main__":
    main()
