"""Unit tests for papa.tasks.mlm_masking.mask_tokens (BERT 15% / 80-10-10 masking)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from papa.tasks.mlm_masking import IGNORE_INDEX, mask_tokens

VOCAB, MASK_ID, CLS_ID, SEP_ID, PAD_ID = 1000, 3, 1, 2, 0


def _batch(batch: int, n: int, seed: int = 0):
    """Fixed-length layout: [CLS] tokens... pads... [SEP] in the last slot."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, n + 1, (batch,), generator=g)
    ids = torch.randint(10, VOCAB, (batch, n), generator=g)
    attention = torch.zeros(batch, n, dtype=torch.long)
    for i, length in enumerate(lengths.tolist()):
        attention[i, : length - 1] = 1
        attention[i, -1] = 1
    ids[attention == 0] = PAD_ID
    ids[:, 0] = CLS_ID
    ids[:, -1] = SEP_ID
    special = (ids == CLS_ID) | (ids == SEP_ID) | (ids == PAD_ID)
    return ids, special, attention


def _mask(ids, special, attention, seed: int = 0, **kw):
    return mask_tokens(ids, special, attention, MASK_ID, VOCAB, torch.Generator().manual_seed(seed), **kw)


def test_seeded_determinism():
    ids, special, attention = _batch(8, 32)
    a = _mask(ids, special, attention, seed=5)
    b = _mask(ids, special, attention, seed=5)
    c = _mask(ids, special, attention, seed=6)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def test_input_is_not_modified():
    ids, special, attention = _batch(4, 16)
    before = ids.clone()
    masked, _ = _mask(ids, special, attention)
    assert torch.equal(ids, before)
    assert masked.data_ptr() != ids.data_ptr()


def test_rate_and_80_10_10_split_on_large_batch():
    ids, special, attention = _batch(512, 128)
    eligible = attention.bool() & ~special
    masked, labels = _mask(ids, special, attention, seed=1)
    selected = labels != IGNORE_INDEX
    n_eligible, n_sel = int(eligible.sum()), int(selected.sum())
    assert n_eligible > 20_000
    # Binomial(n_eligible, 0.15): 5 standard deviations of the rate is < 0.012 here.
    assert abs(n_sel / n_eligible - 0.15) < 5 * (0.15 * 0.85 / n_eligible) ** 0.5
    became_mask = (masked == MASK_ID) & selected
    unchanged = (masked == ids) & selected
    became_random = selected & ~became_mask & ~unchanged
    # A random draw can hit [MASK] or the original id (prob ~1/1000 each): tolerance covers it.
    for part, share in ((became_mask, 0.8), (became_random, 0.1), (unchanged, 0.1)):
        assert abs(int(part.sum()) / n_sel - share) < 5 * (share * (1 - share) / n_sel) ** 0.5 + 0.003


def test_specials_and_pads_never_selected_and_unchanged():
    ids, special, attention = _batch(64, 40)
    # Make pads non-special to check that the attention mask alone keeps them out.
    special_no_pads = special & attention.bool()
    masked, labels = _mask(ids, special_no_pads, attention, mlm_probability=1.0)
    off = special | ~attention.bool()
    assert torch.all(labels[off] == IGNORE_INDEX)
    assert torch.equal(masked[off], ids[off])
    # With probability 1 every eligible token is selected.
    assert torch.equal(labels[~off], ids[~off])


def test_labels_and_unselected_positions():
    ids, special, attention = _batch(16, 64)
    masked, labels = _mask(ids, special, attention, seed=3)
    selected = labels != IGNORE_INDEX
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(masked[~selected], ids[~selected])
    assert masked.dtype == ids.dtype and labels.dtype == ids.dtype


def test_probability_zero_selects_nothing_and_bad_arguments():
    ids, special, attention = _batch(4, 16)
    masked, labels = _mask(ids, special, attention, mlm_probability=0.0)
    assert torch.all(labels == IGNORE_INDEX) and torch.equal(masked, ids)
    with pytest.raises(ValueError):
        _mask(ids, special, attention, mlm_probability=1.5)
    with pytest.raises(ValueError):
        _mask(ids, special[:, :-1], attention)


def test_attention_mask_none_means_all_real():
    ids, special, _ = _batch(4, 16)
    ones = torch.ones_like(ids)
    a = mask_tokens(ids, special, None, MASK_ID, VOCAB, torch.Generator().manual_seed(0))
    b = mask_tokens(ids, special, ones, MASK_ID, VOCAB, torch.Generator().manual_seed(0))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 6),
    n=st.integers(1, 24),
    seed=st.integers(0, 2**31 - 1),
    prob=st.floats(0.0, 1.0),
    vocab=st.integers(1, 50),
    data=st.data(),
)
def test_property_random_masks(batch, n, seed, prob, vocab, data):
    bits = st.lists(st.booleans(), min_size=batch * n, max_size=batch * n)
    special = torch.tensor(data.draw(bits)).reshape(batch, n)
    attention = torch.tensor(data.draw(bits), dtype=torch.long).reshape(batch, n)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, n), generator=g)
    mask_id = vocab  # outside the vocabulary, so a [MASK] write is always visible
    masked, labels = mask_tokens(ids, special, attention, mask_id, vocab, torch.Generator().manual_seed(seed), prob)
    again = mask_tokens(ids, special, attention, mask_id, vocab, torch.Generator().manual_seed(seed), prob)
    assert torch.equal(masked, again[0]) and torch.equal(labels, again[1])

    selected = labels != IGNORE_INDEX
    eligible = attention.bool() & ~special
    assert not torch.any(selected & ~eligible)
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(masked[~selected], ids[~selected])
    assert torch.all((masked[selected] == mask_id) | ((masked[selected] >= 0) & (masked[selected] < vocab)))
    if prob == 1.0:
        assert torch.equal(selected, eligible)
    if prob == 0.0:
        assert not selected.any()
