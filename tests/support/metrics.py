"""Reading /metrics."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.support import web
from tests.support.live import LiveServer


def metrics(live: LiveServer, key: str) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics as {(name, sorted labels): value}."""
    headers = {"Authorization": f"Bearer {key}"}
    response = web.get(f"{live.url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def metrics_key(live: LiveServer) -> str:
    with live.client() as http:
        org = http.get("/organization").json()["data"]["id"]
    return live.cli("keys", "create", "--org", org, "--scopes", "metrics:read").splitlines()[-1]
