"""Patterns of constant matrices (paper 5.1, Fig. 4): which heads are diagonal, which look at [CLS]/[SEP], and in
decoders which are attention sinks or previous-token heads.

The paper reports that about 90% of the constant matrices show a diagonal pattern (each token mostly attends to
itself or its neighbours) and that about 40% put most of their mass on [CLS] and/or [SEP], without stating the
criteria. These are ours, computed per head on its constant matrix C [n, n] and the observation counts:

* Rows: the query slots that held a real, non-special token in at least one corpus example and saw at least two
  keys (a decoder's first row sees only itself), each weighted by how often it did (``counts[q, q]``). Each row is
  renormalised over its observed keys, as at use (paper footnote 8).
* ``special_mass``: the weighted mean mass a row puts on the special slots ([CLS], the final [SEP] and, for pairs,
  the middle separator). A head is **special** when it is at least 0.5: most of its mass goes to those tokens.
* ``diagonal_share``: the weighted share of rows whose strongest *non-special* key is the query itself or a direct
  neighbour (|i - j| <= 1). A head is **diagonal** when that holds for at least half of its rows. Special keys are
  left out of the argmax so that a head can be both special and diagonal, as in the paper's Fig. 4.
* ``spread``: the weighted mean row entropy divided by log(number of observed keys): 0 = one key, 1 = uniform.
* ``first_mass``: the weighted mean mass a row puts on slot 0, the first token. A head is a **sink** when it is at
  least 0.5 (an attention sink, common in causal LMs, where every row sees the first token). In an encoder slot 0
  is [CLS], so there a sink is also special.
* ``previous_share``: the weighted share of rows whose strongest non-special key is the token just before the
  query (j = i - 1). A head is **previous-token** when that holds for at least half of its rows; such a head is
  diagonal too (|i - j| <= 1).
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from papa.core.errors import InputError
from papa.method.constants import ConstantMatrices

DIAGONAL_THRESHOLD = 0.5
SPECIAL_THRESHOLD = 0.5
SINK_THRESHOLD = 0.5
PREVIOUS_THRESHOLD = 0.5


def special_slots(tokenizer, max_length: int, *, pair: bool, model_type: str, layout: str = "sep_last") -> list[int]:
    """Slots that hold special tokens in `layout` at `max_length`, learnt from the tokenizer itself."""
    from papa.method.layout import encode

    batch = encode(tokenizer, ["a"], ["b"] if pair else None, max_length=max_length, model_type=model_type,
                   layout=layout)
    ids = batch.inputs["input_ids"][0].tolist()
    special = set(tokenizer.all_special_ids) - {tokenizer.pad_token_id}
    return [slot for slot, token in enumerate(ids) if token in special]


def head_patterns(constants: ConstantMatrices, special: Sequence[int]) -> pd.DataFrame:
    """One row per (layer, head): special_mass, diagonal_share, spread, first_mass, previous_share, and the booleans
    special / diagonal / sink / previous (module doc)."""
    n = constants.max_length
    if constants.counts is None:
        raise InputError("pattern statistics need the observation counts: use average constants extracted by papa "
                         "(data-free kinds have no counts)")
    bad = [s for s in special if not 0 <= s < n]
    if bad:
        raise InputError(f"special slots {bad} lie outside the constants' length {n}")
    counts = constants.counts.to(torch.float64)
    is_special = torch.zeros(n, dtype=torch.bool)
    is_special[list(special)] = True
    rows = (counts.diagonal() > 0) & ~is_special & ((counts > 0).sum(-1) >= 2)
    if not rows.any():
        raise InputError("no content row was ever observed in these constants: the corpus held no real tokens")
    weight = counts.diagonal()[rows]
    weight = weight / weight.sum()
    observed = counts[rows] > 0                                     # [R, n]
    c = constants.matrices.to(torch.float64)[:, :, rows]            # [L, H, R, n]
    c = torch.where(observed, c, torch.zeros((), dtype=c.dtype))
    p = c / c.sum(-1, keepdim=True).clamp_min(1e-12)
    special_mass = (p[..., is_special].sum(-1) * weight).sum(-1)
    content = p.masked_fill(is_special, -1.0)                       # leave special keys out of the argmax
    query = torch.arange(n)[rows]
    strongest = content.argmax(-1)
    local = ((strongest - query).abs() <= 1).to(torch.float64)
    diagonal_share = (local * weight).sum(-1)
    previous_share = ((strongest == query - 1).to(torch.float64) * weight).sum(-1)
    first_mass = (p[..., 0] * weight).sum(-1)
    entropy = -(p * p.clamp_min(1e-12).log()).sum(-1)
    spread = (entropy / observed.sum(-1).clamp_min(2).log() * weight).sum(-1)
    L, H = constants.num_layers, constants.num_heads
    layer, head = torch.meshgrid(torch.arange(L), torch.arange(H), indexing="ij")
    df = pd.DataFrame({"layer": layer.flatten().numpy(), "head": head.flatten().numpy(),
                       "special_mass": special_mass.flatten().numpy(),
                       "diagonal_share": diagonal_share.flatten().numpy(), "spread": spread.flatten().numpy(),
                       "first_mass": first_mass.flatten().numpy(), "previous_share": previous_share.flatten().numpy()})
    df["special"] = df["special_mass"] >= SPECIAL_THRESHOLD
    df["diagonal"] = df["diagonal_share"] >= DIAGONAL_THRESHOLD
    df["sink"] = df["first_mass"] >= SINK_THRESHOLD
    df["previous"] = df["previous_share"] >= PREVIOUS_THRESHOLD
    return df


def pattern_summary(patterns: pd.DataFrame) -> pd.Series:
    """Shares of heads that are diagonal, special, both, neither (Fig. 4's), sinks and previous-token heads (when the
    table has them: tables saved before those criteria do not); and the median spread."""
    shares = {
        "heads": len(patterns),
        "diagonal": patterns["diagonal"].mean(),
        "special": patterns["special"].mean(),
        "both": (patterns["diagonal"] & patterns["special"]).mean(),
        "neither": (~patterns["diagonal"] & ~patterns["special"]).mean(),
    }
    shares.update({name: patterns[name].mean() for name in ("sink", "previous") if name in patterns})
    return pd.Series({**shares, "median_spread": patterns["spread"].median()})


def representative_heads(patterns: pd.DataFrame, k: int = 6) -> list[tuple[int, int]]:
    """`k` distinct heads that show the range of patterns: most diagonal, most special, most spread, then mixes."""
    picks: list[tuple[int, int]] = []
    orders = [patterns.sort_values("diagonal_share", ascending=False, kind="stable"),
              patterns.sort_values("special_mass", ascending=False, kind="stable"),
              patterns.sort_values("spread", ascending=False, kind="stable"),
              patterns.assign(score=patterns.diagonal_share * patterns.special_mass)
                      .sort_values("score", ascending=False, kind="stable"),
              patterns.sort_values("spread", kind="stable"),
              patterns.sort_values(["layer", "head"], kind="stable")]
    while len(picks) < min(k, len(patterns)):
        for order in orders:
            for row in order.itertuples():
                head = (int(row.layer), int(row.head))
                if head not in picks:
                    picks.append(head)
                    break
            if len(picks) >= k:
                break
    return picks
