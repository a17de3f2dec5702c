"""The fast paths (papa.method.attention_free and the controller's fast keep/replace/mix) against the plain paths.

The plain path is the controller with ``fast_paths = False``: every changed layer materialises the [B, H, n, n]
probabilities exactly as the method is defined (paper 3.2, 3.3). All five architectures.
"""
from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import papa
from papa.method.adapters.interface import output_owner
from papa.method.attention_free import (QK_HEADS, drop_query_key, query_key_dropped, query_key_dropped_while,
                                        restore_query_key)
from papa.method.constant_heads import ConstantHeads, ConstantWorkspace, constant_attention
from papa.method.constants import data_free_constants
from papa.method.layout import encode

SENTS = ["the cat sat on the mat", "a dog", "john ran to london and paris", "it was not good"]
N = 16


def _inputs(model, tok, texts=SENTS):
    return encode(tok, texts, max_length=N, model_type=model.config.model_type).inputs


def _hidden(model, inputs):
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def _real(x, inputs):
    return x[inputs["attention_mask"].bool()]


def _setup(model, tok, kind="average"):
    ctrl = papa.attach(model)
    if kind == "average":
        with ctrl.capturing(N) as stats, torch.no_grad():
            model(**_inputs(model, tok, SENTS[::-1] + ["the plot was very bad"]))
        ctrl.set_constants(stats.to_constants(ctrl.signature, layout="sep_last"))
    else:
        ctrl.set_constants(data_free_constants(kind, ctrl.signature, N))
    return ctrl


def _skip_if_fused(ctrl) -> None:
    """ModernBERT computes Q, K and V in one projection: dropping is refused (tested in test_mask_patterns.py)."""
    if ctrl.info.hook == "attention_function" and ctrl.info.architecture.query_key is None:
        pytest.skip(f"{ctrl.info.model_type} fuses its query/key/value projection: Q/K cannot be dropped")


def _heads(ctrl, fraction_kept: float, seed: int = 0) -> torch.Tensor:
    """[L, H] mask of replaced heads, spread over layers as a ranking spreads them."""
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(ctrl.num_layers * ctrl.num_heads, generator=g, device="cpu")
    mask = torch.zeros(ctrl.num_layers * ctrl.num_heads, dtype=torch.bool)
    mask[order[: round((1 - fraction_kept) * mask.numel())]] = True
    return mask.view(ctrl.num_layers, ctrl.num_heads)


def _reference(ctrl, model, inputs):
    ctrl.fast_paths = False
    try:
        return _hidden(model, inputs)
    finally:
        ctrl.fast_paths = True


def test_constant_attention_equals_masked_renormalised_product():
    g = torch.Generator().manual_seed(0)
    c = torch.rand(3, 6, 6, generator=g, device="cpu")
    c[1, 2] = 0.0                                   # an empty row stays 0
    c[2, :, 4:] = 0.0                                # mass only where keys 4, 5 are pads in example 0 ...
    c[2, 0, :4] = 0.0                                # ... so row 0 of head 2 is empty for that example
    value = torch.randn(2, 3, 6, 5, generator=g, device="cpu")
    valid = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    c, value = c.to(valid.device), value.to(valid.device)  # the test device (PAPA_TEST_DEVICE)
    # one workspace for every call, as a controller keeps it: other keys, fewer heads, keys again
    workspace = ConstantWorkspace(3, 6, 2, 5, value.dtype, value.device)
    for v, heads in ((valid, 3), (None, 3), (valid, 2), (valid[1:], 3)):
        m = c[:heads].unsqueeze(0) * (v[:, None, None, :].float() if v is not None else 1.0)
        s = m.sum(-1, keepdim=True)
        probs = torch.where(s > 0, m / s.clamp_min(1e-30), torch.zeros_like(m))
        expected = (probs @ value[:, :heads]).transpose(1, 2)
        for space in (None, workspace):
            workspace.forget()  # a new pass
            got = constant_attention(ConstantHeads.of(c[:heads], value.dtype), value[:, :heads], v, space)
            assert got.shape == (2, 6, heads, 5)
            assert torch.allclose(got, expected, atol=1e-6)
            assert torch.isfinite(got).all()


