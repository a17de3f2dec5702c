"""Fast paths for constant heads: their output without [B, h, n, n] tensors, and dropping their query/key work.

A replaced head's attention is its constant matrix C masked to the current input's real keys and renormalised
row-wise (`PapaController.constant_probs`). Because the mask acts on keys only,

    softmax-free output = diag(1 / (C·m)) · C · (V ⊙ m),         m = the real-key mask of one example,

so `constant_attention` masks V (n·d′ work) instead of C (n² work) and runs one GEMM per head that the whole batch
shares. The controller uses it for every replaced head, and for the constant half of mixed heads.

`drop_query_key(controller)` then makes the model attention-free where heads are replaced (paper 3.4); how depends
on the attention mechanism, so each adapter (`papa.method.adapters`) does it: AttentionInterface models slice their
query (and, without grouped keys, key) projections to the kept heads (transformers 5 has no `head_mask` /
`prune_heads`), so Q, K and Q·Kᵀ are computed only for heads that still need them; DeBERTa computes its scores
inside the attention module (with relative-position terms), so there only layers whose heads are *all* replaced
change: their attention module runs value projection + constants alone. `restore_query_key` (also run by
`papa.detach`) puts the original projections back; the model's weights are never modified.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from papa.core.errors import PapaError
from papa.method.adapters.base import layers_by_module
from papa.method.constants import ConstantHeads
from papa.method.masks import RealKeys

QK_HEADS = "_papa_qk_heads"       # module.__dict__ entry: the heads whose Q/K the projections still produce
RESTORE = "_papa_restore_qk"      # module.__dict__ entry: a callable that undoes `drop_query_key` on the module


@dataclass(frozen=True)
class QueryKeyHeads:
    """What a module's sliced query/key projections still produce (its ``module.__dict__[QK_HEADS]``): the heads,
    in order, decided on the host when Q/K were dropped."""

    heads: tuple[int, ...]
    #: V's rows and the output projection's columns were permuted kept heads first (`kept_first_layout`)
    kept_first: bool = False
    _positions: dict = field(default_factory=dict, compare=False, repr=False)

    def positions(self, kept: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """Where each of the `kept` heads sits among `heads` (the sliced Q's head axis), as a long tensor on
        `device`, made once per (kept heads, device)."""
        key = (kept, device)
        found = self._positions.get(key)
        if found is None:
            found = self._positions[key] = torch.tensor([self.heads.index(h) for h in kept], dtype=torch.long,
                                                        device=device)
        return found


def constant_attention(constants: ConstantHeads, value: torch.Tensor, keys: RealKeys | None) -> torch.Tensor:
    """Output of heads whose attention is their constants masked to real keys and renormalised row-wise.

    `value` is [B, h, n, d′], `keys` the real keys (`RealKeys`) or None (no padding). Returns [B, n, h, d′], the
    layout attention functions return (a view: the caller's reshape makes it contiguous). Rows with no mass on real
    keys give 0 (the zeros kind prunes the head).
    """
    batch, heads, n, dv = value.shape
    per_head = value.permute(1, 2, 0, 3)  # [h, n, B, d′]: every example shares C, so one GEMM per head covers the batch
    if keys is None:
        out = torch.bmm(constants.values, per_head.reshape(heads, n, batch * dv)).view(heads, n, batch, dv)
        return (out * constants.scale).permute(2, 1, 0, 3)
    if (torch.is_grad_enabled() and value.requires_grad) or torch.compiler.is_compiling():
        # out= records no gradient, and a compiled graph lays its result out as it likes
        masked = (per_head * keys.values).reshape(heads, n, batch * dv)
    else:  # the mask and the layout change in one pass over V
        masked = value.new_empty(heads, n, batch, dv)
        torch.mul(per_head, keys.values, out=masked)
        masked = masked.view(heads, n, batch * dv)
    out = torch.bmm(constants.values, masked).view(heads, n, batch, dv)
    sums = torch.mm(constants.rows, keys.columns).view(heads, n, batch, 1)
    # An empty row is already 0 (constants are non-negative and padded V is zeroed), so any positive divisor works.
    return (out / sums.clamp_min(torch.finfo(value.dtype).tiny).to(out.dtype)).permute(2, 1, 0, 3)


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
    """A copy of `linear` (frozen) whose input columns are those of `heads` in that order: fed the heads' outputs in
    that order, it computes what `linear` computes from them in the original order (summed in another order)."""
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
    """Compute Q, K and Q·Kᵀ only for kept heads (see the module doc); replaced heads become attention-free.

    Requires constants and only 'keep'/'replace' modes (mixing needs every head's attention). The head modes must
    not change until `restore_query_key`; the controller raises if they do.
    """
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
        undo = module.__dict__.get(RESTORE)
        if undo is not None:
            undo()


@contextmanager
def query_key_dropped_while(controller, *, where_possible: bool = False) -> Iterator[None]:
    """`drop_query_key` for the block, `restore_query_key` after it (also on errors). With `where_possible`, a model
    whose Q/K cannot be dropped (one fused QKV projection, as GPT-2's) runs the block as it is: its replaced heads
    skip Q·Kᵀ anyway, and the outputs are the same."""
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
