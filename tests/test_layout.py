"""The code's shape (issue 33 point 2): no import cycle among the server's and the client's
modules, counting imports inside functions too, and no module over 450 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "storage", "bucketd_client", "bucketd")
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = node.module or ""
            root = f"{base}.{module}".strip(".") if node.level else module
            targets = [root] + [f"{root}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_no_module_over_450_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): count
        for path in _modules().values()
        if (count := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_test_module_imports_another() -> None:
    """Helpers and fixtures live in tests/support (and conftest.py); a test module is a leaf."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            leaves = [n for n in names if n.split(".")[:2][-1].startswith(("test_", "conftest"))]
            found += [f"{path.relative_to(ROOT)}: {n}" for n in leaves if n.startswith("tests.")]
    assert found == []


# The folders by kind (docs/architecture.md, "Where each rule lives"): what may sit at each
# package's root beside them. A new module goes into the folder of its kind.
LAYOUT = {
    "gateway": {
        "folders": {"api", "cli", "console", "delivery", "http", "runtime", "s3"},
        "modules": {"__init__", "__main__", "app", "context", "settings", "settings_loader"},
    },
    "storage": {
        "folders": {"backends", "index", "migrations", "rules", "services", "tools"},
        "modules": {
            "__init__",
            "attributes",
            "bodies",
            "config",
            "datadir",
            "encryption",
            "engine",
            "errors",
            "faults",
            "kms",
            "models",
            "sealing",
            "sse_c",
            "tasks",
        },
    },
}


def test_each_kind_of_code_has_its_folder() -> None:
    for package, allowed in LAYOUT.items():
        here = ROOT / package
        folders = {p.name for p in here.iterdir() if p.is_dir() and p.name != "__pycache__"}
        modules = {p.stem for p in here.glob("*.py")}
        assert (package, folders) == (package, allowed["folders"])
        assert (package, modules) == (package, allowed["modules"])


def test_rules_are_pure() -> None:
    """storage/rules/ decides from its arguments: it reaches no service, index or backend
    (an import under TYPE_CHECKING, for a signature, is not a reach)."""
    modules = _modules()
    reached = []
    for name, path in modules.items():
        if not name.startswith("storage.rules."):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body
            for n in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in typing_only:
                for target in _imports(name, path, modules) & _targets_of(node, name, path):
                    if target.startswith(("storage.services", "storage.index", "storage.backends")):
                        reached.append(f"{name} -> {target}")
    assert reached == []


def _targets_of(node: ast.Import | ast.ImportFrom, name: str, path: Path) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    root = f"{base}.{node.module or ''}".strip(".") if node.level else (node.module or "")
    return {root} | {f"{root}.{alias.name}" for alias in node.names}
