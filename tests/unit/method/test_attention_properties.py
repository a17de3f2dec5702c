"""Property-based tests of the attention invariants on tiny models of every supported architecture (encoders and a
causal LM): random lengths, padding patterns (pads anywhere, as the sep_last layout puts them in the middle), head sets
and mixing weights."""
from __future__ import annotations

import functools
from contextlib import contextmanager

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import papa
from conftest import ARCHS, CAUSAL_ARCHS, tiny_model
from papa.method.constants import ConstantMatrices, ConstantsMetadata

LAYERS, HEADS, N = 2, 4, 12
# Few examples per architecture keep the module to seconds; derandomize keeps CI reproducible.
PROPERTY = settings(max_examples=6, deadline=None, derandomize=True, database=None)


@functools.lru_cache(maxsize=None)
def _model(arch: str):
    return tiny_model(arch, layers=LAYERS, heads=HEADS)


@st.composite
def batches(draw, min_len: int = 3, max_len: int = N):
    """(input_ids, attention_mask) with 1-3 examples, each with at least one real token, pads anywhere."""
    n = draw(st.integers(min_len, max_len))
    b = draw(st.integers(1, 3))
    rows = [draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(any)) for _ in range(b)]
    mask = torch.tensor(rows, dtype=torch.long)
    seed = draw(st.integers(0, 2**16))
    return mask, seed


head_sets = st.sets(st.tuples(st.integers(0, LAYERS - 1), st.integers(0, HEADS - 1)), max_size=LAYERS * HEADS)


def _inputs(model, mask: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    pad = model.config.pad_token_id
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, model.config.vocab_size, mask.shape, generator=g)  # no special tokens
    return {"input_ids": torch.where(mask.bool(), ids, torch.full_like(ids, pad)), "attention_mask": mask}


def _constants(ctrl, seed: int, layout: str = "sep_last", zero_share: float = 0.3) -> ConstantMatrices:
    """Average-kind constants with random non-negative entries, some exactly 0 (unobserved entries)."""
    g = torch.Generator().manual_seed(seed)
    mats = torch.rand(LAYERS, HEADS, N, N, generator=g)
    mats[torch.rand(mats.shape, generator=g) < zero_share] = 0.0
    meta = ConstantsMetadata(kind="average", model=ctrl.signature, max_length=N, layout=layout)
    return ConstantMatrices(matrices=mats, metadata=meta)


def _hidden(model, inputs):
    with torch.no_grad():
        return model(**inputs).last_hidden_state


@contextmanager
def _attached(model):
    """Attach for one hypothesis example (the cached model is shared by all of them)."""
    ctrl = papa.attach(model)
    try:
        yield ctrl
    finally:
        papa.detach(model)


@pytest.mark.parametrize("arch", ARCHS + CAUSAL_ARCHS)
@PROPERTY
@given(batch=batches(min_len=N, max_len=N), heads=head_sets)
def test_nothing_replaced_is_the_original(arch, batch, heads):
    """Attached with constants, every head kept (also after some were replaced): bit-identical outputs."""
    model = _model(arch)
    inputs = _inputs(model, *batch)
    original = _hidden(model, inputs)
    with _attached(model) as ctrl:
        ctrl.set_constants(_constants(ctrl, batch[1]))
        assert torch.equal(_hidden(model, inputs), original)
        if heads:
            ctrl.replace(sorted(heads))
            _hidden(model, inputs)
            ctrl.keep_all()
        assert torch.equal(_hidden(model, inputs), original)


@pytest.mark.parametrize("arch", ARCHS + CAUSAL_ARCHS)
@PROPERTY
@given(batch=batches(), layer=st.integers(0, LAYERS - 1), zero_share=st.sampled_from([0.0, 0.5, 0.9]))
def test_replaced_rows_sum_to_one_and_pad_keys_get_zero(arch, batch, layer, zero_share):
    mask, seed = batch
    with _attached(_model(arch)) as ctrl:
        ctrl.set_constants(_constants(ctrl, seed, zero_share=zero_share))
        n, valid = mask.shape[1], mask.bool()
        c = ctrl.constant_probs(layer, slice(None), valid, n, torch.float32)
        keys = valid[:, None, None, :].expand_as(c)
        assert torch.all(c[~keys] == 0) and torch.all(c >= 0)
        rows = c.sum(-1)
        raw = ctrl.constants[layer, :, :n, :n].unsqueeze(0) * valid[:, None, None, :]
        has_mass = raw.sum(-1) > 0  # a row without mass on real keys stays 0 (the head acts pruned there)
        assert torch.allclose(rows[has_mass], torch.ones_like(rows[has_mass]), atol=1e-5)
        assert torch.all(rows[~has_mass] == 0)


