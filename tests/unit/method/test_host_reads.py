"""A forward pass decides nothing per layer from values on the device: head modes and each layer's kept
and replaced heads are decided on the host when the modes change (`PapaController.plan`), so on a GPU no layer waits
for the device. A `TorchDispatchMode` records every op that reads a tensor back to the host (``.item()``, ``bool()``,
``nonzero()``, ``torch.equal``).

A mask that transformers built from the padding mask the model was called with is described without reading its
values (`papa.method.masks.Allowed.from_padding_mask`); only a 4D mask the caller passes is analysed on the host.
"""
from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import papa
from conftest import tiny_model, tiny_tokenizer
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import data_free_constants
from papa.method.layout import encode

aten = torch.ops.aten
# The ops through which a tensor's values reach the host (`.item()` and `bool()` dispatch `_local_scalar_dense`).
HOST_READS = {aten._local_scalar_dense, aten.nonzero, aten.equal, aten.is_nonzero}
N = 16
TEXTS = ["the cat sat on the mat", "a dog", "john ran to london and paris", "it was not good"]


class HostReads(TorchDispatchMode):
    """Counts the host reads of the ops run inside it, and all its ops."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter = Counter()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        if func.overloadpacket in HOST_READS:
            self.reads[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _half(ctrl) -> torch.Tensor:
    mask = torch.zeros(ctrl.num_layers, ctrl.num_heads, dtype=torch.bool)
    mask[:, : ctrl.num_heads // 2] = True
    return mask


MODES = {  # how each mode sets the heads; "dropped" also drops the replaced heads' Q/K work where the model can
    "nothing replaced": lambda ctrl: ctrl.keep_all(),
    "all replaced, Q/K dropped": lambda ctrl: ctrl.replace(None),
    "half replaced": lambda ctrl: ctrl.replace(_half(ctrl)),
    "λ mix": lambda ctrl: ctrl.mix(None),
    "capture": lambda ctrl: ctrl.keep_all(),
}


def _recorded(model, inputs) -> HostReads:
    model(**inputs)  # a first pass may fill caches (e.g. a dropped module's head positions)
    with HostReads() as recorder:
        model(**inputs)
    return recorder


def _reads(arch: str, mode: str, *, layers: int, padded: bool) -> dict[str, int]:
    """The host reads papa adds to one forward pass: those of the attached model in `mode` beyond the model's own
    (transformers reads some itself, e.g. to see whether a mask can be dropped for sdpa; a DeBERTa layer whose
    attention papa skips reads fewer)."""
    own, attached = _forward_passes(arch, mode, layers=layers, padded=padded)
    return {op: attached.reads[op] - own.reads[op] for op in attached.reads if attached.reads[op] > own.reads[op]}


def _forward_passes(arch: str, mode: str, *, layers: int, padded: bool) -> tuple[HostReads, HostReads]:
    """What one forward pass of the plain model and of the attached model in `mode` ran."""
    model, tok = tiny_model(arch, layers=layers, lm_head=False), tiny_tokenizer(arch)
    texts = TEXTS if padded else [" ".join(TEXTS * 2)] * 2  # longer than N: every slot holds a token
    inputs = encode(tok, texts, max_length=N, model_type=model.config.model_type, layout="standard").inputs
    if not padded:
        assert bool(inputs["attention_mask"].all()), "the unpadded case must fill every slot"
    with torch.no_grad():
        own = _recorded(model, inputs)
    ctrl = papa.attach(model)
    try:
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
        MODES[mode](ctrl)
        with ExitStack() as stack, torch.no_grad():
            if mode.endswith("dropped"):
                stack.enter_context(query_key_dropped_while(ctrl, where_possible=True))
            if mode == "capture":
                stack.enter_context(ctrl.capturing(N))
            attached = _recorded(model, inputs)
        return own, attached
    finally:
        ctrl.detach()


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("arch", ["bert", "deberta", "llama"])
@pytest.mark.parametrize("mode", list(MODES))
def test_a_forward_pass_reads_nothing_back_from_the_device(arch, mode, padded):
    assert _reads(arch, mode, layers=2, padded=padded) == {}


#: Ops a layer whose heads are all constant (Q/K dropped) may add to the model's own. On a GPU each op is a kernel
#: launch, and for a small model launches, not arithmetic, set the time (docs/performance.md, the H200 table). Before
#: the real keys were made once per pass (`PapaController.real_keys`), such a layer added 20.5 (tiny BERT) and 22.5
#: (tiny Llama) ops; now 12 and 12.75 (`python -m benchmarks.ops` counts them on a real model).
CONSTANT_LAYER_OPS = 13


@pytest.mark.parametrize("arch", ["bert", "deberta", "llama"])
def test_a_constant_layer_adds_few_ops(arch):
    layers = 4
    own, attached = _forward_passes(arch, "all replaced, Q/K dropped", layers=layers, padded=True)
    assert (attached.ops - own.ops) / layers <= CONSTANT_LAYER_OPS


def test_a_mask_beyond_the_padding_is_analysed_not_assumed():
    """Without an attention mask, transformers reads packed sequences off restarting position ids and builds a
    block-diagonal mask: replaced heads must follow it, as the materialised reference does."""
    model, tok = tiny_model("llama"), tiny_tokenizer("llama")
    ids = encode(tok, [" ".join(TEXTS * 2)] * 2, max_length=N, model_type="llama",
                 layout="standard").inputs["input_ids"]
    # row 0 packs two sequences, row 1 holds one: the mask differs by row, so it does not factor
    packed = torch.stack([torch.cat([torch.arange(N // 2), torch.arange(N // 2)]), torch.arange(N)])
    ctrl = papa.attach(model)
    try:
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
        ctrl.replace(_half(ctrl))
        with torch.no_grad():
            fast = model(input_ids=ids, position_ids=packed, use_cache=False)[0]
            ctrl.fast_paths = False
            reference = model(input_ids=ids, position_ids=packed, use_cache=False)[0]
            whole = model(input_ids=ids, use_cache=False)[0]
        torch.testing.assert_close(fast, reference, rtol=1e-5, atol=1e-6)
        assert not torch.allclose(fast[0, N // 2:], whole[0, N // 2:])  # the second sequence saw only itself
        torch.testing.assert_close(fast[1], whole[1], rtol=1e-5, atol=1e-6)
    finally:
        ctrl.detach()
