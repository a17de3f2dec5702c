"""Dropping the query/key work of replaced heads (paper 3.4): the model attention-free where heads are constant.

Each adapter does it its own way (sliced Q/K projections; for DeBERTa, only wholly replaced layers);
`restore_query_key` puts the original projections back, and the model's weights are never modified.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from papa.core.errors import PapaError
from papa.method.adapters.base import layers_by_module

QK_HEADS = "_papa_qk_heads"       # module.__dict__ entry: the heads whose Q/K the projections still produce
RESTORE = "_papa_restore_qk"      # module.__dict__ entry: a callable that undoes `drop_query_key` on the module


@dataclass(frozen=True)
class QueryKeyHeads:
    """The heads, in order, that a module's sliced query/key projections still produce (its ``QK_HEADS`` entry)."""

    heads: tuple[int, ...]
    #: V's rows and the output projection's columns were permuted kept heads first (`kept_first_layout`)
    kept_first: bool = False
    _positions: dict = field(default_factory=dict, compare=False, repr=False)

    def positions(self, kept: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """Where each of the `kept` heads sits among `heads`, as a long tensor on `device` (cached)."""
        key = (kept, device)
        found = self._positions.get(key)
        if found is None:
            found = self._positions[key] = torch.tensor([self.heads.index(h) for h in kept], dtype=torch.long,
                                                        device=device)
        return found


class _NoHeads(nn.Module):
    """Stands in for a query/key projection with no head left: a zero [B, n, d′] view, no arithmetic."""

    def __init__(self, head_dim: int):
        super().__init__()
        self.head_dim = head_dim

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        # Shaped as one head so the module's view(..., -1, d′) still works; the controller never reads it.
        return hidden_states.new_zeros(()).expand(*hidden_states.shape[:-1], self.head_dim)


def _head_features(heads: torch.Tensor, head_dim: int, device: torch.device) -> torch.Tensor:
    """The feature indices of `heads` (each head's `head_dim` consecutive features), in the heads' order."""
    return (heads[:, None] * head_dim + torch.arange(head_dim, device=heads.device)).reshape(-1).to(device)


def sliced_linear(linear: nn.Linear, heads: torch.Tensor, head_dim: int) -> nn.Module:
    """A copy of `linear` that produces only `heads` (frozen), or a zero stand-in when none is left."""
    if heads.numel() == 0:
        return _NoHeads(head_dim)
    rows = _head_features(heads, head_dim, linear.weight.device)
    out = nn.Linear(linear.in_features, rows.numel(), bias=linear.bias is not None,
                    device=linear.weight.device, dtype=linear.weight.dtype)
    with torch.no_grad():
        out.weight.copy_(linear.weight[rows])
        if linear.bias is not None:
            out.bias.copy_(linear.bias[rows])
    out.requires_grad_(False)
    return out


def permuted_columns(linear: nn.Linear, heads: torch.Tensor, head_dim: int) -> nn.Linear:
    """A frozen copy of `linear` whose input columns are those of `heads`, in that order."""
    cols = _head_features(heads, head_dim, linear.weight.device)
    out = nn.Linear(cols.numel(), linear.out_features, bias=linear.bias is not None, device=linear.weight.device,
                    dtype=linear.weight.dtype)
    with torch.no_grad():
        out.weight.copy_(linear.weight[:, cols])
        if linear.bias is not None:
            out.bias.copy_(linear.bias)
    out.requires_grad_(False)
    return out


def drop_query_key(controller) -> None:
    """Compute Q, K and Q·Kᵀ only for kept heads. Needs constants and no mixed head; the head modes must not change
    until `restore_query_key`."""
    if controller.constants is None:
        raise PapaError("drop_query_key needs constants for the replaced heads: call set_constants(...) first")
    if any(controller.plan(layer).mixed for layer in range(controller.num_layers)):
        raise PapaError("mixed heads need their own attention: drop_query_key works with 'keep' and 'replace' only")
    restore_query_key(controller)
    controller.signature  # noqa: B018 -- fingerprint the original projections before they are swapped
    for module, layers in layers_by_module(controller.info.attention_modules):
        controller.info.adapter.drop_query_key(controller, layers, module)


def restore_query_key(controller) -> None:
    """Put back the original query/key projections (no-op where nothing was dropped)."""
    for module in controller.info.attention_modules:
        undo = module.__dict__.pop(RESTORE, None)  # popped: a module run by several layers is restored once
        if undo is not None:
            undo()
            module.__dict__.pop(QK_HEADS, None)


@contextmanager
def query_key_dropped_while(controller, *, where_possible: bool = False) -> Iterator[None]:
    """`drop_query_key` for the block, `restore_query_key` after it. With `where_possible`, a model whose Q/K cannot
    be dropped (a fused QKV projection) runs the block as it is."""
    if where_possible and not controller.info.adapter.can_drop_query_key(controller.info):
        yield
        return
    drop_query_key(controller)
    try:
        yield
    finally:
        restore_query_key(controller)


def query_key_dropped(controller) -> bool:
    """Whether any layer currently runs with dropped query/key projections."""
    return any(QK_HEADS in m.__dict__ for m in controller.info.attention_modules)
