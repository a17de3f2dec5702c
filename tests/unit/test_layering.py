"""The package's layout is its architecture: each subpackage is a layer, and imports only go downward."""
from __future__ import annotations

import ast

from conftest import REPO

# Bottom to top; a module may import its own layer and the layers below it, never one above.
LAYERS = ("core", "method", "tasks", "probing", "runs", "paper", "sections", "reproduce", "cli")


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


def _module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_cycle() -> list[str]:
    """A cycle of papa modules importing each other (type-checking-only and lazy imports included), else []."""
    modules = {_module_name(p): p for p in (REPO / "papa").rglob("*.py")}
    edges = {name: sorted(m for m in _papa_imports(path) if m in modules and m != name and m != "papa")
             for name, path in modules.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        path.append(name)
        for nxt in edges[name]:
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[name] = 2
        return []

    for name in sorted(modules):
        if name not in state and (found := visit(name)):
            return found
    return []


def test_no_module_imports_itself_back():
    """Arrows run one way inside a layer too: the registry imports the adapters, the adapters import the model
    description (`papa.method.adapters.base`), never the reverse, not even for type hints."""
    assert _import_cycle() == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    """The check above can fail: a module importing back its importer is reported."""
    import test_layering

    fake = tmp_path / "papa" / "method"
    fake.mkdir(parents=True)
    (fake / "a.py").write_text("from papa.method.b import x\n")
    (fake / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from papa.method.a import y\n")
    monkeypatch.setattr(test_layering, "REPO", tmp_path)
    assert test_layering._import_cycle() == ["papa.method.a", "papa.method.b", "papa.method.a"]


def test_the_docs_list_the_layers_the_package_has():
    """The architecture page's drawing, the API reference's pages and the site's navigation name these layers."""
    from docs import gen_measurements

    gen_pages = ast.parse((REPO / "docs" / "gen_pages.py").read_text())
    listed = next(ast.literal_eval(n.value) for n in gen_pages.body
                  if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "LAYERS")
    nav = (REPO / "mkdocs.yml").read_text()
    assert gen_measurements._LAYERS_DOWN == tuple(reversed(LAYERS))
    assert listed == LAYERS[:-1] and all(f"reference/{layer}.md" in nav for layer in listed)
