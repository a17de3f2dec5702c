"""Running entry-wise sums of attention matrices over a corpus: the statistics behind average constants (paper 3.1).

Only entries whose query *and* key are real (non-pad) tokens are counted. One count matrix serves every head,
because every head of a forward pass sees the same padding; the average of entry (i, j) is its sum over the
corpus divided by the number of examples in which both i and j were real tokens. Entries never observed are 0.
In a causal LM row i sees keys 0..i only: entries above the diagonal are never attended, so they are not counted
(count 0, average 0).
"""
from __future__ import annotations

import torch

from papa.core.errors import Arg, InputError
from papa.method.signature import ModelSignature
from papa.method.constants import ConstantMatrices, ConstantsMetadata


def pair_weights(valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B, 1, n, n]: 1 where query and key are both real tokens of `valid` [B, n], else 0."""
    v = valid.to(dtype)
    return (v[:, :, None] * v[:, None, :])[:, None]


def entry_averages(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """`sums` / `counts` entry-wise (`counts` broadcast against `sums`), in `sums`' dtype: an entry never observed
    (count 0) is exactly 0, never NaN. The one rule by which average constants are made from their statistics
    (also for recombined statistics: `papa.paper.pattern_intervals`)."""
    return torch.where(counts > 0, sums / counts.clamp_min(1.0), torch.zeros_like(sums))


class AttentionStats:
    """Sums [L, H, N, N] and counts [N, N], accumulated in float64 so long corpora lose no precision."""

    def __init__(self, num_layers: int, num_heads: int, max_length: int, device: torch.device | str = "cpu"):
        self.max_length = max_length
        self.sums = torch.zeros(num_layers, num_heads, max_length, max_length, dtype=torch.float64, device=device)
        self.counts = torch.zeros(max_length, max_length, dtype=torch.float64, device=device)
        # A tensor, not an int: a compiled forward pass that counts examples then does not recompile for each count.
        self._examples = torch.zeros((), dtype=torch.long, device=device)

    @property
    def num_examples(self) -> int:
        """How many examples were counted."""
        return int(self._examples)

    @num_examples.setter
    def num_examples(self, value: int) -> None:
        self._examples.fill_(int(value))

    def _check_length(self, n: int) -> None:
        if n > self.max_length:
            given, larger = Arg("max_length", self.max_length), Arg("max_length")
            raise InputError(
                f"input has {n} positions but attention statistics are collected at {given}: encode the corpus at "
                f"{self.max_length} (papa.method.layout) or extract with a larger {larger}", advice=(given, larger))

    @torch.no_grad()
    def add_counts(self, valid: torch.Tensor, causal: bool = False) -> None:
        """Count one forward pass: `valid` [B, n] is True at real tokens; `causal`: query i sees keys 0..i only."""
        n = valid.shape[1]
        self._check_length(n)
        v = valid.to(self.counts.dtype)
        pairs = torch.einsum("bi,bj->ij", v, v)
        self.counts[:n, :n] += pairs.tril() if causal else pairs
        self._examples += valid.shape[0]

    @torch.no_grad()
    def add(self, layer: int, probs: torch.Tensor, valid: torch.Tensor, heads: slice = slice(None),
            rows: slice = slice(None), *, pairs: torch.Tensor | None = None) -> None:
        """Add one layer's attention probabilities [B, h, r, n] of `heads` and query `rows` (all by default), masked
        to real query and key positions (`valid` [B, n]; `pairs`: `pair_weights(valid)`, when the caller made them
        once for many blocks)."""
        n = valid.shape[1]
        self._check_length(n)
        pair = (pairs if pairs is not None else pair_weights(valid, probs.dtype))[:, :, rows]  # [B, 1, r, n]
        # Reduce over the batch in the working precision, then accumulate in float64 (add_ promotes in place). A
        # product and a sum, not a three-operand einsum: torch runs that einsum as a permuted bmm, ~9x slower on CPU.
        self.sums[layer, heads, :n][:, rows, :n].add_((probs * pair).sum(0))

    def merge_(self, other: "AttentionStats") -> "AttentionStats":
        """Add another accumulator's statistics into this one (e.g. from another process)."""
        if other.sums.shape != self.sums.shape:
            raise ValueError(f"cannot merge statistics of shape {tuple(other.sums.shape)} into {tuple(self.sums.shape)}")
        self.sums += other.sums.to(self.sums.device)
        self.counts += other.counts.to(self.counts.device)
        self.num_examples += other.num_examples
        return self

    def averages(self) -> torch.Tensor:
        """Entry-wise averages [L, H, N, N] as float32; unobserved entries are exactly 0, never NaN."""
        return entry_averages(self.sums, self.counts).float().cpu()

    def to_constants(self, signature: ModelSignature, *, layout: str, corpus: str = "", corpus_fingerprint: str = "",
                     preprocessing: str = "", pairs: bool = False) -> ConstantMatrices:
        """Package the averages as `ConstantMatrices` of kind ``average``."""
        if self.num_examples == 0:
            raise InputError("no examples were seen: the corpus is empty, so there is nothing to average.")
        meta = ConstantsMetadata(
            kind="average", model=signature, max_length=self.max_length, layout=layout, corpus=corpus,
            corpus_fingerprint=corpus_fingerprint, num_examples=self.num_examples, preprocessing=preprocessing,
            pairs=pairs,
        )
        return ConstantMatrices(matrices=self.averages(), metadata=meta, counts=self.counts.cpu())
