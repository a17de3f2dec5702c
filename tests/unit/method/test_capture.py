"""Capture equals the explicit average of output_attentions from an eager model on the same batches."""
from __future__ import annotations

import pytest
import torch

import papa
import papa.method.adapters.interface
import papa.method.capture
from conftest import tiny_model, tiny_tokenizer
from papa.method.adapters.interface import attention_in_blocks
from papa.method.constants import data_free_constants
from papa.method.layout import encode
from papa.method.masks import Allowed
from papa.tasks.corpus import Corpus

BATCHES = [
    ["the cat sat on the mat", "a dog", "john ran to london and paris"],
    ["it was not good", "the movie was very bad and the plot was not good", "mary"],
]
N = 20


def _explicit_average(model, tok, n):
    """The naive method: eager attention with output_attentions, masked sums and counts, then divide."""
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    sums = torch.zeros(L, H, n, n, dtype=torch.float64)
    counts = torch.zeros(n, n, dtype=torch.float64)
    for texts in BATCHES:
        inputs = encode(tok, texts, max_length=n, model_type=model.config.model_type, layout="sep_last").inputs
        with torch.no_grad():
            attentions = model(**inputs, output_attentions=True).attentions
        valid = inputs["attention_mask"].double()
        pair = valid[:, :, None] * valid[:, None, :]
        counts += pair.sum(0)
        for layer, a in enumerate(attentions):
            sums[layer] += (a.double() * pair[:, None]).sum(0)
    return torch.where(counts > 0, sums / counts.clamp_min(1), 0.0).float().cpu(), counts.cpu()


@pytest.mark.parametrize("launch_bound", [False, True], ids=["cpu-regime", "accelerator-regime"])
@pytest.mark.parametrize("arch", ["bert", "roberta", "electra", "deberta", "deberta-v2"])
def test_capture_equals_eager_output_attentions(arch, launch_bound, monkeypatch):
    """Both regimes of capture (`papa.method.capture.launch_bound`), run here on the CPU: the probabilities give the
    output and are reduced by a product and a sum, or the original function gives the output and the probabilities
    are reduced by one batched product."""
    monkeypatch.setattr(papa.method.capture, "launch_bound", lambda device: launch_bound)
    tok = tiny_tokenizer(arch)
    eager = tiny_model(arch, attn_implementation="eager")
    expected, expected_counts = _explicit_average(eager, tok, N)

    model = tiny_model(arch)  # default implementation (sdpa where supported); same seed, same weights
    ctrl = papa.attach(model)
    with ctrl.capturing(N) as stats, torch.no_grad():
        for texts in BATCHES:
            inputs = encode(tok, texts, max_length=N, model_type=arch, layout="sep_last").inputs
            captured = model(**inputs).last_hidden_state
    got = stats.averages()
    with torch.no_grad():  # capture leaves the outputs as they were (to float tolerance: another softmax path)
        torch.testing.assert_close(captured, model(**inputs).last_hidden_state, rtol=1e-5, atol=1e-5)
    assert torch.equal(stats.counts, expected_counts)
    assert stats.num_examples == sum(len(b) for b in BATCHES)
    assert torch.allclose(got, expected, atol=1e-6)
    assert torch.isfinite(got).all()
    # Slots that no example filled are never observed: exactly 0, not NaN. (The word-level BERT vocabulary
    # leaves such slots at N=20; the character-level toy tokenizers fill them.)
    unobserved = stats.counts == 0
    assert torch.all(got[..., unobserved] == 0)
    if arch in ("bert", "electra"):
        assert unobserved.any()


def test_extract_constants_matches_manual_capture():
    tok, model = tiny_tokenizer("bert"), tiny_model("bert")
    texts = [t for b in BATCHES for t in b]
    constants = papa.extract_constants(model, tok, Corpus("toy", texts), max_length=N, batch_size=2, layout="sep_last",
                                       progress=False)
    expected, counts = _explicit_average(tiny_model("bert", attn_implementation="eager"), tok, N)
    assert torch.allclose(constants.matrices, expected, atol=1e-6)
    assert torch.equal(constants.counts, counts)
    meta = constants.metadata
    assert (meta.kind, meta.num_examples, meta.max_length, meta.layout, meta.corpus) == ("average", 6, N, "sep_last", "toy")
    assert len(meta.corpus_fingerprint) == 64 and "max_length=20" in meta.preprocessing
    assert papa.controller_of(model) is None  # extraction detaches what it attached


