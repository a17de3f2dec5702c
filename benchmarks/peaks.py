"""What a device can do at most: dense peaks and bandwidths of known accelerators, and a measurement's share of them.

One table for the speed suite (`bench.py`, `bench_headline.py`) and the grid's estimate (`grid_estimate.py`,
`grid_prediction.py`). Peaks are *dense* (no 2:4 sparsity: NVIDIA's datasheets print the sparse figure, twice
these), in TFLOP/s; ``fp32`` is the CUDA cores' float32 (torch's default: TF32 off), ``tf32`` the tensor cores'
TensorFloat-32, ``bf16`` bfloat16 (and float16) on the tensor cores. Bandwidths in GB/s: ``hbm`` the device's
memory, ``link`` the host link (PCIe, one direction, nominal).

Sources: NVIDIA H100 Tensor Core GPU datasheet (H100 SXM5 and PCIe, 2023: BF16 1,979 / 1,513 TFLOPS with sparsity,
TF32 989 / 756 with sparsity, FP32 67 / 51, HBM3 3.35 TB/s, HBM2e 2 TB/s, PCIe Gen5 128 GB/s both directions);
NVIDIA H200 Tensor Core GPU datasheet (H200 SXM, 2024: the H100 SXM's compute, HBM3e 4.8 TB/s); NVIDIA A100 Tensor
Core GPU datasheet (2021: BF16 312, TF32 156, FP32 19.5 dense, HBM2e 2,039 GB/s (80 GB SXM), PCIe Gen4 64 GB/s both
directions).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peaks:
    """A device's dense peaks (TFLOP/s) and bandwidths (GB/s)."""

    name: str
    bf16: float
    tf32: float
    fp32: float
    hbm: float
    link: float

    def tflops(self, precision: str) -> float:
        """The dense peak of `precision` (bf16, fp16, tf32, fp32, float32)."""
        key = {"bf16": "bf16", "fp16": "bf16", "tf32": "tf32", "fp32": "fp32", "float32": "fp32"}[precision]
        return getattr(self, key)


#: (substrings of torch.cuda.get_device_name, all of which must appear, case-insensitive; peaks), most specific
#: first. The H200 shares the H100 SXM's compute.
DEVICES: tuple[tuple[tuple[str, ...], Peaks], ...] = (
    (("H200",), Peaks("H200 SXM", bf16=989.4, tf32=494.7, fp32=66.9, hbm=4800.0, link=64.0)),
    (("H100", "PCIe"), Peaks("H100 PCIe", bf16=756.5, tf32=378.0, fp32=51.2, hbm=2000.0, link=64.0)),
    (("H100",), Peaks("H100 SXM", bf16=989.4, tf32=494.7, fp32=66.9, hbm=3350.0, link=64.0)),
    (("A100",), Peaks("A100", bf16=312.0, tf32=156.0, fp32=19.5, hbm=2039.0, link=32.0)),
)
#: A measurement is *launch-bound* when its arithmetic, at the device's dense peak, takes under this share of its
#: measured time (it runs under this share of peak): launches, copies and element-wise passes set its time, not
#: the method's arithmetic, so its ratios say little about the method.
LAUNCH_BOUND_SHARE = 0.10


def device_peaks(device: str) -> Peaks | None:
    """The peaks of the device `torch.cuda.get_device_name` calls `device`, or None for an unknown one (a CPU)."""
    low = device.lower()
    return next((p for keys, p in DEVICES if all(k.lower() in low for k in keys)), None)


def peak_tflops(device: str, precision: str) -> float | None:
    """The dense peak (TFLOP/s) of `device` in `precision`, or None where the device is not in `DEVICES`."""
    peaks = device_peaks(device)
    return peaks.tflops(precision) if peaks else None


def tflops(flops: float, seconds: float) -> float | None:
    """TFLOP/s of `flops` done in `seconds` (None for no time)."""
    return flops / seconds / 1e12 if seconds > 0 else None


def share_of_peak(rate_tflops: float | None, peak: float | None) -> float | None:
    """A rate's share of the peak, or None where either is unknown."""
    return rate_tflops / peak if rate_tflops is not None and peak else None


def launch_bound(rate_tflops: float | None, peak: float | None) -> bool | None:
    """Whether a measurement ran under `LAUNCH_BOUND_SHARE` of the peak (None where either is unknown)."""
    share = share_of_peak(rate_tflops, peak)
    return None if share is None else share < LAUNCH_BOUND_SHARE


def floor_hours(flops: float, peak: float | None, share: float = 1.0) -> float | None:
    """Hours `flops` take at `share` of the `peak` (TFLOP/s), or None for an unknown peak."""
    return flops / (peak * 1e12 * share) / 3600 if peak else None
