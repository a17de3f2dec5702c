"""Theoretical cost of attention with and without input-dependent heads (paper 3.4), in multiply-accumulates.

A head costs 2n²d' + 3nd'² with input-dependent attention and n²d' + nd'² with a constant matrix; the whole-model
ceiling also counts the output projection, the feed-forward block (`GATED_MLP`: 3 matrices) and optionally the LM
head, which constant heads do not touch. A constant head drops its Q projection and QKᵀ; a key/value head drops K
when all the query heads it serves are constant (``kv_replaced_share``). Element-wise work is not counted.

Every product counts n² pairs by default (what papa's C·V and a masked dense kernel compute);
``triangular=True`` counts n(n+1)/2 for causal models on both sides.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

#: model types whose feed-forward block is gated (3 matrices of hidden x intermediate); any other counts 2.
GATED_MLP = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo",
                       "olmo2", "granite", "cohere", "stablelm", "smollm3", "modernbert"})


def head_cost(n: int, head_dim: int, *, constant: bool) -> int:
    """Paper 3.4: MACs of one head on n tokens, 2n²d' + 3nd'² (input-dependent) or n²d' + nd'² (constant)."""
    if constant:
        return n * n * head_dim + n * head_dim * head_dim
    return 2 * n * n * head_dim + 3 * n * head_dim * head_dim


def head_speedup(n: int, head_dim: int) -> float:
    """The head-level ratio of section 3.4."""
    return head_cost(n, head_dim, constant=False) / head_cost(n, head_dim, constant=True)


@dataclass(frozen=True)
class ModelShape:
    """What the MAC counts need from a config (`model_shape`)."""

    hidden: int
    intermediate: int
    num_layers: int
    num_heads: int
    head_dim: int
    num_kv_heads: int
    mlp_matrices: int = 2     # 2: up and down (BERT, GPT-2); 3: gated (gate, up, down)
    vocab: int = 0            # rows of the LM head, counted only with lm_head=True
    causal: bool = False

    @property
    def attention_width(self) -> int:
        """Width of the queries (and of the attention output): num_heads x head_dim."""
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of the keys and values: num_kv_heads x head_dim."""
        return self.num_kv_heads * self.head_dim


def encoder_shape(hidden: int, intermediate: int, num_layers: int = 1) -> ModelShape:
    """A BERT-like layer: Q, K, V and the output hidden x hidden, a 2-matrix feed-forward block."""
    return ModelShape(hidden=hidden, intermediate=intermediate, num_layers=num_layers, num_heads=1, head_dim=hidden,
                      num_kv_heads=1)


def model_shape(config) -> ModelShape:
    """The `ModelShape` of a transformers config (missing fields defaulted: one key/value head per query head,
    head_dim hidden / heads, feed-forward width 4 x hidden)."""
    from papa.method.architectures import is_causal

    hidden = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    intermediate = (getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None)
                    or getattr(config, "hidden_dim", None) or 4 * hidden)
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not share {kv_heads} key/value heads evenly")
    return ModelShape(hidden=hidden, intermediate=int(intermediate), num_layers=int(config.num_hidden_layers),
                      num_heads=heads, head_dim=int(head_dim), num_kv_heads=int(kv_heads),
                      mlp_matrices=3 if getattr(config, "model_type", None) in GATED_MLP else 2,
                      vocab=int(getattr(config, "vocab_size", 0) or 0), causal=is_causal(config))


def _shape(shape_or_config) -> ModelShape:
    return shape_or_config if isinstance(shape_or_config, ModelShape) else model_shape(shape_or_config)


@dataclass(frozen=True)
class LayerCost:
    """MACs of one layer on one sequence of n tokens, split by part."""

    qk_projections: int  # Q and K
    v_projection: int
    scores: int          # QKᵀ
    mixing: int          # AV (or CV)
    output: int
    feed_forward: int

    @property
    def total(self) -> int:
        return (self.qk_projections + self.v_projection + self.scores + self.mixing + self.output
                + self.feed_forward)


def _share(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} is a share of heads in [0, 1], got {value}")
    return value


def pairs(n: int, *, triangular: bool = False) -> int:
    """Query-key pairs one head's QKᵀ (or AV) computes: n², or n(n+1)/2 counting only what a causal mask allows."""
    return n * (n + 1) // 2 if triangular else n * n


def shape_layer_cost(shape: ModelShape, n: int, *, replaced_share: float = 0.0, kv_replaced_share: float | None = None,
                     triangular: bool = False) -> LayerCost:
    """MACs of one layer of `shape` when `replaced_share` of its query heads (and `kv_replaced_share` of its
    key/value heads; default the same) are constant; ``triangular``: n(n+1)/2 pairs for a causal model."""
    kept = 1.0 - _share("replaced_share", replaced_share)
    kv_kept = 1.0 - _share("kv_replaced_share", replaced_share if kv_replaced_share is None else kv_replaced_share)
    p = pairs(n, triangular=triangular and shape.causal)
    q_width, kv_width, hidden = shape.attention_width, shape.kv_width, shape.hidden
    return LayerCost(qk_projections=round(n * hidden * q_width * kept) + round(n * hidden * kv_width * kv_kept),
                     v_projection=n * hidden * kv_width, scores=round(p * q_width * kept), mixing=p * q_width,
                     output=n * q_width * hidden, feed_forward=shape.mlp_matrices * n * hidden * shape.intermediate)


