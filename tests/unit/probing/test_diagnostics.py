"""The probe diagnosis: what a probe's first layer reads, saturation, constant predictions."""
from __future__ import annotations

import pytest
import torch

from conftest import TensorSource
from papa.probing.diagnostics import (constant_prediction_share, diagnose_probe, hidden_saturation, input_scale,
                                      mlp_inputs)
from papa.probing.probes import IGNORE_INDEX, SentenceProbe, TokenProbe

LAYERS, N, D = 3, 6, 8


def _sentences(n=40, massive: float = 0.0, seed=0, pads=True):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(n, LAYERS, N, D, generator=g)
    feats[:, 1:, 0, 3] += massive  # an input-independent first-token dimension, as a decoder's sink
    mask = torch.ones(n, N, dtype=torch.long)
    if pads:
        mask[: n // 2, -2:] = 0
    return TensorSource(feats, mask, torch.randint(0, 2, (n,), generator=g))


def test_mlp_inputs_are_what_each_probe_feeds_its_mlp():
    torch.manual_seed(0)
    src = _sentences()
    probe = SentenceProbe(LAYERS, D, N, 2)
    x = mlp_inputs(probe, src, batch_size=7)
    assert x.dtype == torch.float64 and x.shape == (40, LAYERS * D)
    torch.testing.assert_close(x, probe.pool(src.feats, src.mask).double())

    labels = torch.full((5, N), IGNORE_INDEX)
    labels[:, 1] = 0
    labels[2, 4] = 1
    tok = TokenProbe(LAYERS, D, 2)
    x = mlp_inputs(tok, TensorSource(src.feats[:5], src.mask[:5], labels), batch_size=2)
    assert x.shape == (6, LAYERS * D)
    torch.testing.assert_close(x[1], src.feats[1, :, 1].reshape(-1).double())  # row 1's only labelled token
    torch.testing.assert_close(x[3], src.feats[2, :, 4].reshape(-1).double())  # row 2's second


def test_input_scale_finds_a_dominant_input_independent_dimension():
    torch.manual_seed(0)
    x = torch.randn(200, LAYERS * D, dtype=torch.float64)
    x[:, D + 3] = 500.0 + 0.01 * torch.randn(200, dtype=torch.float64)
    table = input_scale(x, LAYERS, D)
    top = table.iloc[0]
    assert (top["layer"], top["dim"]) == (1, 3)
    assert top["share"] > 0.99 and top["std"] / top["rms"] < 1e-3
    assert table["share"].sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="inputs must be"):
        input_scale(x[:, :-1], LAYERS, D)


def test_saturation_grows_with_the_input_scale():
    torch.manual_seed(0)
    probe = SentenceProbe(LAYERS, D, N, 2)
    x = torch.randn(100, LAYERS * D, dtype=torch.float64)
    small, small_std = hidden_saturation(probe, 0.01 * x)
    large, large_std = hidden_saturation(probe, 1000 * x)
    assert small == 0.0 and large > 0.9 and large_std > 1000 * small_std


def test_constant_prediction_share():
    assert constant_prediction_share(torch.tensor([1, 1, 1, 0])) == 0.75
    assert constant_prediction_share([2, 2]) == 1.0
    with pytest.raises(ValueError, match="no predictions"):
        constant_prediction_share([])


def test_a_massive_constant_dimension_saturates_the_probe_and_makes_its_predictions_constant():
    torch.manual_seed(0)
    plain = diagnose_probe(SentenceProbe(LAYERS, D, N, 2), _sentences())
    torch.manual_seed(0)
    massive = diagnose_probe(SentenceProbe(LAYERS, D, N, 2), _sentences(massive=1e4, pads=False), top=2)
    assert plain.items == massive.items == 40
    assert plain.saturated < 0.1 and massive.saturated > 0.8
    assert massive.constant_predictions == 1.0 and plain.constant_predictions < 1.0
    # Layers 1 and 2 carry the offset in dim 3 (mean-pooled over the 6 tokens of every row): the two top dimensions,
    # nearly all of the inputs' size, barely varying with the input.
    assert massive.top_dims == 2 and massive.top_share > 0.99 and massive.top_std_over_rms < 0.01
    assert plain.top_std_over_rms > 0.5
    # Mean pooling divides the first token's offset by each row's length: with pads it varies with the input.
    torch.manual_seed(0)
    padded = diagnose_probe(SentenceProbe(LAYERS, D, N, 2), _sentences(massive=1e4), top=2)
    assert padded.top_std_over_rms > 0.1


def test_standardised_inputs_take_the_massive_dimension_out_of_saturation():
    """Standardised inputs for decoders, on the same synthetic features: standardising the inputs with training
    statistics leaves the probe's hidden units unsaturated and its predictions varied."""
    from papa.probing.standardize import input_statistics

    src = _sentences(massive=1e4)
    torch.manual_seed(0)
    probe = SentenceProbe(LAYERS, D, N, 2)
    raw = diagnose_probe(probe, src, top=2)
    probe.set_input_statistics(input_statistics(probe, src))
    standardised = diagnose_probe(probe, src, top=2)
    assert raw.saturated > 0.8 and raw.constant_predictions == 1.0 and raw.top_share > 0.99
    assert standardised.saturated < 0.2 and standardised.constant_predictions < 1.0
    assert standardised.top_share < 0.3  # the two largest of 24 dimensions no longer dominate
