"""Invariants of attach/detach and the head modes, on tiny random models of all five architectures."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, MistralConfig, MPNetConfig

import papa
from papa.method.architectures import check_config
from papa.method.constants import data_free_constants
from papa.method.controller import KEEP, MIX, REPLACE
from papa.method.layout import encode

SENTS = ["the cat sat on the mat", "a dog", "john ran to london and paris", "it was not good"]
N = 16


def _batch(model, tok, texts=SENTS, layout="sep_last", n=N):
    return encode(tok, texts, max_length=n, layout=layout, model_type=model.config.model_type).inputs


def _hidden(model, inputs):
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def _real(x, inputs):
    """Hidden states at real (non-pad) positions only."""
    return x[inputs["attention_mask"].bool()]


def _unpadded_length(tok, text):
    """The length at which `text` fills the input exactly (no padding)."""
    return len(tok(text)["input_ids"])


def _self_constants(ctrl, model, inputs, n=N):
    """Average constants captured from exactly `inputs`."""
    with ctrl.capturing(n) as stats, torch.no_grad():
        model(**inputs)
    return stats.to_constants(ctrl.signature, layout="sep_last")


def test_nothing_replaced_is_bit_identical(tiny):
    model, tok = tiny
    inputs = _batch(model, tok)
    before = _hidden(model, inputs)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
    assert torch.equal(_hidden(model, inputs), before)


def test_detach_restores_everything(tiny):
    model, tok = tiny
    inputs = _batch(model, tok)
    before = _hidden(model, inputs)
    impl = model.config._attn_implementation
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ctrl = papa.attach(model)
    assert not any(p.requires_grad for p in model.parameters())
    ctrl.set_constants(data_free_constants("identity", ctrl.signature, N))
    ctrl.replace()
    assert not torch.allclose(_hidden(model, inputs), before)
    papa.detach(model)
    assert model.config._attn_implementation == impl
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert torch.equal(_hidden(model, inputs), before)
    assert papa.controller_of(model) is None
    papa.attach(model).detach()  # attachable again


@pytest.mark.parametrize("which", ["single", "batch_of_same"])
def test_self_constants_reproduce_the_model(tiny, which):
    """Constants captured from one input, applied with every head replaced, give back the original outputs."""
    model, tok = tiny
    texts = ["the cat sat on the mat"] if which == "single" else ["john ran to london"] * 3
    for n in (N, _unpadded_length(tok, texts[0])):  # padded, then no padding at all
        inputs = _batch(model, tok, texts, n=n)
        before = _hidden(model, inputs)
        ctrl = papa.attach(model)
        ctrl.set_constants(_self_constants(ctrl, model, inputs, n))
        ctrl.replace()
        after = _hidden(model, inputs)
        papa.detach(model)
        assert torch.allclose(_real(after, inputs), _real(before, inputs), atol=1e-5), n


def test_unpadded_input_without_attention_mask(tiny):
    model, tok = tiny
    n = _unpadded_length(tok, "the cat sat on the mat")
    inputs = _batch(model, tok, ["the cat sat on the mat"], n=n)
    assert bool(inputs["attention_mask"].all())
    inputs.pop("attention_mask")
    before = _hidden(model, inputs)
    ctrl = papa.attach(model)
    ctrl.set_constants(_self_constants(ctrl, model, inputs, n))
    ctrl.replace()
    assert torch.allclose(_hidden(model, inputs), before, atol=1e-5)


def test_constant_probs_mask_pads_and_rows_sum_to_one(tiny):
    model, tok = tiny
    ctrl = papa.attach(model)
    inputs = _batch(model, tok)
    valid = inputs["attention_mask"].bool()
    for kind in ("toeplitz", "identity"):
        ctrl.set_constants(data_free_constants(kind, ctrl.signature, N))
        c = ctrl.constant_probs(0, slice(None), valid, N, torch.float32)
        assert c.shape == (len(SENTS), ctrl.num_heads, N, N)
        assert torch.all(c.masked_select(~valid[:, None, None, :].expand_as(c)) == 0)
        real_rows = c.sum(-1)[valid[:, None, :].expand(-1, ctrl.num_heads, -1)]
        if kind == "toeplitz":
            assert torch.allclose(real_rows, torch.ones_like(real_rows), atol=1e-6)
    ctrl.set_constants(data_free_constants("zeros", ctrl.signature, N))
    assert torch.all(ctrl.constant_probs(0, slice(None), valid, N, torch.float32) == 0)


def test_pad_tokens_never_influence_replaced_heads(tiny):
    """Changing the ids at pad positions changes nothing at real positions, with all heads replaced."""
    model, tok = tiny
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
    ctrl.replace()
    inputs = _batch(model, tok)
    before = _hidden(model, inputs)
    pads = inputs["attention_mask"] == 0
    assert pads.any()

    def scramble_pads(module, args, output):
        return output + 10 * torch.randn_like(output) * pads[..., None]

    handle = model.embeddings.register_forward_hook(scramble_pads)
    after = _hidden(model, inputs)
    handle.remove()
    assert not torch.allclose(after, before)  # the pads did change
    assert torch.allclose(_real(after, inputs), _real(before, inputs), atol=1e-5)


def _value_rows(attn, heads: int, d: int) -> torch.Tensor:
    """[H, d, ...] view of what makes each head's values: a value projection's bias, DeBERTa v1's v_bias, or the
    value third of a fused projection's weight (ModernBERT's Wqkv has no bias)."""
    if getattr(attn, "v_bias", None) is not None:
        return attn.v_bias.view(heads, d)
    for name in ("value", "value_proj", "v_lin", "v_proj"):
        if hasattr(attn, name):
            return getattr(attn, name).bias.view(heads, d)
    fused = attn.Wqkv.weight
    return fused.view(3, heads, d, fused.shape[-1])[2]


def test_zeros_constants_prune_the_head(tiny):
    """A zeros-replaced head contributes nothing: its value projection no longer matters."""
    model, tok = tiny
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("zeros", ctrl.signature, N))
    ctrl.replace([(layer, 1) for layer in range(ctrl.num_layers)])  # ALBERT's layers share their projections
    inputs = _batch(model, tok)
    before = _hidden(model, inputs)
    rows = _value_rows(ctrl.info.attention_modules[0], ctrl.num_heads, ctrl.info.head_dim)
    # Not a constant shift: a weight row's constant shift is invisible after a LayerNorm (ModernBERT's Wqkv).
    delta = torch.linspace(-1.0, 1.0, rows[1].numel(), device=rows.device).view_as(rows[1])
    with torch.no_grad():
        rows[1] += delta
    assert torch.allclose(_hidden(model, inputs), before, atol=1e-6)
    with torch.no_grad():
        rows[0] += delta  # a kept head's value does matter
    assert not torch.allclose(_hidden(model, inputs), before, atol=1e-3)


def test_lambda_limits(tiny):
    model, tok = tiny
    inputs = _batch(model, tok)
    original = _hidden(model, inputs)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
    ctrl.replace()
    replaced = _hidden(model, inputs)
    ctrl.mix()
    assert torch.allclose(ctrl.lambdas, torch.full_like(ctrl.lambdas, 0.5))
    halfway = _hidden(model, inputs)
    assert not torch.allclose(halfway, original, atol=1e-4) and not torch.allclose(halfway, replaced, atol=1e-4)
    with torch.no_grad():
        ctrl.theta.fill_(1e4)
    assert torch.allclose(_real(_hidden(model, inputs), inputs), _real(original, inputs), atol=1e-5)
    with torch.no_grad():
        ctrl.theta.fill_(-1e4)
    assert torch.allclose(_real(_hidden(model, inputs), inputs), _real(replaced, inputs), atol=1e-5)


def test_partial_replacement_matches_mixing_at_the_limits(tiny):
    """The keep/replace fast path and the λ path agree head by head (two code paths, one semantics)."""
    model, tok = tiny
    inputs = _batch(model, tok)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
    chosen = [(0, 0), (0, 3), (1, 1)]
    ctrl.replace(chosen)
    fast = _hidden(model, inputs)
    ctrl.mix()
    mask = ctrl._mask(chosen)
    with torch.no_grad():
        ctrl.theta.copy_(torch.where(mask, -1e4, 1e4))
    slow = _hidden(model, inputs)
    assert torch.allclose(_real(fast, inputs), _real(slow, inputs), atol=1e-5)


def test_gradients_reach_theta_and_nothing_else(tiny):
    model, tok = tiny
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
    ctrl.mix()
    out = model(**_batch(model, tok)).last_hidden_state
    out.pow(2).mean().backward()
    assert ctrl.theta.grad is not None and ctrl.theta.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.parameters())
    assert [n for n, p in ctrl.named_parameters() if p.requires_grad] == ["theta"]


def test_trainable_constants_get_gradients(tiny):
    model, tok = tiny
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N), trainable=True)
    ctrl.replace()
    model(**_batch(model, tok)).last_hidden_state.pow(2).mean().backward()
    assert ctrl.constants.grad is not None and ctrl.constants.grad.abs().sum() > 0
    assert ctrl.theta.grad is None  # replaced heads do not use λ
    with torch.no_grad():
        ctrl.constants.sub_(10.0)  # all negative: clamped to 0 at use, the heads act pruned, nothing breaks
    assert torch.isfinite(model(**_batch(model, tok)).last_hidden_state).all()


def test_modes_and_head_validation(tiny):
    model, _ = tiny
    ctrl = papa.attach(model)
    with pytest.raises(papa.PapaError, match="before constants are set"):
        ctrl.replace()
    ctrl.set_constants(data_free_constants("zeros", ctrl.signature, N))
    ctrl.replace([(1, 2)])
    assert ctrl.modes[1, 2] == REPLACE and int((ctrl.modes == KEEP).sum()) == ctrl.num_layers * ctrl.num_heads - 1
    ctrl.mix([(0, 0)])
    assert ctrl.modes[0, 0] == MIX and ctrl.head_modes()[0][0] == "mix"
    with pytest.raises(ValueError, match="does not exist"):
        ctrl.replace([(5, 0)])
    with pytest.raises(ValueError, match="shape"):
        ctrl.replace(torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="unknown head mode"):
        ctrl.set_modes("drop")
    ctrl.keep_all()
    assert bool((ctrl.modes == KEEP).all())


def test_attach_twice_is_an_error(tiny):
    model, _ = tiny
    papa.attach(model)
    with pytest.raises(papa.PapaError, match="already attached"):
        papa.attach(model)


def test_input_longer_than_constants(tiny):
    model, tok = tiny
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, 8))
    ctrl.replace()
    with pytest.raises(papa.InputError, match="length 8"):
        model(**_batch(model, tok, n=12))
    ctrl.keep_all()
    model(**_batch(model, tok, n=12))  # nothing replaced: the constants' length does not matter


def test_attention_outside_the_interface_is_refused_naming_why():
    """MPNet computes attention in its own code: attach and the config check say so and name what is supported."""
    model = AutoModel.from_config(MPNetConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=8,
                                              intermediate_size=8))
    with pytest.raises(papa.UnsupportedModelError, match="none of its modules computes attention through transformers' AttentionInterface.*DeBERTa"):
        papa.attach(model)
    with pytest.raises(papa.UnsupportedModelError, match="'mpnet'.*not through.*bert, deberta"):
        check_config(model.config)


def test_an_unregistered_interface_model_attaches_with_a_warning():
    """Mistral is not in the registry, but its attention goes through the interface: attached, told so, and known
    to be causal from its attention modules."""
    model = AutoModel.from_config(MistralConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                                hidden_size=8, intermediate_size=8, vocab_size=16)).eval()
    ids = torch.tensor([[1, 2, 3, 4]])
    ref = model(input_ids=ids).last_hidden_state
    with pytest.warns(UserWarning, match="'mistral' is not among papa's verified architectures"):
        ctrl = papa.attach(model)
    assert (ctrl.num_layers, ctrl.num_heads) == (2, 2) and ctrl.info.causal
    assert torch.equal(model(input_ids=ids).last_hidden_state, ref)
    papa.detach(model)


def test_task_head_models_and_eager_implementation():
    """attach finds the encoder inside a task-headed model, and works on an eager model too."""
    from transformers import AutoModelForSequenceClassification

    from conftest import tiny_model, tiny_tokenizer

    base = tiny_model("bert", attn_implementation="eager")
    tok = tiny_tokenizer("bert")
    clf = AutoModelForSequenceClassification.from_config(base.config).eval()
    for model in (base, clf):
        inputs = _batch(model, tok)
        before = model(**inputs)[0]
        ctrl = papa.attach(model)
        assert model(**inputs)[0].equal(before)
        ctrl.set_constants(data_free_constants("identity", ctrl.signature, N))
        ctrl.replace([(0, 0)])
        assert not torch.allclose(model(**inputs)[0], before)
        papa.detach(model)
        assert model.config._attn_implementation == "eager"


def test_attached_reuses_the_callers_controller_and_detaches_only_its_own(tiny):
    from papa.method.controller import attached

    model, _ = tiny
    with pytest.raises(RuntimeError, match="inside"):
        with attached(model) as ctrl:
            assert papa.controller_of(model) is ctrl
            raise RuntimeError("inside")
    assert papa.controller_of(model) is None  # attached for the block, detached after it, even on an error
    own = papa.attach(model)
    try:
        with attached(model) as ctrl:
            assert ctrl is own
        assert papa.controller_of(model) is own  # the caller's controller stays attached
    finally:
        papa.detach(model)
