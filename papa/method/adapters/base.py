"""What every attention adapter provides; `papa.method.architectures` maps model types to adapters.

An adapter owns everything specific to one way of computing attention: finding the attention modules and the head
geometry, installing and removing the hooks that route attention through the controller, and dropping the query/key
work of replaced heads. The controller owns what every mechanism shares (head modes, constants, λ, capture).
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from papa.core.errors import UnsupportedModelError

SITE = "_papa_site"  # per-attention-module entry in __dict__ (bypasses nn.Module attribute registration)


@dataclass
class AttentionSites:
    """An adapter's findings: the module that computes each layer's attention, and the head geometry.

    A module shared by several layers (ALBERT) appears once per layer that runs it.
    """

    base: nn.Module
    layer_modules: list[nn.Module]
    num_heads: int
    num_kv_heads: int
    head_dim: int


class Adapter:
    """One attention mechanism. Subclasses implement `find`, `install`, `remove` and `drop_query_key`."""

    #: recorded on `ModelInfo.hook`: how attention is intercepted
    hook: str = ""

    def find(self, model: nn.Module, base: nn.Module) -> AttentionSites:
        """Locate the attention modules of `base` (the model's backbone) or raise `UnsupportedModelError`."""
        raise NotImplementedError

    def install(self, controller) -> None:
        """Route every layer's attention through `controller`; hook handles go to ``controller._handles``."""
        raise NotImplementedError

    def remove(self, controller) -> None:
        """Undo `install` (the controller removes the hook handles itself)."""
        raise NotImplementedError

    def drop_query_key(self, controller, layers: list[int], module: nn.Module) -> None:
        """Stop computing Q and K of the heads that `layers` (all run by `module`) replace; register the undo."""
        raise NotImplementedError

    def can_drop_query_key(self, info) -> bool:
        """Whether `drop_query_key` works on this model (e.g. not where one fused projection makes Q, K and V)."""
        return True


def unsupported(model: nn.Module, why: str, supported: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"papa cannot attach to {type(model).__name__}: {why}. {supported}")


def layers_by_module(modules: list[nn.Module]) -> list[tuple[nn.Module, list[int]]]:
    """Each distinct module with the layers it runs, in order of first appearance."""
    found: dict[int, tuple[nn.Module, list[int]]] = {}
    for layer, module in enumerate(modules):
        found.setdefault(id(module), (module, []))[1].append(layer)
    return list(found.values())
