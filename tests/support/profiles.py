"""Hypothesis profiles, chosen by HYPOTHESIS_PROFILE: `ci` (the default, what `make test`
runs: the full budgets, derandomized so a red run reproduces), `dev` (a quarter, for
`make test-fast`) and `thorough` (four times ci, for a nightly or pre-release run).

A test states its budget as the `ci` number, `budget(30)`; the profile scales it. The
Schemathesis run's time budget scales the same way.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCALES = {"ci": 1.0, "dev": 0.25, "thorough": 4.0}
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if PROFILE not in SCALES:
    raise RuntimeError(f"HYPOTHESIS_PROFILE must be one of {', '.join(SCALES)}")

for name in SCALES:
    settings.register_profile(
        name,
        derandomize=name == "ci",
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        print_blob=True,
    )
settings.load_profile(PROFILE)


def budget(ci_examples: int) -> int:
    """A test's number of examples under the active profile (at least 2)."""
    return max(2, round(ci_examples * SCALES[PROFILE]))


def scaled(ci_seconds: float) -> float:
    return ci_seconds * SCALES[PROFILE]
