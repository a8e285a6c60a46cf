"""The typed client installs and runs without the server (issue 33 point 3): no module of
`bucketd_client` imports `storage`, `gateway` or `bucketd`, and the whole package, shapes
and OpenAPI-bearing contract included, imports in a process where those are missing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ("storage", "gateway", "bucketd")


def test_no_client_module_names_the_server() -> None:
    found = []
    for path in sorted((ROOT / "bucketd_client").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in SERVER]
    assert found == []


def test_the_package_imports_with_the_server_missing() -> None:
    script = (
        "import sys\n"
        "for name in ('storage', 'gateway', 'bucketd'):\n"
        "    sys.modules[name] = None\n"
        "import importlib, pkgutil, bucketd_client\n"
        "for module in pkgutil.iter_modules(bucketd_client.__path__):\n"
        "    importlib.import_module('bucketd_client.' + module.name)\n"
        "from bucketd_client import Client, shapes\n"
        "print(len(shapes.__all__))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 20


def test_the_synchronous_client_is_the_asynchronous_one_unasynced() -> None:
    """client.py is written from aio.py (`make client`), never kept by hand beside it."""
    import runpy

    script = runpy.run_path(str(ROOT / "contrib" / "unasync_client.py"))
    for sync in script["FILES"].values():
        assert script["generated"](sync) == (ROOT / "bucketd_client" / sync).read_text("utf-8")
