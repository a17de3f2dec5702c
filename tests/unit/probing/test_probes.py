"""Unit tests for papa.probing.probes: shapes, pad masking, pooling weights, learning toy tasks, loss."""
from __future__ import annotations

import pytest
import torch

from papa.probing.probes import IGNORE_INDEX, SentenceProbe, TokenProbe, mlm_probe, probe_loss

B, L1, N, D = 4, 3, 10, 8  # batch, L+1 layers, max_length, hidden size


def _mask(lengths: list[int], n: int = N) -> torch.Tensor:
    """Fixed-length layout: real tokens at 0..len-2, pads, then the final [SEP] in the last slot."""
    mask = torch.zeros(len(lengths), n, dtype=torch.long)
    for i, length in enumerate(lengths):
        mask[i, : length - 1] = 1
        mask[i, -1] = 1
    return mask


@pytest.fixture
def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, L1, N, D, generator=g), _mask([N, 2, 5, 7])


def _randomised_probe(probe: torch.nn.Module) -> torch.nn.Module:
    """Give the position weights non-trivial values, so masking is tested beyond uniform weights."""
    with torch.no_grad():
        for p in probe.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    return probe.eval()


def test_sentence_probe_shape(batch):
    features, mask = batch
    probe = SentenceProbe(L1, D, N, num_labels=3)
    assert probe(features, mask).shape == (B, 3)
    assert probe.pool(features, mask).shape == (B, L1 * D)
    assert probe.mlp[0].out_features == D  # default mlp_hidden = d
    assert SentenceProbe(L1, D, N, 3, mlp_hidden=5).mlp[0].out_features == 5


def test_sentence_probe_pads_do_not_matter_exactly(batch):
    features, mask = batch
    probe = _randomised_probe(SentenceProbe(L1, D, N, num_labels=3))
    garbage = features.clone()
    pads = ~mask.bool()
    garbage.permute(0, 2, 1, 3)[pads] = torch.randn(int(pads.sum()), L1, D) * 1e6
    garbage[1, 0, 3, 0] = float("nan")  # a pad slot of example 1
    garbage[2, 1, 5, 2] = float("inf")  # a pad slot of example 2
    assert pads[1, 3] and pads[2, 5]
    with torch.no_grad():
        assert torch.equal(probe(features, mask), probe(garbage, mask))


def test_sentence_pooling_weights(batch):
    _, mask = batch
    probe = _randomised_probe(SentenceProbe(L1, D, N, num_labels=2))
    weights = probe.pooling_weights(mask)
    assert weights.shape == (B, L1, N)
    pads = ~mask.bool()[:, None, :].expand_as(weights)
    assert torch.all(weights[pads] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, L1))
    assert torch.all(weights[~pads] > 0)


def test_sentence_pooling_starts_as_mean_pooling(batch):
    features, mask = batch
    probe = SentenceProbe(L1, D, N, num_labels=2)
    m = mask[:, None, :, None].float()
    expected = (features * m).sum(2) / m.sum(2)  # [B, L+1, d]
    torch.testing.assert_close(probe.pool(features, mask), expected.reshape(B, L1 * D))


def test_sentence_probe_shorter_and_longer_inputs(batch):
    features, _ = batch
    probe = SentenceProbe(L1, D, N, num_labels=2)
    short = features[:, :, :6]
    assert probe(short, _mask([6, 3, 4, 2], n=6)).shape == (B, 2)
    long = torch.randn(B, L1, N + 1, D)
    with pytest.raises(ValueError, match="max_length"):
        probe(long, torch.ones(B, N + 1, dtype=torch.long))


def test_sentence_probe_all_pad_row_is_finite(batch):
    features, mask = batch
    mask = mask.clone()
    mask[0] = 0
    probe = SentenceProbe(L1, D, N, num_labels=2)
    assert torch.all(probe.pooling_weights(mask)[0] == 0)
    loss = probe_loss("sentence", probe(features, mask), torch.tensor([0, 1, 0, 1]))
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in probe.parameters())


def test_shape_mismatches_are_errors(batch):
    features, mask = batch
    with pytest.raises(ValueError):
        SentenceProbe(L1 + 1, D, N, 2)(features, mask)
    with pytest.raises(ValueError):
        TokenProbe(L1, D + 1, 2)(features)
    with pytest.raises(ValueError):
        SentenceProbe(L1, D, N, 2)(features, mask[:, :-1])


def test_token_probe_shape_and_pads(batch):
    features, mask = batch
    probe = _randomised_probe(TokenProbe(L1, D, num_labels=5))
    logits = probe(features, mask)
    assert logits.shape == (B, N, 5)
    garbage = features.clone()
    garbage.permute(0, 2, 1, 3)[~mask.bool()] = 1e6
    real = mask.bool()
    with torch.no_grad():
        torch.testing.assert_close(probe(garbage, mask)[real], logits[real], rtol=0, atol=0)