@pytest.mark.parametrize("arch", ARCHS + CAUSAL_ARCHS)
@PROPERTY
@given(batch=batches(min_len=N, max_len=N), heads=head_sets.filter(bool), lam=st.floats(0.01, 0.99))
def test_mixing_limits_and_rows(arch, batch, heads, lam):
    """λ → 1 gives the original, λ → 0 on a head set gives those heads replaced; any λ keeps rows stochastic."""
    model = _model(arch)
    mask, seed = batch
    inputs = _inputs(model, mask, seed)
    real = mask.bool()
    original = _hidden(model, inputs)
    with _attached(model) as ctrl:
        ctrl.set_constants(_constants(ctrl, seed, zero_share=0.0))
        chosen = ctrl._mask(sorted(heads))
        ctrl.replace(chosen)
        replaced = _hidden(model, inputs)
        ctrl.mix()
        with torch.no_grad():
            ctrl.theta.fill_(1e4)
        assert torch.allclose(_hidden(model, inputs)[real], original[real], atol=1e-5)
        with torch.no_grad():
            ctrl.theta.copy_(torch.where(chosen, -1e4, 1e4))
        assert torch.allclose(_hidden(model, inputs)[real], replaced[real], atol=1e-5)
        # B = λA + (1 − λ)C at one layer: rows of real queries sum to 1, pad keys get 0.
        with torch.no_grad():
            ctrl.theta.fill_(torch.logit(torch.tensor(lam)).item())
        g = torch.Generator().manual_seed(seed)
        scores = torch.randn(mask.shape[0], HEADS, N, N, generator=g).masked_fill(~real[:, None, None, :], -1e9)
        mixed = ctrl.transform_probs(0, scores.softmax(-1), real)
        assert torch.all(mixed.masked_select(~real[:, None, None, :].expand_as(mixed)) == 0)
        sums = mixed.sum(-1)[real[:, None, :].expand(-1, HEADS, -1)]
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS + CAUSAL_ARCHS)
@PROPERTY
@given(real_len=st.integers(2, 7), extra=st.integers(1, N - 7), heads=head_sets, seed=st.integers(0, 2**16))
def test_extra_padding_leaves_real_tokens_unchanged(arch, real_len, extra, heads, seed):
    """Right-padding an input further changes nothing at its real tokens, whichever heads are replaced
    (constants in the standard layout, cut to the input's length)."""
    model = _model(arch)
    with _attached(model) as ctrl:
        ctrl.set_constants(_constants(ctrl, seed, layout="standard"))
        if heads:
            ctrl.replace(sorted(heads))
        short = torch.tensor([[1] * real_len + [0] * (7 - real_len)])
        longer = torch.cat([short, torch.zeros(1, extra, dtype=torch.long)], dim=1)
        a, b = _inputs(model, short, seed), _inputs(model, longer, seed)
        b["input_ids"][:, : short.shape[1]] = a["input_ids"]  # same tokens, more padding
        out_a, out_b = _hidden(model, a), _hidden(model, b)
        assert torch.allclose(out_a[0, :real_len], out_b[0, :real_len], atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS + CAUSAL_ARCHS)
@PROPERTY
@given(batch=batches(min_len=N, max_len=N), heads=head_sets)
def test_pad_content_never_reaches_real_tokens(arch, batch, heads):
    """Whatever sits at pad positions (here: noise added to their embeddings), real tokens' outputs are the same."""
    model = _model(arch)
    mask, seed = batch
    assume(not mask.all())  # pads to disturb
    inputs = _inputs(model, mask, seed)
    with _attached(model) as ctrl:
        ctrl.set_constants(_constants(ctrl, seed))
        if heads:
            ctrl.replace(sorted(heads))
        before = _hidden(model, inputs)
        pads = (mask == 0)[..., None]
        g = torch.Generator().manual_seed(seed + 1)
        # The embedding block's output (DeBERTa zeroes pads inside it); Llama has only its token embeddings.
        embeddings = getattr(ctrl.info.base, "embeddings", None)
        embeddings = ctrl.info.base.get_input_embeddings() if embeddings is None else embeddings
        hook = embeddings.register_forward_hook(
            lambda m, args, out: out + 10 * torch.randn(out.shape, generator=g) * pads)
        try:
            after = _hidden(model, inputs)
        finally:
            hook.remove()
        real = mask.bool()
        assert not torch.allclose(after[~real], before[~real])  # the pads did change
        assert torch.allclose(after[real], before[real], atol=1e-5)
