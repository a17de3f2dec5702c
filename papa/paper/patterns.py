"""Patterns of constant matrices (paper 5.1, Fig. 4): diagonal heads, heads on [CLS]/[SEP], sinks, previous-token.

The paper states no criteria; ours, per head on its constant matrix and the observation counts:

* rows: query slots that held a real, non-special token and saw at least two keys, weighted by how often
  (``counts[q, q]``), each renormalised over its observed keys as at use;
* ``special_mass``: mean mass on the special slots; **special** at >= 0.5;
* ``diagonal_share``: share of rows whose strongest non-special key is within one slot of the query; **diagonal**
  at >= 0.5 (special keys are left out so a head can be both, as in Fig. 4);
* ``spread``: mean row entropy / log(observed keys): 0 = one key, 1 = uniform;
* ``first_mass``: mean mass on slot 0; a **sink** at >= 0.5;
* ``previous_share``: share of rows whose strongest non-special key is j = i - 1; **previous** at >= 0.5.
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
    """Slots that hold special tokens in `layout` at `max_length`, read off the tokenizer."""
    from papa.method.layout import encode

    batch = encode(tokenizer, ["a"], ["b"] if pair else None, max_length=max_length, model_type=model_type,
                   layout=layout)
    ids = batch.inputs["input_ids"][0].tolist()
    special = set(tokenizer.all_special_ids) - {tokenizer.pad_token_id}
    return [slot for slot, token in enumerate(ids) if token in special]


def head_patterns(constants: ConstantMatrices, special: Sequence[int]) -> pd.DataFrame:
    """One row per (layer, head): special_mass, diagonal_share, spread, first_mass, previous_share, and the booleans
    special / diagonal / sink / previous (module doc)."""
    if constants.counts is None:
        raise InputError("pattern statistics need the observation counts: use average constants extracted by papa "
                         "(data-free kinds have no counts)")
    table = head_patterns_of(constants.matrices[None], constants.counts[None], special)
    return table.drop(columns="set")


def head_patterns_of(matrices: torch.Tensor, counts: torch.Tensor, special: Sequence[int]) -> pd.DataFrame:
    """`head_patterns` of S sets of constants at once (matrices [S, L, H, n, n], counts [S, n, n]): one row per
    (set, layer, head), the set's index in ``set``."""
    S, L, H, n, _ = matrices.shape
    bad = [s for s in special if not 0 <= s < n]
    if bad:
        raise InputError(f"special slots {bad} lie outside the constants' length {n}")
    device = matrices.device
    counts = counts.to(device, torch.float64)
    is_special = torch.zeros(n, dtype=torch.bool, device=device)
    is_special[list(special)] = True
    seen = counts > 0                                               # [S, n, n]
    kept = counts.diagonal(dim1=-2, dim2=-1)                        # [S, n]: how often each slot held a real token
    rows = (kept > 0) & ~is_special & (seen.sum(-1) >= 2)
    if not rows.any(-1).all():
        raise InputError("no content row was ever observed in these constants: the corpus held no real tokens")
    # The rows and keys any set observed; a row a set did not keep weighs 0 there, so sets need not share rows.
    slots = torch.arange(n, device=device)
    query, key = slots[rows.any(0)], slots[seen.any(0).any(0)]
    weight = torch.where(rows, kept, torch.zeros((), dtype=kept.dtype))[:, query]
    weight = (weight / weight.sum(-1, keepdim=True))[:, None, None]  # [S, 1, 1, R]
    observed = seen[:, query[:, None], key][:, None, None]          # [S, 1, 1, R, K]
    c = matrices[:, :, :, query[:, None], key].to(torch.float64)
    c = torch.where(observed, c, torch.zeros((), dtype=c.dtype))
    # Sums over keys as products with a vector: several times faster than .sum(-1) on CPU, where resamples spend time.
    ones = torch.ones(len(key), dtype=torch.float64, device=device)
    p = c / (c @ ones).clamp_min(1e-12)[..., None]                  # [S, L, H, R, K]
    special_mass = (p @ is_special[key].to(torch.float64) * weight).sum(-1)
    first = p[..., 0] if key[0] == 0 else torch.zeros_like(p[..., 0])
    first_mass = (first * weight).sum(-1)
    entropy = -(torch.special.xlogy(p, p) @ ones)
    keys = seen[:, query].sum(-1).clamp_min(2).to(torch.float64).log()[:, None, None]
    spread = (entropy / keys * weight).sum(-1)
    # the strongest non-special key (special keys left out of the argmax); c is not needed any more
    content = c.index_fill_(-1, is_special[key].nonzero().flatten(), -1.0)
    strongest = key[content.argmax(-1)]                             # [S, L, H, R]: the strongest key's slot
    local = ((strongest - query).abs() <= 1).to(torch.float64)
    diagonal_share = (local * weight).sum(-1)
    previous_share = ((strongest == query - 1).to(torch.float64) * weight).sum(-1)
    # Weighted means of values in [0, 1] can round past 1 by an ulp in float64.
    special_mass, diagonal_share, spread, first_mass, previous_share = (
        v.clamp(0.0, 1.0) for v in (special_mass, diagonal_share, spread, first_mass, previous_share))
    which, layer, head = torch.meshgrid(torch.arange(S), torch.arange(L), torch.arange(H), indexing="ij")
    columns = {"set": which, "layer": layer, "head": head, "special_mass": special_mass,
               "diagonal_share": diagonal_share, "spread": spread, "first_mass": first_mass,
               "previous_share": previous_share}
    df = pd.DataFrame({name: values.flatten().cpu().numpy() for name, values in columns.items()})
    df["special"] = df["special_mass"] >= SPECIAL_THRESHOLD
    df["diagonal"] = df["diagonal_share"] >= DIAGONAL_THRESHOLD
    df["sink"] = df["first_mass"] >= SINK_THRESHOLD
    df["previous"] = df["previous_share"] >= PREVIOUS_THRESHOLD
    return df


