"""Running entry-wise sums of attention matrices over a corpus: the statistics behind average constants (paper 3.1).

Entry (i, j) is counted where both query and key are real tokens (and j ≤ i in a causal LM); one count matrix serves
every head. Entries never observed average to 0.
"""
from __future__ import annotations

import torch

from papa.core.errors import Arg, InputError
from papa.method.signature import ModelSignature
from papa.method.constants import ConstantMatrices, ConstantsMetadata


def launch_bound(device: torch.device) -> bool:
    """Whether kernel launches rather than arithmetic set the time of attention on `device` (not a CPU)."""
    return device.type != "cpu"


def query_weights(valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B, n] in `dtype`: 1 at the real query rows of `valid`, else 0. A real row's probabilities on padded keys are
    already 0 (masked before the softmax), so weighting the rows weights every (real query, real key) pair."""
    return valid.to(dtype)


def entry_averages(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """`sums` / `counts` entry-wise (broadcast), in `sums`' dtype; an entry with count 0 is exactly 0, never NaN."""
    return torch.where(counts > 0, sums / counts.clamp_min(1.0), torch.zeros_like(sums))


class AttentionStats:
    """Sums [L, H, N, N] and counts [N, N], accumulated in float64 so long corpora lose no precision."""

    def __init__(self, num_layers: int, num_heads: int, max_length: int, device: torch.device | str = "cpu"):
        self.max_length = max_length
        self.sums = torch.zeros(num_layers, num_heads, max_length, max_length, dtype=torch.float64, device=device)
        self.counts = torch.zeros(max_length, max_length, dtype=torch.float64, device=device)
        # A tensor, not an int: a compiled forward pass that counts examples then does not recompile for each count.
        self._examples = torch.zeros((), dtype=torch.long, device=device)
        self._views: dict = {}           # (layer, n) -> the view of `sums` that layer's blocks add to
        self._views_of = self.sums
        self._weights_of = None          # the forward pass's query weights, and their per-block forms
        self._weights: dict = {}

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
        pairs = v.t() @ v  # [n, n]: in how many examples both i and j are real
        counts = self.counts if n == self.max_length else self.counts[:n, :n]
        counts.add_(pairs.tril() if causal else pairs)
        self._examples += valid.shape[0]

    @torch.no_grad()
    def add(self, layer: int, probs: torch.Tensor, valid: torch.Tensor, heads: slice = slice(None),
            rows: slice = slice(None), *, queries: torch.Tensor | None = None) -> None:
        """Add one layer's probabilities [B, h, r, n] of `heads` and query `rows`, counted at the real positions of
        `valid` [B, n] (`queries`: `query_weights(valid)`, made once by the caller). Padded keys must have 0."""
        n = valid.shape[1]
        self._check_length(n)
        batch, h, r, _ = probs.shape
        # Σ_b w[b, i]·P[b, h, i, j]; on an accelerator one batched product that reads P once, with no temporary.
        queries = queries if queries is not None else query_weights(valid, probs.dtype)
        batched = launch_bound(probs.device)
        weights = self._query_weights(queries, h, rows, batched)
        if not batched:
            # On a CPU the product would run as h·r tiny GEMVs, 2 to 7x slower than a product and a sum.
            reduced = (probs * weights).sum(0)
        else:
            # [h·r, B, n] as a view; a compiled graph cannot read a storage offset (and fuses the permute anyway)
            pairs = (probs.as_strided((h * r, batch, n), (n, h * r * n, 1), probs.storage_offset())
                     if probs.is_contiguous() and not torch.compiler.is_compiling()
                     else probs.permute(1, 2, 0, 3).reshape(h * r, batch, n))
            reduced = torch.bmm(weights, pairs)  # [h·r, 1, n]
            flat = self._flat_layer(layer, n, h, r)
            if flat is not None:
                flat.add_(reduced)
                return
            reduced = reduced.view(h, r, n)
        self._block(layer, n, heads, rows).add_(reduced)

    def _query_weights(self, queries: torch.Tensor, heads: int, rows: slice, batched: bool) -> torch.Tensor:
        """`queries` [B, n] of `rows` as [B, 1, r, 1], or (`batched`) as [heads·r, 1, B]; cached per pass and shape."""
        compiling = torch.compiler.is_compiling()  # a compiled graph makes it once anyway, and must not guard on it
        if self._weights_of is not queries and not compiling:
            self._weights_of, self._weights = queries, {}
        key = (batched, heads if batched else None, rows.start, rows.stop)
        made = None if compiling else self._weights.get(key)
        if made is None:
            w = queries if rows.start in (0, None) and rows.stop in (None, queries.shape[1]) else queries[:, rows]
            if batched:
                w = w.t()
                made = w.expand(heads, *w.shape).reshape(-1, 1, w.shape[1])
            else:
                made = w[:, None, :, None]
            if not compiling:
                self._weights[key] = made
        return made

    def _block(self, layer: int, n: int, heads: slice, rows: slice) -> torch.Tensor:
        """The sums of a block of `heads` and query `rows` at length `n` of `layer`, as a (cached) view."""
        if torch.compiler.is_compiling():  # a new capture must not recompile the graph for its own views
            view = self.sums[layer, :, :n, :n]
        else:
            if self._views_of is not self.sums:  # `sums` was replaced (moved to the host when a capture ended)
                self._views_of, self._views = self.sums, {}
            view = self._views.get((layer, n))
            if view is None:
                view = self._views[layer, n] = self.sums[layer, :, :n, :n]
        whole = heads == slice(None) or (heads.start in (0, None) and heads.stop in (None, view.shape[0]))
        if whole and (rows == slice(None) or (rows.start in (0, None) and rows.stop in (None, n))):
            return view
        return view[heads, rows]

    def _flat_layer(self, layer: int, n: int, heads: int, rows: int) -> torch.Tensor | None:
        """`layer`'s sums at length `n` as [H·n, 1, n] where the block is the whole, contiguous layer; else None."""
        if torch.compiler.is_compiling() or rows != n:
            return None
        view = self._block(layer, n, slice(None), slice(None))
        if heads != view.shape[0] or not view.is_contiguous():
            return None
        key = (layer, n, "flat")
        flat = self._views.get(key)
        if flat is None:
            flat = self._views[key] = view.view(-1, 1, n)
        return flat

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