def test_extract_on_pairs_and_empty_corpus():
    tok, model = tiny_tokenizer("roberta"), tiny_model("roberta")
    constants = papa.extract_constants(model, tok, Corpus("", ["the cat", "a dog"], ["sat", "ran far"]), max_length=N,
                                       progress=False)
    assert constants.counts[N // 2, N // 2] == 2  # the middle separator is always real
    with pytest.raises(papa.InputError, match="empty"):
        papa.extract_constants(model, tok, [], max_length=N, progress=False)


def test_capture_rejects_longer_inputs():
    tok, model = tiny_tokenizer("bert"), tiny_model("bert")
    ctrl = papa.attach(model)
    with pytest.raises(papa.InputError, match="max_length=8"):
        with ctrl.capturing(8):
            model(**encode(tok, ["the cat"], max_length=12).inputs)
    assert ctrl.stats is None  # the failed capture was cleaned up


def _block_bytes(monkeypatch, nbytes: int) -> None:
    """The block budget on every device (PAPA_TEST_DEVICE=cuda runs these tests on a GPU)."""
    monkeypatch.setattr(papa.method.adapters.interface, "CAPTURE_BLOCK_BYTES", nbytes)
    monkeypatch.setattr(papa.method.adapters.interface, "CAPTURE_BLOCK_BYTES_ACCELERATOR", nbytes)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "modernbert"])
def test_both_capture_regimes_agree_on_causal_and_windowed_masks(arch, monkeypatch):
    """Where the mask is more than the padding (causal, sliding window) the scores are masked entry by entry; both
    regimes of capture give the same statistics and outputs there too."""
    tok = tiny_tokenizer(arch)
    inputs = encode(tok, BATCHES[1], max_length=N, model_type=arch).inputs
    runs = []
    for launch_bound in (False, True):
        monkeypatch.setattr(papa.method.capture, "launch_bound", lambda device, bound=launch_bound: bound)
        model = tiny_model(arch)
        ctrl = papa.attach(model)
        with ctrl.capturing(N) as stats, torch.no_grad():
            runs.append((stats, model(**inputs, **({"use_cache": False} if arch != "modernbert" else {}))[0]))
    (cpu, cpu_out), (accelerator, accelerator_out) = runs
    assert torch.equal(cpu.counts, accelerator.counts) and cpu.sums.abs().sum() > 0
    torch.testing.assert_close(cpu.sums, accelerator.sums, rtol=1e-6, atol=1e-9)
    real = inputs["attention_mask"].bool()  # a padded query's row is the implementations' own business
    torch.testing.assert_close(cpu_out[real], accelerator_out[real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["bert", "roberta", "electra"])
@pytest.mark.parametrize("block_bytes", [1, 3 * N * 4 * 7, 3 * N * N * 4 * 2 + 1])  # 1 row; 7 rows; 2 heads
def test_capture_in_blocks_matches_one_block(arch, block_bytes, monkeypatch):
    """Capture materialises attention a block of heads and query rows at a time; the statistics, the model's
    outputs and mixed heads' outputs must not depend on the blocking."""
    tok = tiny_tokenizer(arch)
    inputs = encode(tok, BATCHES[1], max_length=N, model_type=arch).inputs

    def run(nbytes):
        _block_bytes(monkeypatch, nbytes)
        model = tiny_model(arch)
        ctrl = papa.attach(model)
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
        ctrl.mix(heads=[(0, 0), (1, 1)])
        with torch.no_grad():
            ctrl.theta.copy_(torch.linspace(-2, 2, ctrl.theta.numel()).view_as(ctrl.theta))
        ctrl.replace(heads=[(0, 1)])
        with ctrl.capturing(N) as stats, torch.no_grad():
            out = model(**inputs).last_hidden_state
        return stats, out

    whole_stats, whole_out = run(1 << 40)
    stats, out = run(block_bytes)
    assert torch.allclose(stats.sums, whole_stats.sums, atol=1e-6, rtol=0)
    assert torch.equal(stats.counts, whole_stats.counts)
    assert torch.allclose(out, whole_out, atol=1e-5)


@pytest.mark.parametrize("shape", ["per_head", "broadcast_rows"])
def test_blocks_slice_masks_of_every_shape(shape, monkeypatch):
    """A 4D mask may carry one slice per head ([B, H, n, n]) or broadcast its rows ([B, 1, 1, n])."""
    ctrl = papa.attach(tiny_model("bert"))
    B, H, n, d = 3, ctrl.num_heads, N, 8
    q, k, v = (torch.randn(B, H, n, d, generator=torch.Generator().manual_seed(i), device="cpu") for i in range(3))
    valid = torch.ones(B, n, dtype=torch.bool)
    valid[0, 12:] = False
    q, k, v = (x.to(valid.device) for x in (q, k, v))
    mask = torch.where(valid, 0.0, torch.finfo(torch.float32).min)[:, None, None, :]
    if shape == "per_head":
        mask = mask.expand(B, H, n, n).contiguous()
    outs = []
    for nbytes in (1, 1 << 40):
        _block_bytes(monkeypatch, nbytes)
        with ctrl.capturing(n):
            outs.append(attention_in_blocks(ctrl, 0, q, k, v, mask, None, valid, Allowed.from_keys(valid)))
    assert torch.allclose(outs[0], outs[1], atol=1e-6)
