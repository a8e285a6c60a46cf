"""Organizations: the tenants, each on a plan."""

from __future__ import annotations

from storage.config import PLAN_NAMES, EngineConfig, PlanLimits, PlanTable
from storage.errors import InvalidInput, OrganizationExists, OrganizationNotFound
from storage.index import Index, accounts
from storage.models import Organization, Page
from storage.rules import ids
from storage.rules.clock import Clock
from storage.rules.validation import check_name


class Organizations:
    def __init__(self, index: Index, config: EngineConfig, plans: PlanTable, clock: Clock) -> None:
        self._index = index
        self._clock = clock
        self._config = config
        self._plans = plans

    def plan(self, org: Organization) -> PlanLimits:
        return self._plans.get(org.plan)

    async def count(self) -> int:
        return await self._index.run(accounts.count_organizations)

    async def create(self, name: str, plan: str, *, unique: bool = False) -> Organization:
        """A new organization; `unique`: refused (OrganizationExists) when one has the name
        already, as the operator's commands ask (an older data dir may hold two)."""
        name = check_name(name)
        if plan not in PLAN_NAMES:
            raise InvalidInput(f"plan must be one of {', '.join(PLAN_NAMES)}")
        existing = await self.named(name) if unique else None
        if existing is not None:
            raise OrganizationExists(
                f"an organization named {name!r} exists already ({existing.id}, "
                f"{existing.plan} plan); use it, or choose another name"
            )
        org = Organization(
            id=ids.new_id(self._config.id_prefix),
            name=name,
            plan=plan,
            created_at=self._clock.iso(),
            bucket_count=0,
            stored_bytes=0,
            file_count=0,
        )
        await self._index.run(accounts.create_organization, org)
        return org

    async def get(self, org_id: str) -> Organization:
        org = await self._index.run(accounts.get_organization, org_id)
        if org is None:
            raise OrganizationNotFound("organization not found")
        return org

    async def named(self, name: str) -> Organization | None:
        return await self._index.run(accounts.find_organization_named, name)

    async def set_plan(self, org_id: str, plan: str) -> Organization:
        if plan not in PLAN_NAMES:
            raise InvalidInput(f"plan must be one of {', '.join(PLAN_NAMES)}")
        await self.get(org_id)
        await self._index.run(accounts.set_plan, org_id, plan)
        return await self.get(org_id)

    async def all(self) -> list[Organization]:
        """Every organization, oldest first (the operator's view, not a tenant's)."""
        return await self._index.run(accounts.list_organizations)

    async def list(self, after: str | None, limit: int) -> Page[Organization]:
        """A page of every organization by id (the operator's view)."""
        rows = await self._index.run(accounts.page_of_organizations, after, limit + 1)
        return Page.of(rows, limit, lambda org: org.id)
