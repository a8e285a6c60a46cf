"""`python -m benchmarks.delete_claim`: what a delete's claim on the key's object
(`Settler.claimed`, docs/durability.md) costs an S3-backend delete. Put then delete one key
through one engine (PostgreSQL index, SeaweedFS), the delete timed, with the claim and with
it switched off, in four interleaved rounds of 100; the first round warms up and is left
out. Prints the milliseconds per delete and the ratio. A ratio, measured back to back: the
machine may be shared."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from storage.attributes import Attributes
from storage.engine import Engine
from tests.support.databases import gateway_configs
from tests.support.engine import chunks
from tests.support.engines import organization_with_bucket
from tests.support.postgres import Postgres
from tests.support.seaweed import SeaweedServer

from .interleave import turns

ROUNDS, DELETES = 4, 100


class Unclaimed:
    async def held(self) -> bool:
        return True


@contextlib.asynccontextmanager
async def unclaimed(bucket_id: str, key: str) -> AsyncIterator[Any]:
    yield Unclaimed()


async def measure(base: Path, postgres: Postgres, seaweed: SeaweedServer) -> dict[str, list[float]]:
    config, _ = gateway_configs(base, postgres, seaweed)
    engine = await Engine.open(config)
    try:
        actor, bucket_id = await organization_with_bucket(engine)
        settler = engine._commits._settler  # type: ignore[attr-defined]
        claimed = settler.claimed
        ms: dict[str, list[float]] = {"claimed": [], "unclaimed": []}
        for mode in turns("claimed", "unclaimed", ROUNDS):
            settler.claimed = claimed if mode == "claimed" else unclaimed
            spent = 0.0
            for _ in range(DELETES):
                body = chunks(b"x")
                await engine.files.put(actor, bucket_id, "k", Attributes("text/plain"), body)
                start = time.perf_counter()
                await engine.files.delete(actor, bucket_id, "k")
                spent += time.perf_counter() - start
            ms[mode].append(spent / DELETES * 1000)
        return ms
    finally:
        await engine.close()


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bucketd-delete-claim-"))
    postgres = Postgres(base / "postgres")
    seaweed = SeaweedServer(base / "weed").start()
    try:
        ms = asyncio.run(measure(base, postgres, seaweed))
    finally:
        seaweed.stop()
        postgres.stop()
    ratio = sum(ms["claimed"][1:]) / sum(ms["unclaimed"][1:])
    rounds = {mode: [round(m, 2) for m in values] for mode, values in ms.items()}
    print(f"ms per delete {rounds}; claimed/unclaimed (rounds 2-{ROUNDS}): {ratio:.3f}")


if __name__ == "__main__":
    main()