def test_constant_attention_in_bfloat16_is_the_float32_result_rounded():
    """bf16 values and constants: the one product accumulates in float32 and rounds its numerators and row sums to
    bf16, as the float32 path's row sums were rounded before dividing."""
    g = torch.Generator().manual_seed(1)
    c, value = torch.rand(4, 16, 16, generator=g), torch.randn(3, 4, 16, 8, generator=g)
    valid = torch.ones(3, 16, dtype=torch.bool)
    valid[0, 9:] = False
    expected = constant_attention(ConstantHeads.of(c, torch.float32), value, valid,
                                  ConstantWorkspace(4, 16, 3, 8, torch.float32, value.device))
    got = constant_attention(ConstantHeads.of(c, torch.bfloat16), value.bfloat16(), valid,
                             ConstantWorkspace(4, 16, 3, 8, torch.bfloat16, value.device))
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kept", [0.0, 1 / 4, 1 / 2])
@pytest.mark.parametrize("kind", ["average", "zeros"])
def test_fast_replace_matches_plain_path(tiny, kept, kind):
    model, tok = tiny
    inputs = _inputs(model, tok)
    ctrl = _setup(model, tok, kind)
    ctrl.replace(_heads(ctrl, kept))
    assert torch.allclose(_real(_hidden(model, inputs), inputs), _real(_reference(ctrl, model, inputs), inputs),
                          atol=1e-5)


@pytest.mark.parametrize("kept", [0.0, 1 / 8, 1 / 2, 1.0])
def test_dropped_query_key_match_plain_path(tiny, kept):
    model, tok = tiny
    inputs = _inputs(model, tok)
    ctrl = _setup(model, tok)
    _skip_if_fused(ctrl)
    replaced = _heads(ctrl, kept)
    ctrl.replace(replaced)
    expected = _reference(ctrl, model, inputs)
    attached = _hidden(model, inputs)

    calls = []
    names = ctrl.info.architecture.query_key or ("query_proj", "key_proj", "in_proj")
    modules = list({id(m): m for m in ctrl.info.attention_modules}.values())  # ALBERT: one module, every layer
    projections = [p for m in modules for name, p in m.named_children() if name in names]
    handles = [p.register_forward_hook(lambda *a: calls.append(1)) for p in projections]
    drop_query_key(ctrl)
    got = _hidden(model, inputs)
    for h in handles:
        h.remove()
    assert torch.allclose(_real(got, inputs), _real(expected, inputs), atol=1e-5)

    full_layers = int(replaced.all(dim=1).sum())
    bert_like = ctrl.info.hook == "attention_function"
    shared = len(modules) < ctrl.num_layers
    if bert_like and not shared:
        for layer, module in enumerate(ctrl.info.attention_modules):
            kept_heads = int((~replaced[layer]).sum())
            if 0 < kept_heads < ctrl.num_heads:
                query, key = (getattr(module, name) for name in names)
                assert query.out_features == key.out_features == kept_heads * ctrl.info.head_dim
    # The original projections of replaced heads are never run: BERT-like layers with any replaced head use
    # sliced copies; DeBERTa skips Q/K in fully replaced layers (2 projections, or v1's in_proj, per layer).
    per_layer = 2 if hasattr(ctrl.info.attention_modules[0], "query_proj") or bert_like else 1
    changed = int(replaced.any(dim=1).sum()) if bert_like else full_layers
    if shared:  # one module keeps what any layer keeps: sliced (originals never run) if some head no layer keeps
        changed = ctrl.num_layers if bool(replaced.all(dim=0).any()) else 0
    assert len(calls) == per_layer * (ctrl.num_layers - changed)
    assert query_key_dropped(ctrl) == (changed > 0)

    restore_query_key(ctrl)
    assert not query_key_dropped(ctrl)
    assert torch.equal(_hidden(model, inputs), attached)


def test_detach_undoes_dropped_projections(tiny):
    model, tok = tiny
    inputs = _inputs(model, tok)
    before = _hidden(model, inputs)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    ctrl = _setup(model, tok)
    _skip_if_fused(ctrl)
    ctrl.replace()
    drop_query_key(ctrl)
    papa.detach(model)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert torch.equal(_hidden(model, inputs), before)


def test_query_key_dropped_while_restores_even_on_errors(tiny):
    model, tok = tiny
    ctrl = _setup(model, tok)
    _skip_if_fused(ctrl)
    ctrl.replace()
    with query_key_dropped_while(ctrl):
        assert query_key_dropped(ctrl)
    assert not query_key_dropped(ctrl)
    with pytest.raises(RuntimeError, match="boom"), query_key_dropped_while(ctrl):
        raise RuntimeError("boom")
    assert not query_key_dropped(ctrl)


