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
SOURCE = ROOT / "bucketd_client" / "aio.py"
TARGET = ROOT / "bucketd_client" / "client.py"
TWINS = {
    "AsyncClient": "Client",
    "AsyncBaseTransport": "BaseTransport",
    "AsyncWebhooks": "Webhooks",
    "AsyncSource": "Source",
    "async_body": "body",
    "aclose": "close",
    "aread": "read",
    "aiter_bytes": "iter_bytes",
    "anyio": "time",
    "AsyncPageFetch": "PageFetch",
}
DOCSTRING = (
    '"""The client, synchronous: `Client`. Generated from aio.py (`AsyncClient`) by\n'
    'contrib/unasync_client.py (`make client`): edit aio.py, not this file."""'
)


def generated() -> str:
    """client.py as aio.py makes it, formatted as the repository formats code."""
    with tempfile.TemporaryDirectory() as work:
        source_dir, target_dir = Path(work, "aio"), Path(work, "sync")
        source_dir.mkdir()
        (source_dir / "aio.py").write_text(SOURCE.read_text("utf-8"), "utf-8")
        rule = unasync.Rule(f"{source_dir}/", f"{target_dir}/", additional_replacements=TWINS)
        unasync.unasync_files([str(source_dir / "aio.py")], [rule])
        written = target_dir / "aio.py"
        text = written.read_text("utf-8")
        end = text.index('"""', 3) + 3
        written.write_text(DOCSTRING + text[end:], "utf-8")
        ruff = Path(sys.executable).parent / "ruff"
        for step in (
            ["check", "--fix", "--unsafe-fixes", "--quiet", "--exit-zero"],
            ["format", "--quiet"],
        ):
            subprocess.run([str(ruff), *step, str(written)], cwd=ROOT, check=True)
        return written.read_text("utf-8")


if __name__ == "__main__":
    TARGET.write_text(generated(), "utf-8")
