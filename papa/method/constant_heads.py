"""The output of constant heads, without [B, h, n, n] tensors.

A constant C masked to an example's real keys m and renormalised row-wise gives

    output = diag(1 / (C·m)) · C · (V ⊙ m),

so one GEMM per head, shared by the batch, yields both C·(V ⊙ m) and the row sums C·m (m as one more column of V).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ConstantHeads:
    """Some heads' constants of one layer, prepared for `constant_attention`.

    `weights` [h, n, n + 1]: the constants and an extra key column holding the dtype's smallest normal number
    (`floor`), which keeps every row sum above 0, so that a row with no mass on real keys gives 0 without a clamp."""

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
    """The buffers `constant_attention` lays V out in and reads its product from, reused by every layer and pass of
    one shape, dtype and device.

    `inputs` [H, n + 1, B, d′ + 1]: row j < n holds each example's masked V of key j and, last, the real-key mask;
    row n is the extra key (V = 0, mask 1). `outputs` [H, n, B, d′ + 1]: numerators and row sums."""

    def __init__(self, heads: int, n: int, batch: int, dv: int, dtype: torch.dtype, device: torch.device):
        self.inputs = torch.zeros(heads, n + 1, batch, dv + 1, dtype=dtype, device=device)
        self.inputs[:, n, :, dv] = 1.0
        self.outputs = torch.empty(heads, n, batch, dv + 1, dtype=dtype, device=device)
        self.mask = self.inputs[:1, :n, :, dv:]                     # [1, n, B, 1]: V's multiplier
        self._mask_rows = self.inputs[:, :n, :, dv].permute(0, 2, 1)  # [H, B, n]: where `load` writes the keys
        self._loaded: object = self
        self._views: dict[int, tuple[torch.Tensor, ...]] = {}

    def load(self, keys: torch.Tensor | None) -> None:
        """Write the real keys `keys` ([B or 1, n] bool; None: every key) into the mask column unless already there."""
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
    """Output [B, n, h, d′] (a view) of heads whose attention is their constants masked to real keys and renormalised
    row-wise; `value` [B, h, n, d′], `keys` [B or 1, n] bool or None. Rows with no mass on real keys give 0. Without
    `workspace` (or under autograd) it allocates."""
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