def test_changing_modes_after_dropping_is_an_error(arch):
    from conftest import tiny_model, tiny_tokenizer

    if arch.startswith("deberta"):
        pytest.skip("DeBERTa only drops fully replaced layers; their forward does not look at the modes")
    model, tok = tiny_model(arch), tiny_tokenizer(arch)
    inputs = _inputs(model, tok)
    ctrl = _setup(model, tok)
    _skip_if_fused(ctrl)
    ctrl.replace([(layer, 0) for layer in range(ctrl.num_layers)])  # every layer: ALBERT's shared module slices too
    drop_query_key(ctrl)
    ctrl.set_modes("keep", [(0, 0)])
    with pytest.raises(papa.PapaError, match="restore_query_key"):
        _hidden(model, inputs)
    restore_query_key(ctrl)
    ctrl.mix()
    with pytest.raises(papa.PapaError, match="keep' and 'replace"):
        drop_query_key(ctrl)


def test_fast_mixing_matches_plain_path_and_gradients(tiny):
    model, tok = tiny
    inputs = _inputs(model, tok)
    ctrl = _setup(model, tok)
    ctrl.mix()
    ctrl.replace([(0, 1)])  # one replaced and one kept head beside the mixed ones
    ctrl.set_modes("keep", [(1, 2)])
    with torch.no_grad():
        ctrl.theta.copy_(torch.randn(ctrl.theta.shape, generator=torch.Generator().manual_seed(1), device="cpu"))
    results = []
    for fast in (True, False):
        ctrl.fast_paths = fast
        ctrl.theta.grad = None
        out = model(**inputs).last_hidden_state
        _real(out, inputs).pow(2).mean().backward()
        results.append((_real(out, inputs).detach(), ctrl.theta.grad.clone()))
    (out_fast, grad_fast), (out_ref, grad_ref) = results
    assert torch.allclose(out_fast, out_ref, atol=1e-5)
    assert torch.allclose(grad_fast, grad_ref, atol=1e-6, rtol=1e-4)
    assert grad_fast.abs().sum() > 0 and all(p.grad is None for p in model.parameters())


def test_fast_path_gradients_of_trainable_constants(tiny):
    model, tok = tiny
    inputs = _inputs(model, tok)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N), trainable=True)
    ctrl.replace(_heads(ctrl, 1 / 2))
    grads = []
    for fast in (True, False):
        ctrl.fast_paths = fast
        ctrl.constants.grad = None
        _real(model(**inputs).last_hidden_state, inputs).pow(2).mean().backward()
        grads.append(ctrl.constants.grad.clone())
    assert grads[0].abs().sum() > 0
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4)


def test_training_mode_with_attention_dropout_uses_the_plain_path(tiny):
    """Dropout on B cannot move past B·V, so in training mode the fast path must give exactly the plain result."""
    model, tok = tiny
    inputs = _inputs(model, tok)
    ctrl = _setup(model, tok)
    ctrl.replace(_heads(ctrl, 1 / 2))
    model.train()
    outs = []
    for fast in (True, False):
        ctrl.fast_paths = fast
        torch.manual_seed(0)
        outs.append(_hidden(model, inputs))
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("setting", ["plain", "replace_half", "attention_free", "mix"])
def test_bf16_autocast_stays_close_to_float32(tiny, setting):
    """bf16 autocast (what `benchmarks/bench.py --dtype bf16` runs) changes outputs by bf16 rounding only."""
    model, tok = tiny
    inputs = _inputs(model, tok)
    device_type = next(model.parameters()).device.type
    if model.config.model_type == "deberta" and setting != "attention_free":
        with pytest.raises(RuntimeError, match="BFloat16"), torch.autocast(device_type, dtype=torch.bfloat16):
            _hidden(model, inputs)  # the unattached model: transformers' own masked_fill overflows
        pytest.skip("transformers' DeBERTa v1 does not run under bf16 autocast (CPU or CUDA), papa or not")
    ctrl = _setup(model, tok)
    if setting == "replace_half":
        ctrl.replace(_heads(ctrl, 1 / 2))
    elif setting == "attention_free":
        _skip_if_fused(ctrl)
        ctrl.replace()
        drop_query_key(ctrl)
    elif setting == "mix":
        ctrl.mix()
    full = _real(_hidden(model, inputs), inputs)
    with torch.autocast(device_type, dtype=torch.bfloat16):
        half = _real(_hidden(model, inputs), inputs).float()
    # bf16 keeps 8 bits of mantissa (relative step 2^-8 ≈ 0.4%); two layers of it stay within a few percent.
    rel = (half - full).norm() / full.norm()
    assert rel < 0.05, rel
    assert torch.nn.functional.cosine_similarity(half, full, dim=-1).min() > 0.99


