"""How a grid's backbone runs: its precision (`PRECISIONS`) and whether it is compiled (`EXECUTIONS`).

Both are recorded in every result row; the defaults (float32, eager) are the protocol's. The probe always trains in
float32; bf16 stores hold a frozen point's features in bfloat16, read back as float32.
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
    """The autocast context the backbone's forward passes run in: bfloat16 for `AUTOCAST_PRECISIONS`, else none."""
    # No cast cache: it would keep a trained parameter's bf16 copy stale after the optimizer's updates.
    if precision not in AUTOCAST_PRECISIONS:
        return nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False)


@contextmanager
def compiled_backbone(model, compile: bool, backend: str = "inductor") -> Iterator[None]:
    """While inside, the model's backbone runs compiled with torch.compile's `backend` (if `compile`)."""
    if not compile:
        yield
        return
    module = backbone(model)
    module.compile(backend=backend)
    try:
        yield
    finally:
        module._compiled_call_impl = None  # nn.Module.compile's own switch: eager calls from here on
