"""What an attention mask allows, as the attention function received it, and softmax attention under it.

`Allowed` describes any form transformers passes (None, a 2D key mask, a 4D bool or additive mask), mostly as
``pattern[i, j] & keys[b, j]``: a pattern shared by the batch (causal, sliding window) and its padding.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from papa.core.errors import InputError


@dataclass(frozen=True)
class Allowed:
    """Which keys each query may attend to: ``pattern & keys``, or ``dense`` where the mask does not factor."""

    pattern: torch.Tensor | None = None   # [q, k] bool shared by the batch; None: every pair
    keys: torch.Tensor | None = None      # [B, k] bool (real keys); None: every key
    dense: torch.Tensor | None = None     # [B or 1, 1, q, k] bool; set only when the mask does not factor

    @property
    def factored(self) -> bool:
        return self.dense is None

    def as_bool(self, rows: slice | None = None) -> torch.Tensor | None:
        """The mask of query `rows` (None: all) as a bool tensor broadcastable to [B, h, r, k]; None when everything
        is allowed."""
        # No slice object as a default: torch 2.11's compiler cannot trace a constant slice it did not see made.
        if self.dense is not None:
            return self.dense if rows is None else self.dense[:, :, rows]
        m = None
        if self.pattern is not None:
            m = (self.pattern if rows is None else self.pattern[rows])[None, None]
        if self.keys is not None:
            k = self.keys[:, None, None, :]
            m = k if m is None else m & k
        return m

    @classmethod
    def from_keys(cls, keys: torch.Tensor | None) -> "Allowed":
        """Padding only: every query may attend to every real key."""
        return cls(keys=None if keys is None else keys.bool())

    @classmethod
    def from_mask(cls, mask: torch.Tensor | None, q: int, k: int, *, causal: bool) -> "Allowed":
        """Describe `mask` as an attention function receives it (None: only `causal` decides, as sdpa does)."""
        if mask is None:
            return cls(pattern=_causal(q, k, None) if causal else None)
        if mask.dim() == 2:  # [B, k] key mask (flash-attention implementations)
            return cls(pattern=_causal(q, k, mask.device) if causal else None, keys=mask.bool())
        allowed = _allowed_4d(mask, k)
        if allowed.shape[1] != 1:  # per-head masks
            return cls(dense=allowed)
        a = allowed[:, 0]                                        # [B, q, k]
        keys = a.any(dim=1)                                      # a key is real if some query may see it
        pattern = (a | ~keys[:, None, :]).all(dim=0)             # what every batch row allows among its real keys
        if not torch.equal(a, pattern[None] & keys[:, None, :]):
            return cls(dense=allowed)
        return cls(pattern=None if bool(pattern.all()) else pattern, keys=None if bool(keys.all()) else keys)

    @classmethod
    def from_padding_mask(cls, mask: torch.Tensor | None, q: int, k: int, *, causal: bool, windowed: bool = False,
                          padded: bool = True) -> "Allowed":
        """`from_mask` for a mask transformers derived from the 2D padding mask (`padded`; False: none was passed):
        described from `causal` and `windowed` without a host read, and asserted on the device to factor."""
        if mask is None or mask.dim() == 2:
            return cls.from_mask(mask, q, k, causal=causal)  # decided from shapes and flags alone
        allowed = _allowed_4d(mask, k)
        if allowed.shape[1] != 1:
            return cls(dense=allowed)
        a = allowed[:, 0]                                                      # [B, q, k]
        if causal or windowed:
            keys = a.any(dim=1) if padded else None                           # a key is real if some query sees it
            pattern = (a if keys is None else a | ~keys[:, None, :]).all(dim=0)
            described = cls(pattern=pattern, keys=keys)
            factors = a == described.as_bool()[:, 0]
        else:  # the padding alone: every query row allows the same keys, the real ones
            described = cls(keys=a[:, 0] if padded else None)
            factors = a == a[:, :1] if padded else a
        torch._assert_async(factors.all(),
                            "papa: an attention mask built from the padding mask does not factor into the padding and "
                            "a pattern shared by the batch (e.g. packed sequences): call the model with a 4D mask")
        return described


def _allowed_4d(mask: torch.Tensor, k: int) -> torch.Tensor:
    """A 4D bool or additive mask as bool [B, 1 or h, q, k] (True: may attend), its keys cut to `k`."""
    if mask.dim() != 4:
        raise InputError(f"attention masks are 2D [batch, n] or 4D [batch, 1, q, k]; got shape {tuple(mask.shape)}")
    allowed = mask if mask.dtype == torch.bool else mask > -1.0
    return allowed if allowed.shape[-1] == k else allowed[..., :k]  # as eager_attention_forward slices a longer mask


def _causal(q: int, k: int, device) -> torch.Tensor:
    """Query i (the last q of k positions) sees keys up to its own position."""
    return torch.ones(q, k, dtype=torch.bool, device=device).tril(diagonal=k - q)


def padding_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """[B, n] bool of real tokens from a 2D mask, or a 4D bool/additive one (a key any query may attend to)."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return mask.bool()
    return _allowed_4d(mask, mask.shape[-1]).any(dim=1).any(dim=1)


def attention_probs(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None,
                    scaling: float | None) -> torch.Tensor:
    """softmax(Q·Kᵀ·scaling + mask), as the eager implementations compute it; `mask` is additive or bool."""
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    # In place on the fresh scores tensor: matmul's backward needs Q and K, not its output.
    scores = torch.matmul(query, key.transpose(2, 3)).mul_(scaling)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        else:
            scores.add_(mask)
    return nn.functional.softmax(scores, dim=-1)
