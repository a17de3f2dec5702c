"""The adapters' contract with the controller: `AdapterContext` lists all they use, and the controller provides it."""
from __future__ import annotations

import ast
import inspect

import pytest

import papa
from conftest import REPO, tiny_model
from papa.method.adapters.base import AdapterContext

ADAPTERS = sorted((REPO / "papa" / "method" / "adapters").glob("*.py"))
CONTROLLER_NAMES = {"controller", "ctrl"}


def _members() -> set[str]:
    """The context's public members: its annotated attributes, properties and methods."""
    found = set(AdapterContext.__annotations__)
    found |= {name for name, value in vars(AdapterContext).items()
              if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}
    return found


def _is_controller(node: ast.expr) -> bool:
    """`controller`, `ctrl`, or `<anything>.controller` (a `_Site` holds its controller under that name)."""
    if isinstance(node, ast.Name):
        return node.id in CONTROLLER_NAMES
    return isinstance(node, ast.Attribute) and node.attr in CONTROLLER_NAMES


def _uses(path) -> list[tuple[int, str]]:
    """(line, attribute) of every attribute read or written on a controller in `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.lineno, node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and _is_controller(node.value)]


def _parameters(method) -> list[tuple]:
    """Names, kinds and defaults (annotations are spelled differently on each side)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


def test_the_context_has_members():
    assert {"info", "modes", "layer_needs", "valid_mask", "add_hook", "restore_attn_implementation"} <= _members()


@pytest.mark.parametrize("path", ADAPTERS, ids=lambda p: p.name)
def test_adapters_use_no_private_controller_member(path):
    private = [f"{path.name}:{line} .{attr}" for line, attr in _uses(path)
               if attr.startswith("_") and not attr.startswith("__")]
    assert private == []


@pytest.mark.parametrize("path", ADAPTERS, ids=lambda p: p.name)
def test_adapters_use_only_the_context(path):
    members = _members()
    outside = [f"{path.name}:{line} .{attr}" for line, attr in _uses(path) if attr not in members]
    assert outside == [], "add the member to AdapterContext (and docs/architecture.md) or stop using it"


def test_the_check_sees_private_access(tmp_path):
    source = tmp_path / "adapter.py"
    source.write_text("def f(controller, site):\n    controller._handles.append(1)\n    site.controller._x\n")
    assert sorted(attr for _, attr in _uses(source)) == ["_handles", "_x"]


@pytest.mark.parametrize("arch", ["bert", "deberta"])  # one model per adapter
def test_the_controller_provides_the_context(arch):
    model = tiny_model(arch)
    controller = papa.attach(model)
    try:
        for name in sorted(_members()):
            assert hasattr(controller, name), name
            declared = inspect.getattr_static(AdapterContext, name, None)
            if inspect.isfunction(declared):  # a method: same parameters, so an adapter's call means the same
                assert _parameters(getattr(controller, name)) == _parameters(declared.__get__(controller)), name
    finally:
        papa.detach(model)


def test_the_attention_implementation_comes_back():
    model = tiny_model("bert", attn_implementation="eager")
    controller = papa.attach(model)
    assert model.config._attn_implementation == "papa_eager"
    papa.detach(model)
    assert model.config._attn_implementation == "eager"
    controller.restore_attn_implementation()  # forgotten once restored: a second call changes nothing
    assert model.config._attn_implementation == "eager"
