"""An organization as the command line names it: by its id, or by a name only one
organization has. The data dir and the API pick alike (`account_engine.py`,
`account_api.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from .errors import UsageError


class Named(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def pick_org(orgs: Sequence[N], given: str) -> N:
    """The organization of that id, or of a name only one organization has."""
    for org in orgs:
        if org.id == given:
            return org
    named = [org for org in orgs if org.name == given]
    if not named:
        raise UsageError(f"no organization is named {given!r} (bucketd orgs list shows them)")
    if len(named) > 1:
        ids = ", ".join(org.id for org in named)
        raise UsageError(f"{len(named)} organizations are named {given!r} ({ids}); give the id")
    return named[0]
