"""`python -m benchmarks.fence`: what the publish fence (`storage/backends/s3/settle.py`)
costs an S3-backend write. 1 KiB overwrites of one key through one engine (SQLite index,
SeaweedFS), fenced (If-Match on the ETag the key's record names) and with the fence
switched off, in four interleaved rounds of 150; the first round warms up and is left out.
Prints the seconds per round and the ratio. A ratio, measured back to back: the machine
may be shared."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from storage.attributes import Attributes
from storage.backends.protocol import Fence
from storage.config import EngineConfig, S3Settings, StorageSettings
from storage.engine import Engine
from storage.models import Bucket
from tests.support.engine import chunks
from tests.support.engines import organization_with_bucket
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

from .interleave import turns

ROUNDS, WRITES = 4, 150


def unfenced(bucket: Bucket, name: str, current: str | None) -> Fence | None:
    return None


async def measure(endpoint: str, base: Path) -> dict[str, list[float]]:
    s3 = S3Settings(endpoint_url=endpoint, access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)
    config = EngineConfig(data_dir=base / "data", storage=StorageSettings(backend="s3", s3=s3))
    engine = await Engine.open(config)
    try:
        actor, bucket_id = await organization_with_bucket(engine)
        settler = engine._commits._settler  # type: ignore[attr-defined]
        fenced = settler.fence
        seconds: dict[str, list[float]] = {"fenced": [], "unfenced": []}
        for mode in turns("fenced", "unfenced", ROUNDS):
            settler.fence = fenced if mode == "fenced" else unfenced
            start = time.perf_counter()
            for _ in range(WRITES):
                body = chunks(b"x" * 1024)
                await engine.files.put(actor, bucket_id, "k", Attributes("text/plain"), body)
            seconds[mode].append(time.perf_counter() - start)
        return seconds
    finally:
        await engine.close()


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bucketd-fence-"))
    server = SeaweedServer(base / "weed").start()
    try:
        seconds = asyncio.run(measure(server.endpoint, base))
    finally:
        server.stop()
    ratio = sum(seconds["fenced"][1:]) / sum(seconds["unfenced"][1:])
    rounds = {mode: [round(s, 3) for s in values] for mode, values in seconds.items()}
    print(f"{rounds}; fenced/unfenced (rounds 2-{ROUNDS}): {ratio:.3f}")


if __name__ == "__main__":
    main()
