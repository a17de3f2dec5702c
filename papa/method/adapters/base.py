"""The adapter contract: what every attention adapter provides, and the model description it shares with the
registry and the controller (`Architecture`, `ModelInfo`).

An adapter owns one way of computing attention (finding the modules, hooking them, dropping replaced heads' Q/K);
it sees the controller only through `AdapterContext`.
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol

import torch
from torch import nn

from papa.core.errors import UnsupportedModelError

if TYPE_CHECKING:  # annotations only
    from papa.method.constant_heads import ConstantHeads, ConstantWorkspace
    from papa.method.capture import AttentionStats
    from papa.method.head_modes import LayerPlan
    from papa.method.masks import Allowed

Positions = Literal["ids", "from_padding"]
SITE = "_papa_site"  # per-attention-module entry in __dict__ (bypasses nn.Module attribute registration)


@dataclass
class AttentionSites:
    """An adapter's findings: the module that computes each layer's attention, and the head geometry. A module shared by
    several layers (ALBERT) appears once per layer that runs it."""

    base: nn.Module
    layer_modules: list[nn.Module]
    num_heads: int
    num_kv_heads: int
    head_dim: int


class AdapterContext(Protocol):
    """What an adapter may read and call on the controller (`papa.method.controller.PapaController`)."""

    #: the attached model's description: attention modules in layer order, head geometry, adapter, architecture
    info: ModelInfo
    #: head modes `[L, H]` (`papa.method.head_modes`: KEEP, REPLACE, MIX)
    modes: torch.Tensor
    #: mixing logits `[L, H]`; λ = sigmoid(θ)
    theta: torch.Tensor
    #: the statistics of a running capture, else None
    stats: AttentionStats | None
    #: counts forward passes where a module is shared by several layers (ALBERT); elsewhere 0, so that a compiled
    #: forward pass does not recompile for it
    forward_id: int
    #: False: every changed layer materialises its probabilities (the reference the fast paths are tested against)
    fast_paths: bool

    @property
    def model(self) -> nn.Module:
        """The attached model."""
        ...

    @property
    def num_heads(self) -> int:
        """Query heads per layer."""
        ...

    def layer_needs(self, layer: int) -> tuple[bool, bool]:
        """(any head not kept, any head mixed) for `layer`."""
        ...

    def plan(self, layer: int) -> LayerPlan:
        """`layer`'s head modes as decided on the host (kept and replaced heads, as tuples and device indices)."""
        ...

    def valid_mask(self, batch: int, n: int, device: torch.device) -> torch.Tensor | None:
        """The real tokens `[B, n]` of the forward pass in flight on `device`; None where nothing is padded."""
        ...

    def workspace(self, value: torch.Tensor) -> ConstantWorkspace | None:
        """The buffers `papa.method.attention_free.constant_attention` reuses for values shaped as `value`, kept
        across layers and passes (None while compiling)."""
        ...

    def allowed(self, mask: torch.Tensor | None, q: int, k: int, *, causal: bool, windowed: bool = False) -> Allowed:
        """What `mask` (as an attention function received it) allows, cached per forward pass."""
        ...

    def constant_heads(self, layer: int, n: int, dtype: torch.dtype, allowed: Allowed, *,
                       replaced: bool, pattern: tuple = ()) -> ConstantHeads:
        """`layer`'s replaced heads (else every head) at length `n`, masked by `allowed`, prepared in `dtype` for
        `papa.method.attention_free.constant_attention`."""
        ...

    def mix_weights(self, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """Each layer's weight of A per head, `[1, 1, H, 1]` (λ mixed, 1 kept, 0 replaced), once per pass."""
        ...

    def constant_probs(self, layer: int, heads: torch.Tensor | slice, valid: torch.Tensor | Allowed | None, n: int,
                       dtype: torch.dtype, rows: slice = slice(None)) -> torch.Tensor:
        """Constant matrices masked by `valid` and renormalised row-wise, `[B or 1, h, r, n]`."""
        ...

    def capture(self, layer: int, probs: torch.Tensor, valid: torch.Tensor | None, heads: slice = slice(None),
                rows: slice = slice(None)) -> None:
        """Add probabilities `[B, h, r, n]` to the running capture, if any (padded keys' probabilities are 0)."""
        ...

    def per_pass(self, name: tuple, tensor: torch.Tensor | None, make: Callable[[], object]) -> object:
        """`make()` once per forward pass for `tensor` (by identity) and `name`."""
        ...

    def transform_probs(self, layer: int, probs: torch.Tensor, valid: torch.Tensor | None,
                        heads: slice = slice(None), rows: slice = slice(None), *,
                        allowed: Allowed | None = None) -> torch.Tensor:
        """Add probabilities `[B, h, r, n]` to a running capture, then apply the layer's head modes to them."""
        ...

    def add_hook(self, handle: torch.utils.hooks.RemovableHandle) -> None:
        """Hand over a hook handle: the controller removes it on detach, before calling the adapter's `remove`."""
        ...

    def remember_attn_implementation(self, name: str) -> None:
        """Note the model's attention implementation before the adapter replaces it."""
        ...

    def restore_attn_implementation(self) -> None:
        """Put back the implementation `remember_attn_implementation` noted, if any, and forget it."""
        ...


class Adapter:
    """One attention mechanism. Subclasses implement `find`, `install`, `remove` and `drop_query_key`."""

    #: recorded on `ModelInfo.hook`: how attention is intercepted
    hook: str = ""

    def find(self, model: nn.Module, base: nn.Module) -> AttentionSites:
        """Locate the attention modules of `base` (the model's backbone) or raise `UnsupportedModelError`."""
        raise NotImplementedError

    def install(self, controller: AdapterContext) -> None:
        """Route every layer's attention through `controller`; hook handles go to `controller.add_hook`."""
        raise NotImplementedError

    def remove(self, controller: AdapterContext) -> None:
        """Undo `install` (the controller removes the hook handles itself)."""
        raise NotImplementedError

    def drop_query_key(self, controller: AdapterContext, layers: list[int], module: nn.Module) -> None:
        """Stop computing Q and K of the heads that `layers` (all run by `module`) replace; register the undo."""
        raise NotImplementedError

    def can_drop_query_key(self, info: ModelInfo) -> bool:
        """Whether `drop_query_key` works on this model (e.g. not where one fused projection makes Q, K and V)."""
        return True


@dataclass(frozen=True)
class Architecture:
    """How papa handles one model type."""

    adapter: Adapter
    #: ``ids``: the PAPA layout passes ``position_ids = cumsum(mask) - 1``; ``from_padding``: the model numbers real
    #: tokens itself from ``pad_token_id + 1`` (RoBERTa), so no ids are passed and two positions are not usable.
    positions: Positions = "ids"
    #: attribute names of the query and key projections (dropped for replaced heads); None: one fused projection
    query_key: tuple[str, str] | None = ("query", "key")
    #: the value projection's attribute and the output projection's path from the attention module ("../x.y": from
    #: its parent), whose rows and columns are permuted kept heads first while Q/K are dropped (read only where
    #: `query_key` is set); None: not permuted
    value_output: tuple[str, str] | None = ("value", "../output.dense")
    #: the released code's tokenizer adds a prefix space (byte-level BPE; run_papa_ner.py's add_prefix_space=True)
    prefix_space: bool = False
    #: a causal LM: row i attends to keys 0..i; inputs are left-aligned (papa.method.layout, "Decoders")
    causal: bool = False
    #: in ARCHITECTURES, i.e. covered by the invariant tests
    verified: bool = True

    @property
    def hook(self) -> str:
        return self.adapter.hook

    def max_positions(self, config) -> int | None:
        """How many positions the model's absolute position embeddings cover (None: relative positions only)."""
        if not getattr(config, "position_biased_input", True):
            return None
        n = getattr(config, "max_position_embeddings", None)
        if n is None:
            return None
        return n - (config.pad_token_id + 1) if self.positions == "from_padding" else n


@dataclass
class ModelInfo:
    """The backbone inside a (possibly task-headed) model, its attention module per layer and the head geometry."""

    model_type: str
    base: nn.Module
    attention_modules: list[nn.Module]   # per layer; a module shared by layers (ALBERT) repeats
    num_layers: int
    num_heads: int
    head_dim: int
    num_kv_heads: int
    architecture: Architecture
    causal: bool = False                 # row i attends to keys 0..i (the registry's, or the modules' is_causal)

    @property
    def adapter(self) -> Adapter:
        return self.architecture.adapter

    @property
    def hook(self) -> str:
        """How attention is intercepted: the architecture's adapter decides."""
        return self.architecture.hook


def unsupported(model: nn.Module, why: str, supported: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"papa cannot attach to {type(model).__name__}: {why}. {supported}")


def layers_by_module(modules: list[nn.Module]) -> list[tuple[nn.Module, list[int]]]:
    """Each distinct module with the layers it runs, in order of first appearance."""
    found: dict[int, tuple[nn.Module, list[int]]] = {}
    for layer, module in enumerate(modules):
        found.setdefault(id(module), (module, []))[1].append(layer)
    return list(found.values())