def layer_cost(n: int, hidden: int, intermediate: int, *, replaced_share: float = 0.0) -> LayerCost:
    """MACs of one BERT-like layer (`encoder_shape`) when `replaced_share` of its heads are constant (their Q/K
    projections and QKᵀ dropped)."""
    return shape_layer_cost(encoder_shape(hidden, intermediate), n, replaced_share=replaced_share)


def model_speedup_ceiling(n: int, hidden: int, intermediate: int, *, replaced_share: float = 1.0) -> float:
    """Whole-model MAC ratio original / with `replaced_share` of heads constant (every layer alike), BERT-like."""
    return layer_cost(n, hidden, intermediate).total / layer_cost(n, hidden, intermediate,
                                                                  replaced_share=replaced_share).total


@dataclass(frozen=True)
class ModelCost:
    """MACs of a whole model on one sequence of n tokens: its layers and, when counted, the LM head."""

    layer: LayerCost
    num_layers: int
    lm_head: int = 0

    @property
    def layers(self) -> int:
        return self.num_layers * self.layer.total

    @property
    def total(self) -> int:
        return self.layers + self.lm_head


def model_cost(shape_or_config, n: int, *, replaced_share: float = 0.0, kv_replaced_share: float | None = None,
               lm_head: bool = False, triangular: bool = False) -> ModelCost:
    """MACs of the model on one sequence of `n` tokens (a `ModelShape` or a transformers config), every layer with
    `replaced_share` of its heads constant; ``lm_head`` adds the vocabulary projection of every token."""
    shape = _shape(shape_or_config)
    layer = shape_layer_cost(shape, n, replaced_share=replaced_share, kv_replaced_share=kv_replaced_share,
                             triangular=triangular)
    return ModelCost(layer=layer, num_layers=shape.num_layers, lm_head=n * shape.vocab * shape.hidden if lm_head else 0)


def config_ceiling(shape_or_config, n: int, *, replaced_share: float = 1.0, kv_replaced_share: float | None = None,
                   lm_head: bool = False, triangular: bool = False) -> float:
    """Whole-model MAC ratio original / with `replaced_share` of heads constant (module doc for the options)."""
    shape = _shape(shape_or_config)
    original = model_cost(shape, n, lm_head=lm_head, triangular=triangular).total
    return original / model_cost(shape, n, replaced_share=replaced_share, kv_replaced_share=kv_replaced_share,
                                 lm_head=lm_head, triangular=triangular).total


# ---- FLOPs of a pass and of a step (a FLOP is half a multiply-accumulate) ------------------------------------------


def backward_macs(layer: LayerCost) -> int:
    """MACs of one layer's backward pass through its activations with frozen weights: each linear map once (input
    gradient only), QKᵀ and the mixing product twice (both operands are activations)."""
    linear = layer.qk_projections + layer.v_projection + layer.output + layer.feed_forward
    return linear + 2 * (layer.scores + layer.mixing)


def _pass_cost(shape_or_config, n: int, replaced_share: float, mixed: bool) -> ModelCost:
    """`model_cost` of the pass, with both mixing products where every head is `mixed` (A·V and C·V)."""
    cost = model_cost(shape_or_config, n, replaced_share=replaced_share)
    return replace(cost, layer=replace(cost.layer, mixing=2 * cost.layer.mixing)) if mixed else cost


def pass_flops(shape_or_config, n: int, *, replaced_share: float = 0.0, mixed: bool = False) -> int:
    """FLOPs of one sequence of n tokens through the backbone's layers (no LM head), `replaced_share` of the heads
    constant with their Q/K dropped, or every head mixed (`mixed`, λ)."""
    return 2 * _pass_cost(shape_or_config, n, replaced_share, mixed).layers


def step_flops(shape_or_config, n: int, *, replaced_share: float = 0.0, mixed: bool = False) -> int:
    """FLOPs of one sequence's training step through the frozen backbone: its pass (`pass_flops`) and the backward
    through its activations (`backward_macs`); the probe's are `probe_flops`."""
    cost = _pass_cost(shape_or_config, n, replaced_share, mixed)
    return 2 * (cost.layers + cost.num_layers * backward_macs(cost.layer))


def probe_flops(kind: str, layers: int, hidden: int, read: float, labels: int, *, step: bool = False) -> float:
    """FLOPs of a probe on one example whose `read` positions it reads over `layers` hidden states of width `hidden`
    (a sentence or pair probe runs its MLP once, a token or MLM probe per position); ``step``: forward and backward."""
    mlp = layers * hidden * hidden + hidden * labels
    macs = layers * read * hidden + mlp if kind in ("sentence", "pair") else read * mlp
    return 2 * macs * (3 if step else 1)


def config_speedups(config, n: int, *, lm_head: bool = False, triangular: bool = False) -> dict[str, float]:
    """The head-level ratio of section 3.4 and the whole-model ceiling (`config_ceiling`) of a transformers config."""
    shape = model_shape(config)
    return {"head_speedup": head_speedup(n, shape.head_dim),
            "model_speedup_ceiling": config_ceiling(shape, n, lm_head=lm_head, triangular=triangular)}


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
    """Median forward seconds of `model` on `inputs`: original, every head constant, and attention-free."""
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
