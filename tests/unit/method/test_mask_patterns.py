"""Models whose masks are more than padding: causal LMs (Llama and Qwen2 with grouped-query attention, Qwen2 with a
causal sliding window in its second layer, GPT-2 with learned positions) and ModernBERT's sliding-window layers. The invariants of test_attach.py, on raw token ids (a decoder's input layout belongs to its
tasks): replaced heads follow the mask their attention function receives, renormalised over what it allows."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import papa
from conftest import tiny_model
from papa.method.attention_free import drop_query_key, restore_query_key
from papa.method.constants import ConstantMatrices
from papa.method.masks import Allowed

N = 12
PATTERNED = ("llama", "qwen2", "gpt2", "modernbert")
KV_HEADS = {"llama": 2, "qwen2": 1, "gpt2": 4, "modernbert": 4}


def _batch(arch: str, padded: bool = True) -> dict[str, torch.Tensor]:
    """Two sequences of N ids; the second right-padded to 7 real tokens (ids avoid the special ones). Drawn on the
    CPU (the same ids on every device), then on the tests' device (PAPA_TEST_DEVICE)."""
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(5, 60, (2, N), generator=g, device="cpu").to(torch.get_default_device())
    mask = torch.ones(2, N, dtype=torch.long)
    if padded:
        mask[1, 7:] = 0
        ids[1, 7:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _hidden(model, batch) -> torch.Tensor:
    with torch.no_grad():
        return model(**batch).last_hidden_state


def _real(h: torch.Tensor, batch) -> torch.Tensor:
    return h[batch["attention_mask"].bool()]


def _self_constants(model, ctrl, batch):
    with ctrl.capturing(N) as stats, torch.no_grad():
        model(**batch)
    return stats.to_constants(ctrl.signature, layout="standard")


def _uniform(ctrl) -> ConstantMatrices:
    """Every entry 1: replaced heads attend uniformly over whatever their mask allows."""
    c = papa.data_free_constants("toeplitz", ctrl.signature, N, layout="standard")
    return dataclasses.replace(c, matrices=torch.ones_like(c.matrices))


def _allowed_pattern(arch: str, model, layer: int) -> torch.Tensor:
    """[N, N] bool: which keys a query may see in `layer`, padding aside."""
    i = torch.arange(N)
    if arch in ("llama", "gpt2"):
        return i[None, :] <= i[:, None]
    if arch == "qwen2":
        causal = i[None, :] <= i[:, None]
        if model.config.layer_types[layer] == "sliding_attention":  # the last `sliding_window` keys
            return causal & (i[:, None] - i[None, :] < model.config.sliding_window)
        return causal
    if model.config.layer_types[layer] == "sliding_attention":
        return (i[None, :] - i[:, None]).abs() <= model.config.sliding_window
    return torch.ones(N, N, dtype=torch.bool)


@pytest.mark.parametrize("arch", PATTERNED)
def test_geometry_and_nothing_replaced(arch):
    model = tiny_model(arch)
    batch = _batch(arch)
    ref = _hidden(model, batch)
    ctrl = papa.attach(model)
    assert (ctrl.num_layers, ctrl.num_heads) == (2, 4)
    assert ctrl.info.num_kv_heads == KV_HEADS[arch]  # constants stay per query head
    assert ctrl.info.causal == (arch != "modernbert")
    assert torch.equal(_hidden(model, batch), ref)
    papa.detach(model)
    assert torch.equal(_hidden(model, batch), ref)


@pytest.mark.parametrize("arch", PATTERNED)
@pytest.mark.parametrize("padded", [False, True])
def test_self_constants_reproduce_the_input(arch, padded):
    """Constants averaged over one input are its own attention; every head replaced gives the original output."""
    model = tiny_model(arch)
    ctrl = papa.attach(model)
    ref = _hidden(model, _batch(arch, padded))
    for row in range(2 if padded else 1):
        one = {k: v[row:row + 1] for k, v in _batch(arch, padded).items()}
        ctrl.keep_all()
        ctrl.set_constants(_self_constants(model, ctrl, one))
        ctrl.replace()
        got = _hidden(model, one)
        assert torch.allclose(_real(got, one), _real(ref[row:row + 1], one), atol=1e-5)


@pytest.mark.parametrize("arch", PATTERNED)
def test_replaced_rows_follow_the_mask_and_sum_to_one(arch):
    """With λ = 0 every head is its constant: zero wherever the mask forbids, rows summing to 1 (eager weights)."""
    model = tiny_model(arch, attn_implementation="eager")
    batch = _batch(arch)
    ctrl = papa.attach(model)
    ctrl.set_constants(_uniform(ctrl))
    ctrl.mix()
    with torch.no_grad():
        ctrl.theta.fill_(-1e4)
        out = model(**batch, output_attentions=True)
    real = batch["attention_mask"].bool()
    for layer, probs in enumerate(out.attentions):  # [B, H, N, N]
        allowed = _allowed_pattern(arch, model, layer)[None, None] & real[:, None, None, :]
        assert torch.all(probs[~allowed.expand_as(probs)] == 0)
        rows = probs.sum(-1)[real[:, None, :].expand(-1, ctrl.num_heads, -1)]
        assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
        # uniform constants: each allowed key gets 1 / (number allowed in the row)
        expect = allowed.float() / allowed.float().sum(-1, keepdim=True).clamp_min(1)
        assert torch.allclose(probs[:, :, :7], expect.expand_as(probs)[:, :, :7], atol=1e-5)


@pytest.mark.parametrize("arch", PATTERNED)
def test_lambda_limits_and_fast_equals_plain(arch):
    model = tiny_model(arch)
    batch = _batch(arch)
    ctrl = papa.attach(model)
    ref = _hidden(model, batch)
    ctrl.set_constants(_self_constants(model, ctrl, {k: v[:1] for k, v in batch.items()}))
    half = torch.zeros(2, 4, dtype=torch.bool)
    half[:, ::2] = True
    ctrl.replace(half)
    fast = _hidden(model, batch)
    ctrl.fast_paths = False
    plain = _hidden(model, batch)
    assert torch.allclose(_real(fast, batch), _real(plain, batch), atol=1e-5)
    ctrl.replace()
    replaced = _hidden(model, batch)
    ctrl.mix()
    for theta, expect in ((30.0, ref), (-30.0, replaced)):
        with torch.no_grad():
            ctrl.theta.fill_(theta)
        for fast_paths in (True, False):
            ctrl.fast_paths = fast_paths
            assert torch.allclose(_real(_hidden(model, batch), batch), _real(expect, batch), atol=1e-5)


@pytest.mark.parametrize("arch", PATTERNED)
def test_capture_is_the_average_of_eager_attentions(arch):
    model = tiny_model(arch, attn_implementation="eager")
    batch = _batch(arch)
    with torch.no_grad():
        attentions = model(**batch, output_attentions=True).attentions
    ctrl = papa.attach(model)
    with ctrl.capturing(N) as stats, torch.no_grad():
        model(**batch)
    real = batch["attention_mask"].bool()
    pair = (real[:, :, None] & real[:, None, :]).float()
    expect = torch.stack([(a * pair[:, None]).sum(0) for a in attentions]) / pair.sum(0).clamp_min(1)
    assert torch.allclose(stats.averages(), expect, atol=1e-6)
    # A causal row i sees keys 0..i: those are the entries counted (pairs of real tokens), nothing above the diagonal.
    counted = pair.sum(0).double()
    assert torch.equal(stats.counts, counted.tril() if ctrl.info.causal else counted)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_query_key_dropping_keeps_grouped_keys_whole(arch):
    model = tiny_model(arch)
    batch = _batch(arch)
    ctrl = papa.attach(model)
    ctrl.set_constants(_self_constants(model, ctrl, batch))
    heads = torch.tensor([[True, False, True, True], [False, False, False, False]])
    ctrl.replace(heads)
    expected = _hidden(model, batch)
    drop_query_key(ctrl)
    attention = ctrl.info.attention_modules[0]
    assert attention.q_proj.out_features == 1 * ctrl.info.head_dim
    # every key/value head still serves a kept head of layer 0 (Llama: 2 for heads 0-1 and 2-3; Qwen2: 1 for all)
    assert attention.k_proj.out_features == KV_HEADS[arch] * ctrl.info.head_dim
    assert torch.allclose(_real(_hidden(model, batch), batch), _real(expected, batch), atol=1e-5)
    restore_query_key(ctrl)


@pytest.mark.parametrize("arch", ["modernbert", "gpt2"])
def test_fused_projection_cannot_drop_query_key(arch):
    model = tiny_model(arch)
    ctrl = papa.attach(model)
    ctrl.set_constants(_uniform(ctrl))
    ctrl.replace([(0, 0)])
    with pytest.raises(papa.PapaError, match="fused projection"):
        drop_query_key(ctrl)


def test_generation_with_a_cache_needs_whole_sequences():
    """Nothing replaced: generation works as before; a replaced head refuses a key/value cache, saying what to do."""
    model = tiny_model("llama")
    from transformers import LlamaForCausalLM

    lm = LlamaForCausalLM(model.config).eval()
    lm.model.load_state_dict(model.state_dict())
    ids = _batch("llama", padded=False)["input_ids"][:1, :5]
    ref = lm.generate(ids, max_new_tokens=3, do_sample=False)
    ctrl = papa.attach(lm)
    assert torch.equal(lm.generate(ids, max_new_tokens=3, do_sample=False), ref)
    ctrl.set_constants(_uniform(ctrl))
    ctrl.replace([(1, 0)])
    with torch.no_grad():
        lm(input_ids=ids, use_cache=False)
    with pytest.raises(papa.PapaError, match="use_cache=False"):
        lm.generate(ids, max_new_tokens=3, do_sample=False)


def test_allowed_factors_masks_into_pattern_and_padding():
    real = torch.tensor([[True] * 4, [True, True, False, False]])
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    four_d = (causal[None] & real[:, None, :])[:, None]
    a = Allowed.from_mask(four_d, 4, 4, causal=True)
    assert a.factored and torch.equal(a.pattern, causal) and torch.equal(a.keys, real)
    additive = torch.where(four_d, 0.0, torch.finfo(torch.float32).min)
    assert torch.equal(Allowed.from_mask(additive, 4, 4, causal=True).as_bool(), four_d)
    assert torch.equal(Allowed.from_mask(None, 4, 4, causal=True).pattern, causal)
    assert Allowed.from_mask(None, 4, 4, causal=False).as_bool() is None
    odd = four_d.clone()
    odd[0, 0, 3, 0] = False  # one query loses one key: not pattern & padding
    b = Allowed.from_mask(odd, 4, 4, causal=True)
    assert not b.factored and torch.equal(b.as_bool(), odd)
