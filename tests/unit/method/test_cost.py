"""papa.method.cost on decoders: grouped-query attention, gated MLPs, causal pairs and the LM head, against MACs
counted by hand on tiny configs and against the matrix products torch actually runs (FlopCounterMode)."""
from __future__ import annotations

import pytest
import torch
from transformers import (AutoModel, AutoModelForCausalLM, BertConfig, GPT2Config, LlamaConfig, ModernBertConfig,
                          Qwen2Config)

import papa
from papa.method import cost
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import data_free_constants

N = 3


def tiny_llama(**extra) -> LlamaConfig:
    # 4 query heads of size 2 (width 8), 2 key/value heads (width 4), gated MLP 8 x 12, 2 layers, vocabulary 10.
    sizes = dict(hidden_size=8, intermediate_size=12, num_attention_heads=4, num_key_value_heads=2, head_dim=2,
                 num_hidden_layers=2, vocab_size=10, max_position_embeddings=16)
    return LlamaConfig(**{**sizes, **extra})


def test_llama_shape_and_hand_counted_macs():
    shape = cost.model_shape(tiny_llama())
    assert shape == cost.ModelShape(hidden=8, intermediate=12, num_layers=2, num_heads=4, head_dim=2, num_kv_heads=2,
                                    mlp_matrices=3, vocab=10, causal=True)
    layer = cost.shape_layer_cost(shape, N)
    # Q 3·8·8, K and V 3·8·4 each, QKᵀ and AV 3²·4 heads·2, output 3·8·8, gate/up/down 3 · 3·8·12.
    assert layer == cost.LayerCost(qk_projections=192 + 96, v_projection=96, scores=72, mixing=72, output=192,
                                   feed_forward=864)
    assert layer.total == 1584
    assert cost.model_cost(shape, N).total == 2 * 1584
    assert cost.model_cost(shape, N, lm_head=True).total == 2 * 1584 + 3 * 10 * 8
    # Every head constant: Q, K and QKᵀ go; V, CV, the output, the MLP and the LM head stay.
    const = cost.model_cost(shape, N, replaced_share=1.0, lm_head=True)
    assert const.layer == cost.LayerCost(0, 96, 0, 72, 192, 864) and const.total == 2 * 1224 + 240
    assert cost.config_ceiling(shape, N) == pytest.approx(1584 / 1224)
    assert cost.config_ceiling(shape, N, lm_head=True) == pytest.approx((2 * 1584 + 240) / (2 * 1224 + 240))
    # Key/value heads kept (e.g. a group still has an input-dependent head): K stays.
    assert cost.shape_layer_cost(shape, N, replaced_share=1.0, kv_replaced_share=0.0).total == 1224 + 96
    # Half the heads: half of Q, K and QKᵀ.
    assert cost.shape_layer_cost(shape, N, replaced_share=0.5).total == 1584 - 96 - 48 - 36


def test_causal_pairs_triangular_or_full():
    shape = cost.model_shape(tiny_llama())
    assert cost.pairs(N) == 9 and cost.pairs(N, triangular=True) == 6
    tri = cost.shape_layer_cost(shape, N, triangular=True)
    assert (tri.scores, tri.mixing, tri.total) == (48, 48, 1584 - 48)
    assert cost.config_ceiling(shape, N, triangular=True) == pytest.approx(1536 / (1224 - 24))
    # The full count is the larger ceiling, at every length: it bounds the speed-up against either kernel.
    for n in (1, 16, 128, 512, 4096):
        for lm_head in (False, True):
            assert cost.config_ceiling(shape, n, lm_head=lm_head) >= cost.config_ceiling(shape, n, lm_head=lm_head,
                                                                                         triangular=True)
    # An encoder has no causal mask: triangular does not apply.
    bert = cost.model_shape(BertConfig(hidden_size=8, num_attention_heads=2, intermediate_size=12))
    assert cost.shape_layer_cost(bert, N, triangular=True) == cost.shape_layer_cost(bert, N)


def test_gpt2_qwen2_bert_modernbert_shapes():
    gpt2 = cost.model_shape(GPT2Config(n_embd=8, n_head=2, n_layer=1, vocab_size=10))
    assert (gpt2.intermediate, gpt2.mlp_matrices, gpt2.num_kv_heads, gpt2.head_dim, gpt2.causal) == (32, 2, 2, 4, True)
    # Q, K, V, output 3·8·8 each, QKᵀ and AV 3²·8 each, up and down 2 · 3·8·32.
    assert cost.shape_layer_cost(gpt2, N).total == 4 * 192 + 2 * 72 + 1536
    qwen2 = cost.model_shape(Qwen2Config(hidden_size=8, intermediate_size=12, num_attention_heads=4,
                                         num_key_value_heads=1, num_hidden_layers=1, vocab_size=10))
    assert (qwen2.head_dim, qwen2.kv_width, qwen2.mlp_matrices, qwen2.causal) == (2, 2, 3, True)
    assert cost.shape_layer_cost(qwen2, N).total == 192 + 2 * 48 + 2 * 72 + 192 + 864
    bert = cost.model_shape(BertConfig(hidden_size=768, num_attention_heads=12, intermediate_size=3072))
    assert (bert.mlp_matrices, bert.num_kv_heads, bert.causal) == (2, 12, False)
    modernbert = ModernBertConfig(hidden_size=8, num_attention_heads=2, intermediate_size=12)
    assert cost.model_shape(modernbert).mlp_matrices == 3
    with pytest.raises(ValueError, match="share of heads"):
        cost.model_cost(bert, 8, replaced_share=0.5, kv_replaced_share=-0.1)


