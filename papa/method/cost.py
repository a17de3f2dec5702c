"""Theoretical cost of attention with and without input-dependent heads (paper 3.4), in multiply-accumulates.

Section 3.4: a head costs 2n²d' + 3nd'² with input-dependent attention (QKᵀ, AV and the Q, K, V projections) and
n²d' + nd'² with a constant matrix (only V and CV remain). That ratio ignores the rest of the layer, so
`model_speedup_ceiling` also counts the output projection and the feed-forward block, which constant heads do not
touch: the whole-model ratio is the real ceiling of an attention-free model's speed-up.
"""
from __future__ import annotations

from dataclasses import dataclass


def head_cost(n: int, head_dim: int, *, constant: bool) -> int:
    """Paper 3.4: MACs of one head on n tokens, 2n²d' + 3nd'² (input-dependent) or n²d' + nd'² (constant)."""
    if constant:
        return n * n * head_dim + n * head_dim * head_dim
    return 2 * n * n * head_dim + 3 * n * head_dim * head_dim


def head_speedup(n: int, head_dim: int) -> float:
    """The head-level ratio of section 3.4."""
    return head_cost(n, head_dim, constant=False) / head_cost(n, head_dim, constant=True)


@dataclass(frozen=True)
class LayerCost:
    """MACs of one encoder layer on one sequence of n tokens, split by part."""

    qk_projections: int
    v_projection: int
    scores: int          # QKᵀ
    mixing: int          # AV (or CV)
    output: int
    feed_forward: int

    @property
    def total(self) -> int:
        return (self.qk_projections + self.v_projection + self.scores + self.mixing + self.output
                + self.feed_forward)


def layer_cost(n: int, hidden: int, intermediate: int, *, replaced_share: float = 0.0) -> LayerCost:
    """MACs of one layer when `replaced_share` of its heads are constant (their Q/K projections and QKᵀ dropped)."""
    if not 0.0 <= replaced_share <= 1.0:
        raise ValueError(f"replaced_share is a share of heads in [0, 1], got {replaced_share}")
    kept = 1.0 - replaced_share
    return LayerCost(qk_projections=round(2 * n * hidden * hidden * kept), v_projection=n * hidden * hidden,
                     scores=round(n * n * hidden * kept), mixing=n * n * hidden, output=n * hidden * hidden,
                     feed_forward=2 * n * hidden * intermediate)


def model_speedup_ceiling(n: int, hidden: int, intermediate: int, *, replaced_share: float = 1.0) -> float:
    """Whole-model MAC ratio original / with `replaced_share` of heads constant (every layer alike)."""
    return layer_cost(n, hidden, intermediate).total / layer_cost(n, hidden, intermediate,
                                                                  replaced_share=replaced_share).total


def config_speedups(config, n: int) -> dict[str, float]:
    """Both ratios for a transformers config (``hidden_size``, ``num_attention_heads``, ``intermediate_size``)."""
    head_dim = config.hidden_size // config.num_attention_heads
    return {"head_speedup": head_speedup(n, head_dim),
            "model_speedup_ceiling": model_speedup_ceiling(n, config.hidden_size, config.intermediate_size)}


def median_seconds(fn, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of `fn()` over `repeats` calls, after `warmup` untimed ones."""
    import time

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def forward_timings(model, inputs: dict, constants, *, repeats: int = 5):
    """Measured forward time of `model` on `inputs`: original, every head constant, and every head constant with
    its query/key projections dropped (attention-free). A quick look; `benchmarks/` measures with care."""
    import pandas as pd
    import torch

    from papa.method.attention_free import drop_query_key
    from papa.method.controller import attach, detach

    rows = {}
    with torch.no_grad():
        rows["original"] = median_seconds(lambda: model(**inputs), repeats)
        ctrl = attach(model, constants)
        try:
            ctrl.replace()
            rows["all heads constant"] = median_seconds(lambda: model(**inputs), repeats)
            drop_query_key(ctrl)
            rows["attention-free (Q/K dropped)"] = median_seconds(lambda: model(**inputs), repeats)
        finally:
            detach(model)
    table = pd.DataFrame({"seconds": rows})
    table["speed-up"] = table.loc["original", "seconds"] / table["seconds"]
    return table
