"""The output of constant heads, without [B, h, n, n] tensors.

A replaced head's attention is its constant matrix C masked to the current input's real keys and renormalised
row-wise (`PapaController.constant_probs`, paper 3.3). Because the mask acts on keys only,

    output = diag(1 / (C·m)) · C · (V ⊙ m),         m = the real-key mask of one example,

so `constant_attention` masks V (n·d′ work) instead of C (n² work), and one GEMM per head that the whole batch shares
gives both C·(V ⊙ m) and the row sums C·m, the mask riding along as one more column of V (`ConstantWorkspace`). The
controller uses it for every replaced head, and for the constant half of mixed heads: `ConstantHeads` are the
constants prepared once per head configuration, `ConstantWorkspace` the buffers kept across layers and passes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ConstantHeads:
    """Some heads' constants of one layer as `constant_attention` uses them, prepared once per head configuration,
    length and dtype rather than in every forward pass (`PapaController.constant_heads`).

    `weights` [h, n, n + 1] in the values' dtype: the constants and one more key column holding the dtype's smallest
    normal number (`floor`). `constant_attention` gives that extra key V = 0 and mask 1, so in its one product the
    column adds nothing to a numerator and keeps every row sum above 0: a row with no mass on an example's real keys
    gives 0 (the zeros kind prunes the head) without a clamp, and a row sum the floor cannot change in the dtype
    (any above about 1e-30 in float32 and bfloat16; in float16 the floor is 6e-5) comes out as it was."""

    weights: torch.Tensor

    @property
    def values(self) -> torch.Tensor:
        """The constants [h, n, n] (a view)."""
        return self.weights[..., :-1]

    @property
    def floor(self) -> torch.Tensor:
        """The extra key's column [h, n, 1] (a view)."""
        return self.weights[..., -1:]

    @classmethod
    def of(cls, constants: torch.Tensor, dtype: torch.dtype) -> "ConstantHeads":
        """From `constants` [h, n, n] (already masked by any pattern the batch shares) for values of `dtype`."""
        heads, n, _ = constants.shape
        floor = torch.full((heads, n, 1), torch.finfo(dtype).tiny, dtype=dtype, device=constants.device)
        return cls(weights=torch.cat((constants.to(dtype), floor), dim=-1))


class ConstantWorkspace:
    """Where `constant_attention` lays out V and reads its product, kept for every layer and forward pass of one
    batch size, length, head size, dtype and device (`PapaController.workspace`): a layer then adds no allocation,
    copy or view op for them, only its mask-and-lay-out of V, one product and one division.

    `inputs` [H, n + 1, B, d′ + 1]: for each head, row j < n holds every example's V of key j (zeroed where the key is
    padding) and, in the last column, the real-key mask; row n is the extra key of `ConstantHeads.weights`' last
    column (V = 0, mask 1). So one product with the constants gives each query row's numerator and its sum over the
    real keys (`outputs` [H, n, B, d′ + 1]). Each pass's real keys are written once (`load`); a layer writes its
    heads' V, and reads the result, within its own call, so layers and passes run one after another over it."""

    def __init__(self, heads: int, n: int, batch: int, dv: int, dtype: torch.dtype, device: torch.device):
        self.inputs = torch.zeros(heads, n + 1, batch, dv + 1, dtype=dtype, device=device)
        self.inputs[:, n, :, dv] = 1.0
        self.outputs = torch.empty(heads, n, batch, dv + 1, dtype=dtype, device=device)
        self.mask = self.inputs[:1, :n, :, dv:]                     # [1, n, B, 1]: V's multiplier
        self._mask_rows = self.inputs[:, :n, :, dv].permute(0, 2, 1)  # [H, B, n]: where `load` writes the keys
        self._loaded: object = self
        self._views: dict[int, tuple[torch.Tensor, ...]] = {}

    def load(self, keys: torch.Tensor | None) -> None:
        """Write the real keys `keys` ([B or 1, n] bool; None: every key) into the mask column, unless it holds
        them already (one op per pass; `forget` at a pass's start)."""
        if keys is not self._loaded:
            if keys is None:
                self._mask_rows.fill_(1.0)
            else:
                self._mask_rows.copy_(keys)
            self._loaded = keys

    def forget(self) -> None:
        """Take the mask column as stale (a new pass may bring new keys in the same tensor)."""
        self._loaded = self

    def views(self, heads: int) -> tuple[torch.Tensor, ...]:
        """For the first `heads` heads: (V's place [h, n, B, d′], the product's right side [h, n + 1, B·(d′ + 1)]
        and result [h, n, B·(d′ + 1)], the numerators [h, n, B, d′] and row sums [h, n, B, 1]), made once."""
        made = self._views.get(heads)
        if made is None:
            _, rows, batch, width = self.inputs.shape
            n, dv = rows - 1, width - 1
            inputs, outputs = self.inputs[:heads], self.outputs[:heads]
            made = self._views[heads] = (inputs[:, :n, :, :dv], inputs.view(heads, rows, batch * width),
                                         outputs.view(heads, n, batch * width), outputs[..., :dv], outputs[..., dv:])
        return made


def constant_attention(constants: ConstantHeads, value: torch.Tensor, keys: torch.Tensor | None,
                       workspace: ConstantWorkspace | None = None) -> torch.Tensor:
    """Output of heads whose attention is their constants masked to real keys and renormalised row-wise.

    `value` is [B, h, n, d′], `keys` the real keys [B or 1, n] (bool) or None (no padding), `workspace` the buffers of
    this shape (`PapaController.workspace`; None: allocate, as under autograd or compilation, which this path then
    takes). Returns [B, n, h, d′], the layout attention functions return (a view: the caller's reshape makes it
    contiguous). Rows with no mass on real keys give 0 (the zeros kind prunes the head).
    """
    batch, heads, n, dv = value.shape
    per_head = value.permute(1, 2, 0, 3)  # [h, n, B, d′]: every example shares C, so one GEMM per head covers the batch
    if workspace is None or (torch.is_grad_enabled() and (value.requires_grad or constants.weights.requires_grad)):
        # out= records no gradient, and a compiled graph lays its tensors out as it likes
        m = per_head.new_ones(n, batch) if keys is None else keys.expand(batch, n).t().to(value.dtype)
        masked = (per_head * m[None, :, :, None]).reshape(heads, n, batch * dv)
        out = torch.bmm(constants.values, masked).view(heads, n, batch, dv)
        sums = torch.matmul(constants.values, m) + constants.floor      # [h, n, B], as the extra key adds it
        return (out / sums[..., None]).permute(2, 1, 0, 3)
    workspace.load(keys)
    v, rhs, product, numerators, sums = workspace.views(heads)
    torch.mul(per_head, workspace.mask, out=v)  # the mask and the layout change in one pass over V
    torch.bmm(constants.weights, rhs, out=product)
    return (numerators / sums).permute(2, 1, 0, 3)
