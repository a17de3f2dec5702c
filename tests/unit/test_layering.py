"""The package's layout is its architecture: each subpackage is a layer, and imports only go downward."""
from __future__ import annotations

import ast

from conftest import REPO

# Bottom to top; a module may import its own layer and the layers below it, never one above.
LAYERS = ("core", "method", "tasks", "probing", "runs", "paper", "reproduce", "cli")


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "cli"


def _papa_imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):  # also the lazy imports inside functions
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("papa"):
            found.add(node.module)
            if node.module in {f"papa.{layer}" for layer in LAYERS}:  # from papa.core import distributed
                found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("papa"))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; papa imports by absolute name so the layer shows")
    return found


def test_every_module_lives_in_a_layer():
    loose = sorted(p.name for p in (REPO / "papa").glob("*.py") if p.name not in {"__init__.py", "cli.py"})
    assert loose == [], "modules outside a layer subpackage"
    assert {p.name for p in (REPO / "papa").iterdir() if p.is_dir() and p.name != "__pycache__"} == set(LAYERS) - {"cli"}


def test_imports_only_go_downward():
    upward = []
    for path in sorted((REPO / "papa").rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        here = "cli" if rel.parts[1:] == ("cli",) else rel.parts[1]
        if here == "__init__":
            continue
        for module in _papa_imports(path):
            if module == "papa":
                continue
            if LAYERS.index(_layer(module)) > LAYERS.index(here):
                upward.append(f"{rel} ({here}) imports {module} ({_layer(module)})")
    assert upward == []
