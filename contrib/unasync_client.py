"""Write bucketd_client/client.py, the synchronous client, from aio.py, the asynchronous
one (`make client`; tests/test_client_stands_alone.py checks the two agree). unasync
rewrites the code token by token: `async def` and `await` go, and the names below become
their synchronous twins."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bucketd_client"
FILES = {
    "aio.py": "client.py",
    "aio_connection.py": "connection.py",
    "aio_webhooks.py": "webhooks.py",
    "aio_orgs.py": "orgs.py",
    "aio_snapshots.py": "snapshots.py",
}
"""Each asynchronous module and the synchronous one written from it."""
TWINS = {
    "AsyncClient": "Client",
    "AsyncBaseTransport": "BaseTransport",
    "AsyncWebhooks": "Webhooks",
    "AsyncOrganizations": "Organizations",
    "AsyncSnapshots": "Snapshots",
    "AsyncSource": "Source",
    "async_body": "body",
    "aclose": "close",
    "aread": "read",
    "aiter_bytes": "iter_bytes",
    "anyio": "time",
    "AsyncPageFetch": "PageFetch",
    "AsyncConnection": "Connection",
    "aio_connection": "connection",
    "aio_webhooks": "webhooks",
    "aio_orgs": "orgs",
    "aio_snapshots": "snapshots",
    "AsyncSender": "Sender",
    "aiter_lines": "iter_lines",
}


def generated(name: str) -> str:
    """The synchronous module `name` (a value of FILES) as its asynchronous twin makes it,
    its docstring saying so, formatted as the repository formats code."""
    source = next(aio for aio, sync in FILES.items() if sync == name)
    with tempfile.TemporaryDirectory() as work:
        source_dir, target_dir = Path(work, "aio"), Path(work, "sync")
        source_dir.mkdir()
        (source_dir / source).write_text((PACKAGE / source).read_text("utf-8"), "utf-8")
        rule = unasync.Rule(f"{source_dir}/", f"{target_dir}/", additional_replacements=TWINS)
        unasync.unasync_files([str(source_dir / source)], [rule])
        written = target_dir / source
        text = written.read_text("utf-8")
        end = text.index('"""', 3) + 3
        docstring = (
            f'"""The synchronous twin of {source}, generated from it by\n'
            f'contrib/unasync_client.py (`make client`): edit {source}, not this file."""'
        )
        written.write_text(docstring + text[end:], "utf-8")
        ruff = Path(sys.executable).parent / "ruff"
        for step in (
            ["check", "--fix", "--unsafe-fixes", "--quiet", "--exit-zero"],
            ["format", "--quiet"],
        ):
            subprocess.run([str(ruff), *step, str(written)], cwd=ROOT, check=True)
        return written.read_text("utf-8")


if __name__ == "__main__":
    for sync in FILES.values():
        (PACKAGE / sync).write_text(generated(sync), "utf-8")
