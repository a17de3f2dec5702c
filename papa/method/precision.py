"""How a grid's backbone runs: its precision (`PRECISIONS`) and whether it is compiled (`EXECUTIONS`).

Both are run options, recorded in every result row; the defaults (float32, eager) are the protocol's. ``tf32`` lets
CUDA matmuls and convolutions use TensorFloat-32 (10-bit mantissa inputs, float32 accumulation); ``bf16`` runs the
backbone's forward passes under bfloat16 autocast, its features handed to the probe in float32, the probe itself
trained in float32; ``bf16_store`` runs the backbone as ``float32`` does and keeps a frozen point's stored features
(both splits) in bfloat16, half the bytes, read back as float32 (`papa.probing.feature_store`; trained constants'
points store theirs in float32, as their training reads the backbone in float32); ``bf16_with_store`` is both,
bf16 autocast and a bfloat16 store (a bf16 grid whose float32 features fit no memory). ``compiled`` compiles the
backbone in place (`torch.compile`): an attached model compiles to one graph per head configuration
(tests/unit/method/test_compile.py), so a grid compiles once per point.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

import torch

from papa.core.errors import Arg, InputError
from papa.core.vocabulary import AUTOCAST_PRECISIONS, BF16_STORE_PRECISIONS, DEFAULT_PRECISION, PRECISIONS
from papa.method.architectures import backbone


def check_precision(precision: str, device: str | torch.device) -> str:
    """`precision` if it is known and can run on `device`; else an `InputError` saying what to give."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)} (default "
                         f"{DEFAULT_PRECISION})")
    if precision == "tf32" and torch.device(device).type != "cuda":
        plain, half, cuda = Arg("precision", DEFAULT_PRECISION), Arg("precision", "bf16"), Arg("device", "cuda")
        raise InputError(f"precision 'tf32' is a mode of CUDA matmuls, and this run is on {device}: give {plain} or "
                         f"{half}, or {cuda}", advice=[plain, half, cuda])
    return precision


@contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """TF32 matmuls and convolutions for ``tf32`` while inside (the previous settings are restored after)."""
    if precision != "tf32":
        yield
        return
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def feature_dtype(precision: str) -> str:
    """What a frozen point's feature store keeps its values in under `precision` (`STORE_DTYPES`' names)."""
    return "bfloat16" if precision in BF16_STORE_PRECISIONS else "float32"


def backbone_autocast(precision: str, device: str | torch.device):
    """The autocast context the backbone's forward passes run in: bfloat16 for `AUTOCAST_PRECISIONS`, none
    otherwise. Without autocast's cast cache: it keeps the bf16 copy of a trained parameter (trained constants, λ's
    θ, a probe trained inside the context) until the context exits, so every step after the first would read the
    values before the optimizer's updates; a frozen weight is never cached, so frozen passes are unchanged."""
    if precision not in AUTOCAST_PRECISIONS:
        return nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False)


@contextmanager
def compiled_backbone(model, compile: bool, backend: str = "inductor") -> Iterator[None]:
    """While inside, the model's backbone runs compiled (`compile`, with torch.compile's `backend`); it runs eagerly
    again after."""
    if not compile:
        yield
        return
    module = backbone(model)
    module.compile(backend=backend)
    try:
        yield
    finally:
        module._compiled_call_impl = None  # nn.Module.compile's own switch: eager calls from here on