def pattern_summary(patterns: pd.DataFrame, by: str | None = None) -> pd.Series | pd.DataFrame:
    """Shares of heads diagonal, special, both, neither, sink and previous (where the table has them), and the
    median spread; with `by`, one row per value of that column."""
    marked = patterns.assign(both=patterns["diagonal"] & patterns["special"],
                             neither=~patterns["diagonal"] & ~patterns["special"])
    groups = marked.groupby(marked[by] if by else pd.Series(0, index=marked.index), sort=True)
    shares = {"heads": groups.size()}
    shares.update({name: groups[name].mean()
                   for name in ("diagonal", "special", "both", "neither", "sink", "previous") if name in marked})
    table = pd.DataFrame({**shares, "median_spread": groups["spread"].median()})
    if by:
        return table
    return table.iloc[0].rename(None)


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


def layer_counts(patterns: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per layer: ``heads``, how many are `column` (``marked``) and their ``share``."""
    groups = patterns.groupby("layer", sort=True)[column]
    table = pd.DataFrame({"heads": groups.size(), "marked": groups.sum().astype(int)})
    return table.assign(share=table["marked"] / table["heads"])


def layer_ranges(layers: Sequence[int]) -> str:
    """Layers as runs of three or more: ``0–11, 16, 17, 20–22``."""
    runs: list[list[int]] = []
    for layer in sorted(int(x) for x in layers):
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def by_layer_text(patterns: pd.DataFrame, column: str, name: str) -> str:
    """How `column`'s heads (called `name`) sit across layers, in words: their share, then the layers where most,
    some and none are, each with the range of its counts (``5–9 of 9``)."""
    counts = layer_counts(patterns, column)
    same = counts["heads"].nunique() == 1

    def span(group: pd.DataFrame) -> str:
        if same:
            low, high = group["marked"].min(), group["marked"].max()
            return f"{low}{'' if low == high else f'–{high}'} of {counts['heads'].iloc[0]}"
        low, high = group["share"].min(), group["share"].max()
        return f"{low:.0%}" if low == high else f"{low:.0%}–{high:.0%}"

    most = counts[counts["share"] > 0.5]
    some = counts[(counts["share"] > 0) & (counts["share"] <= 0.5)]
    groups = [f"{span(group)}{label} in layer{'s' if len(group) > 1 else ''} {layer_ranges(group.index)}"
              for label, group in ((" (a majority)", most), ("", some)) if len(group)]
    none = counts[counts["marked"] == 0]
    if len(none):
        groups.append(f"none in layer{'s' if len(none) > 1 else ''} {layer_ranges(none.index)}")
    total = counts["marked"].sum() / counts["heads"].sum()
    return f"{name}, {total:.0%} of the {counts['heads'].sum()} heads: {'; '.join(groups)}"