class _Ops(TorchDispatchMode):
    """How many times a forward pass runs each aten op, by name."""

    def __init__(self):
        super().__init__()
        self.names = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("arch", ["bert", "distilbert", "albert", "llama"])
def test_kept_heads_first_layout(arch):
    """With Q/K dropped, a layer keeping some heads permutes V's rows and the output projection's columns kept heads
    first, so both head groups are views: no gather or scatter runs. The output projection then sums its columns in
    another order, so the hidden states equal the gathered layout's to float tolerance, not bit for bit; restoring
    puts the original projections back (the very objects). ALBERT's one module with differing layer plans, and
    Llama's grouped keys, keep the gathered layout."""
    from conftest import tiny_model, tiny_tokenizer

    model, tok = tiny_model(arch), tiny_tokenizer(arch)
    inputs = _inputs(model, tok)
    ctrl = _setup(model, tok)
    layers, heads = torch.meshgrid(torch.arange(ctrl.num_layers), torch.arange(ctrl.num_heads), indexing="ij")
    with torch.no_grad(), _Ops() as plain_ops:  # the model's own gathers (e.g. in building its mask)
        model(**inputs)
    ctrl.replace((layers + heads) % 2 == 0)  # half of each layer's heads, other ones in consecutive layers
    value_name, output_path = ctrl.info.architecture.value_output
    module = ctrl.info.attention_modules[0]
    owner, output_name = output_owner(ctrl.info.base, module, output_path)
    originals = getattr(module, value_name), getattr(owner, output_name)
    expected = _reference(ctrl, model, inputs)
    with query_key_dropped_while(ctrl):
        first = getattr(module.__dict__.get(QK_HEADS), "kept_first", False)
        got = _hidden(model, inputs)  # the first pass prepares the replaced heads' constants (gathered once)
        with _Ops() as ops:
            assert torch.equal(_hidden(model, inputs), got)
        permuted = getattr(module, value_name), getattr(owner, output_name)
    assert first == (arch in ("bert", "distilbert")), "kept-first where one plan serves the module, keys ungrouped"
    if first:
        plan = ctrl.plan(0)
        order = torch.tensor(plan.keep + plan.replace)
        d = ctrl.info.head_dim
        rows = (order[:, None] * d + torch.arange(d)).reshape(-1)
        assert torch.equal(permuted[0].weight, originals[0].weight[rows])
        assert torch.equal(permuted[1].weight, originals[1].weight[:, rows])
        gathers = ("index", "index_put_", "index_select")
        assert [ops.names[g] for g in gathers] == [plain_ops.names[g] for g in gathers]  # the model's own only
    torch.testing.assert_close(_real(got, inputs), _real(expected, inputs), rtol=1e-5, atol=1e-5)
    assert (getattr(module, value_name), getattr(owner, output_name)) == originals  # the same objects again


@pytest.mark.parametrize("kept", [0.0, 1 / 2])
def test_the_kept_workspace_follows_each_pass_padding(tiny, kept):
    """The controller keeps the constant heads' buffers across passes (`PapaController.workspace`): a pass with other
    padding, one with none, and one whose mask tensor was changed in place all give the plain path's result."""
    model, tok = tiny
    ctrl = _setup(model, tok)
    ctrl.replace(_heads(ctrl, kept))
    first = _inputs(model, tok)
    others = [_inputs(model, tok, SENTS[::-1]), _inputs(model, tok, [SENTS[2]] * 4)]
    in_place = _inputs(model, tok)
    for inputs in [first, *others, first]:
        assert torch.allclose(_real(_hidden(model, inputs), inputs), _real(_reference(ctrl, model, inputs), inputs),
                              atol=1e-5)
    _hidden(model, in_place)
    in_place["attention_mask"][0, 3:] = 0  # the same tensor, other padding
    assert torch.allclose(_real(_hidden(model, in_place), in_place),
                          _real(_reference(ctrl, model, in_place), in_place), atol=1e-5)
    # DeBERTa's replaced heads take the fast path only in layers without Q/K (drop_query_key)
    assert len(ctrl._workspaces) >= 1 or ctrl.info.hook != "attention_function"
    ctrl.detach()
    assert ctrl._workspaces == {}