def test_token_probe_concatenates_layers_per_token(batch):
    features, _ = batch
    probe = TokenProbe(L1, D, num_labels=2, dropout=0.0)
    # The first Linear sees, for token (b, t), the vector [h_0[b,t], h_1[b,t], ..., h_L[b,t]].
    x = torch.cat([features[1, layer, 4] for layer in range(L1)])
    expected = probe.mlp(x)
    torch.testing.assert_close(probe(features)[1, 4], expected)


def test_token_probe_select(batch):
    features, mask = batch
    probe = TokenProbe(L1, D, num_labels=7).eval()
    select = torch.zeros(B, N, dtype=torch.bool)
    select[0, 2] = select[2, 0] = select[2, 4] = True
    full = probe(features)
    picked = probe(features, select=select)
    assert picked.shape == (3, 7)
    torch.testing.assert_close(picked, full[select])


def test_mlm_probe_is_vocab_sized_token_probe(batch):
    features, _ = batch
    probe = mlm_probe(L1, D, vocab_size=50)
    assert isinstance(probe, TokenProbe)
    assert probe(features).shape == (B, N, 50)
    assert isinstance(mlm_probe(L1, D, 50, activation="gelu").mlp[1], torch.nn.GELU)
    with pytest.raises(ValueError):
        TokenProbe(L1, D, 2, activation="relu")  # type: ignore[arg-type]


def test_probe_loss():
    logits = torch.randn(2, 3, 4)
    labels = torch.tensor([[1, IGNORE_INDEX, 3], [IGNORE_INDEX, IGNORE_INDEX, 0]])
    keep = labels != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(logits[keep], labels[keep])
    torch.testing.assert_close(probe_loss("token", logits, labels), expected)
    torch.testing.assert_close(probe_loss("mlm", logits[keep], labels[keep]), expected)
    none = torch.full((2, 3), IGNORE_INDEX)
    assert probe_loss("mlm", logits, none).item() == 0.0
    sentence_logits, sentence_labels = torch.randn(5, 3), torch.tensor([0, 2, 1, 1, 0])
    torch.testing.assert_close(
        probe_loss("sentence", sentence_logits, sentence_labels),
        torch.nn.functional.cross_entropy(sentence_logits, sentence_labels),
    )
    with pytest.raises(ValueError):
        probe_loss("regression", logits, labels)  # type: ignore[arg-type]


def _train(probe, loss_fn, steps: int, lr: float = 1e-2) -> None:
    opt = torch.optim.Adam(probe.parameters(), lr=lr)
    probe.train()
    # Tiny tensors: one thread avoids thread-pool stalls on a busy machine (and stays deterministic).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    probe.eval()


def test_sentence_probe_learns_separable_task():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    n_ex, n = 128, 12
    lengths = torch.randint(3, n + 1, (n_ex,), generator=g).tolist()
    mask = _mask(lengths, n=n)
    features = torch.randn(n_ex, L1, n, D, generator=g)
    # The label is linear in the [CLS]-slot vector of layer 1: the probe has to move its position
    # weight there (mean pooling alone dilutes the signal) and fit a hyperplane.
    w = torch.randn(D, generator=g)
    labels = (features[:, 1, 0] @ w > 0).long()
    probe = SentenceProbe(L1, D, n, num_labels=2)
    _train(probe, lambda: probe_loss("sentence", probe(features, mask), labels), steps=200)
    with torch.no_grad():
        accuracy = (probe(features, mask).argmax(-1) == labels).float().mean().item()
    assert accuracy > 0.95


def test_token_probe_learns_separable_task():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    n_ex, n, classes = 64, 12, 4
    features = torch.randn(n_ex, L1, n, D, generator=g)
    mask = _mask(torch.randint(3, n + 1, (n_ex,), generator=g).tolist(), n=n)
    # Per-token classes from a linear map of the token's concatenated layer vectors.
    w = torch.randn(L1 * D, classes, generator=g)
    labels = (features.permute(0, 2, 1, 3).reshape(n_ex, n, L1 * D) @ w).argmax(-1)
    labels[~mask.bool()] = IGNORE_INDEX
    probe = TokenProbe(L1, D, num_labels=classes)
    _train(probe, lambda: probe_loss("token", probe(features, mask), labels), steps=300)
    with torch.no_grad():
        predicted = probe(features, mask).argmax(-1)
    real = labels != IGNORE_INDEX
    assert (predicted[real] == labels[real]).float().mean().item() > 0.95
