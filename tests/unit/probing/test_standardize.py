"""Standardised probe inputs: the training statistics, the pooling identity, and the same function class."""
from __future__ import annotations

import pytest
import torch

from conftest import TensorSource
from papa.probing.probes import IGNORE_INDEX, SentenceProbe, TokenProbe
from papa.probing.standardize import VARIANCE_EPS, InputStatistics, input_statistics

LAYERS, N, D = 3, 6, 8


def _data(n=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(n, LAYERS, N, D, generator=g) * 3 + 5
    feats[:, 1:, 0, 2] += 1e4  # a massive first-token dimension, as in a decoder
    mask = torch.ones(n, N, dtype=torch.long)
    mask[::2, -3:] = 0
    labels = torch.full((n, N), IGNORE_INDEX)
    labels[:, 1] = torch.randint(0, 3, (n,), generator=g)
    labels[::3, 2] = 1
    return feats, mask, labels


def _expected(vectors):
    v = vectors.double()
    return v.mean(0).float(), (v.var(0, correction=0) + VARIANCE_EPS).sqrt().float()


def test_statistics_are_taken_over_real_tokens_for_sentences_and_labelled_ones_for_tokens():
    feats, mask, labels = _data()
    sent = input_statistics(SentenceProbe(LAYERS, D, N, 2), TensorSource(feats, mask, labels[:, 1]), batch_size=7)
    real = feats.permute(0, 2, 1, 3)[mask.bool()]
    mean, std = _expected(real)
    assert sent.count == int(mask.sum())
    torch.testing.assert_close(sent.mean, mean)
    torch.testing.assert_close(sent.std, std)

    tok = input_statistics(TokenProbe(LAYERS, D, 3), TensorSource(feats, mask, labels), batch_size=7)
    chosen = feats.permute(0, 2, 1, 3)[labels != IGNORE_INDEX]
    mean, std = _expected(chosen)
    assert tok.count == int((labels != IGNORE_INDEX).sum())
    torch.testing.assert_close(tok.mean, mean)
    torch.testing.assert_close(tok.std, std)


def test_pooling_standardised_tokens_equals_standardising_the_pooled_vector():
    torch.manual_seed(0)
    feats, mask, labels = _data()
    probe = SentenceProbe(LAYERS, D, N, 2)
    with torch.no_grad():
        probe.position_logits.normal_()  # any pooling weights, not only the uniform start
    stats = input_statistics(probe, TensorSource(feats, mask, labels[:, 1]))
    probe.set_input_statistics(stats)
    plain = SentenceProbe(LAYERS, D, N, 2)
    plain.load_state_dict(probe.state_dict(), strict=False)
    standardised_tokens = (feats - stats.mean[None, :, None, :]) / stats.std[None, :, None, :]
    torch.testing.assert_close(probe.pool(feats, mask), plain.pool(standardised_tokens, mask), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["sentence", "token"])
def test_a_standardised_probe_is_a_plain_probe_with_its_first_layer_changed(kind):
    """The map is affine and the first linear layer absorbs it: the function class is the paper's."""
    torch.manual_seed(0)
    feats, mask, labels = _data()
    feats = feats.double()
    if kind == "sentence":
        probe, plain = SentenceProbe(LAYERS, D, N, 2).double(), SentenceProbe(LAYERS, D, N, 2).double()
        source_labels, select = labels[:, 1], None
    else:
        probe, plain = TokenProbe(LAYERS, D, 3).double(), TokenProbe(LAYERS, D, 3).double()
        source_labels, select = labels, labels != IGNORE_INDEX
    stats = input_statistics(probe, TensorSource(feats, mask, source_labels))
    probe.set_input_statistics(InputStatistics(stats.mean.double(), stats.std.double(), stats.count))
    assert probe.standardized and not plain.standardized
    plain.load_state_dict({k: v for k, v in probe.state_dict().items() if not k.startswith("input_")})
    first = plain.mlp[0]
    mean, std = stats.mean.double().reshape(-1), stats.std.double().reshape(-1)
    with torch.no_grad():
        first.bias -= (first.weight / std) @ mean
        first.weight /= std
    args = (feats, mask) if select is None else (feats, mask, select)
    torch.testing.assert_close(probe(*args), plain(*args))


def test_without_statistics_nothing_changes_and_nothing_is_stored():
    torch.manual_seed(0)
    probe = TokenProbe(LAYERS, D, 3)
    assert not probe.standardized and set(probe.state_dict()) == {"mlp.0.weight", "mlp.0.bias", "mlp.3.weight",
                                                                    "mlp.3.bias"}
    feats = torch.randn(2, LAYERS, N, D)
    manual = probe.mlp(feats.permute(0, 2, 1, 3).reshape(2, N, LAYERS * D))
    assert torch.equal(probe(feats), manual)


def test_bad_statistics_are_refused():
    with pytest.raises(ValueError, match="do not fit"):
        SentenceProbe(LAYERS, D, N, 2).set_input_statistics(InputStatistics(torch.zeros(2, D), torch.ones(2, D), 1))
    with pytest.raises(ValueError, match="standard deviation > 0"):
        InputStatistics(torch.zeros(LAYERS, D), torch.zeros(LAYERS, D), 1)
    with pytest.raises(TypeError, match="sentence and token probes"):
        input_statistics(torch.nn.Linear(2, 2), TensorSource(*_data()))
