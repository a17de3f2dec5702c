"""papa.method.cost's FLOP counts of a pass, a training step through frozen weights and a probe."""
from __future__ import annotations

import pytest

from papa.method.cost import backward_macs, encoder_shape, pass_flops, probe_flops, shape_layer_cost, step_flops

BERT_BASE = encoder_shape(768, 3072, 12)


def test_a_pass_is_two_flops_per_multiply_accumulate():
    n, d, f = 128, 768, 3072
    per_layer = n * 4 * d * d + n * 2 * d * f + 2 * n * n * d  # Q, K, V, output; the feed-forward; QKᵀ and AV
    assert pass_flops(BERT_BASE, n) == 2 * 12 * per_layer
    # constant heads drop Q/K and QKᵀ; λ computes A·V and C·V
    assert pass_flops(BERT_BASE, n) - pass_flops(BERT_BASE, n, replaced_share=1.0) == 2 * 12 * (2 * n * d * d
                                                                                               + n * n * d)
    assert pass_flops(BERT_BASE, n, mixed=True) - pass_flops(BERT_BASE, n) == 2 * 12 * n * n * d


@pytest.mark.parametrize("share, mixed", [(0.0, False), (1.0, False), (0.0, True)])
def test_a_step_adds_the_backward_through_the_activations(share, mixed):
    n = 64
    layer = shape_layer_cost(BERT_BASE, n, replaced_share=share)
    mixing = layer.mixing * (2 if mixed else 1)
    linear = layer.qk_projections + layer.v_projection + layer.output + layer.feed_forward
    backward = linear + 2 * (layer.scores + mixing)  # inputs' gradients once, both operands of QKᵀ / AV twice
    assert backward_macs(layer) == linear + 2 * (layer.scores + layer.mixing)
    assert step_flops(BERT_BASE, n, replaced_share=share, mixed=mixed) == \
        pass_flops(BERT_BASE, n, replaced_share=share, mixed=mixed) + 2 * 12 * backward
    assert pass_flops(BERT_BASE, n) < step_flops(BERT_BASE, n) < 3 * pass_flops(BERT_BASE, n)


def test_probe_flops_count_pooling_once_and_tokens_each():
    layers, d = 13, 768
    mlp = layers * d * d + d * 2
    assert probe_flops("sentence", layers, d, 20, 2) == 2 * (layers * 20 * d + mlp)
    assert probe_flops("token", layers, d, 20, 9) == 2 * 20 * (layers * d * d + d * 9)
    assert probe_flops("mlm", layers, d, 5, 50265, step=True) == 3 * probe_flops("mlm", layers, d, 5, 50265)
