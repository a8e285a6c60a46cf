"""Gateway configurations over one PostgreSQL."""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

from storage.config import (
    EngineConfig,
    IndexSettings,
    PlanLimits,
    Plans,
    S3Settings,
    StorageSettings,
)
from tests.support.postgres import Postgres
from tests.support.seaweed import ACCESS_KEY, SECRET_KEY, SeaweedServer

QUOTA = 10_000


def gateway_configs(
    tmp_path: Path, postgres: Postgres, seaweed: SeaweedServer
) -> list[EngineConfig]:
    """Two gateways' settings: one new PostgreSQL database, one cluster, own data dirs, one
    master key (every gateway of an index needs the same to read what another encrypted)."""
    url = postgres.new_database()
    s3 = S3Settings(
        endpoint_url=seaweed.endpoint,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        brand="pg" + uuid.uuid4().hex[:6],
    )
    plans = Plans(free=PlanLimits(max_storage_bytes=QUOTA))
    master_key = base64.b64encode(os.urandom(32)).decode()
    return [
        EngineConfig(
            data_dir=tmp_path / name,
            storage=StorageSettings(backend="s3", s3=s3, master_key=master_key),
            index=IndexSettings(url=url),
            plans=plans,
        )
        for name in ("a", "b")
    ]