@pytest.mark.parametrize("n", [64, 128, 512])
def test_encoder_results_unchanged(n):
    """A BERT config through the general shape gives exactly the BERT-like formula of `model_speedup_ceiling`."""
    for hidden, intermediate, heads in ((768, 3072, 12), (384, 1536, 12)):
        config = BertConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=intermediate)
        general = cost.model_cost(config, n, replaced_share=1.0).layer
        assert general == cost.layer_cost(n, hidden, intermediate, replaced_share=1.0)
        assert cost.model_cost(config, n).layer == cost.layer_cost(n, hidden, intermediate)
        assert cost.config_speedups(config, n)["model_speedup_ceiling"] == pytest.approx(
            cost.model_speedup_ceiling(n, hidden, intermediate), rel=1e-12)


def test_smollm2_shape():
    """SmolLM2-135M's geometry (30 layers x 9 heads of 64, 3 key/value heads, gated MLP 576 x 1536, vocabulary 49152),
    from a config built here (the real one is read by the benchmark; its numbers are in the README)."""
    config = LlamaConfig(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                         num_hidden_layers=30, vocab_size=49152, head_dim=64)
    shape = cost.model_shape(config)
    per_token_linear = 576 * 576 + 2 * 576 * 192 + 576 * 576 + 3 * 576 * 1536
    assert cost.shape_layer_cost(shape, 1).total - 2 * 576 == per_token_linear  # n = 1: one pair per head
    assert cost.config_ceiling(shape, 512) == pytest.approx(1.2174, abs=1e-4)
    assert cost.config_ceiling(shape, 512, lm_head=True) == pytest.approx(1.1701, abs=1e-4)
    assert cost.config_ceiling(shape, 128, lm_head=True) == pytest.approx(1.1254, abs=1e-4)


# ---- against the matrix products torch runs ------------------------------------------------------------------------

def _flops(model, ids: torch.Tensor) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    kwargs = {"use_cache": False} if cost.model_shape(model.config).causal else {}
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, **kwargs)
    return counter.get_total_flops()


def _causal_lm(config):
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()


CAUSAL_CONFIGS = {
    "llama-gqa": lambda: tiny_llama(),
    "llama-mha": lambda: tiny_llama(num_key_value_heads=4),
    "qwen2": lambda: Qwen2Config(hidden_size=8, intermediate_size=12, num_attention_heads=4, num_key_value_heads=1,
                                 num_hidden_layers=2, vocab_size=10, max_position_embeddings=16),
    "gpt2": lambda: GPT2Config(n_embd=8, n_head=2, n_layer=2, vocab_size=10, n_positions=16),
}


@pytest.mark.parametrize("name", sorted(CAUSAL_CONFIGS))
def test_counts_match_the_products_torch_runs(name):
    """Eager attention computes the full masked QKᵀ and AV, and the LM head runs on every token: 2 x model_cost."""
    config = CAUSAL_CONFIGS[name]()
    model = _causal_lm(config)
    ids = torch.arange(1, 6)[None] % config.vocab_size
    expected = cost.model_cost(model.config, ids.shape[1], lm_head=True).total
    assert _flops(model, ids) == 2 * expected


def test_encoder_counts_match_the_products_torch_runs():
    config = BertConfig(hidden_size=8, num_attention_heads=2, num_hidden_layers=2, intermediate_size=12, vocab_size=10)
    torch.manual_seed(0)
    model = AutoModel.from_config(config, attn_implementation="eager").eval()
    ids = torch.arange(1, 6)[None]
    pooler = 8 * 8  # BertModel's pooler: one hidden x hidden product per sequence (not a layer)
    assert _flops(model, ids) == 2 * (cost.model_cost(config, 5).total + pooler)


@pytest.mark.parametrize("name", ["llama-mha", "llama-gqa"])
def test_attention_free_counts_match_papa(name):
    """papa with every head constant and Q/K dropped runs exactly the constant side's products: no Q, no QKᵀ, a dense
    C·V (full pairs), with the row sums riding along in the same product (one more key, the floor, and one more
    column of V, the real-key mask: `papa.method.constant_heads`). With one key/value head per query head K is sliced
    away too; with grouped keys papa keeps the K projection whole (`papa.method.adapters.interface`), i.e.
    ``kv_replaced_share=0``."""
    config = CAUSAL_CONFIGS[name]()
    model = _causal_lm(config)
    n = 5
    ids = torch.arange(1, n + 1)[None] % config.vocab_size
    ctrl = papa.attach(model)
    try:
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n, layout="standard"))
        ctrl.replace()
        with query_key_dropped_while(ctrl):
            flops = _flops(model, ids)
    finally:
        papa.detach(model)
    grouped = config.num_key_value_heads < config.num_attention_heads
    expected = cost.model_cost(model.config, n, replaced_share=1.0, kv_replaced_share=0.0 if grouped else 1.0,
                               lm_head=True).total
    heads = config.num_attention_heads
    d = config.hidden_size // heads
    ride_along = config.num_hidden_layers * heads * n * ((n + 1) * (d + 1) - n * d)
    assert flops == 2 * (expected + ride_along)
