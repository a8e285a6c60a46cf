"""The precondition of a write, from its If-None-Match and If-Match headers, for both
protocols (each answers a refusal its own way)."""

from __future__ import annotations

from storage.models import Condition


def write_condition(if_none_match: str | None, if_match: str | None) -> Condition | None:
    """The write's condition (None: none). If-None-Match on a write only takes `*` (S3's
    rule): anything else raises ValueError."""
    if if_none_match is not None and if_none_match.strip() != "*":
        raise ValueError("If-None-Match on a write only takes *")
    if if_none_match is None and if_match is None:
        return None
    return Condition(if_none_match_any=if_none_match is not None, if_match=if_match)
