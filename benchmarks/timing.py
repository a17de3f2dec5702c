"""The suite's timing and memory calls: round-robin medians of interleaved variants (`interleaved`), the clock they
read (wall or process CPU time, `use_clock`), the extra peak memory of one call (`peak_mib`) and the machine's name."""
from __future__ import annotations

import ctypes
import gc
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch

def cpu_name() -> str:
    """The CPU's model name and core count (platform.processor() is empty on many Linux machines)."""
    try:
        with open("/proc/cpuinfo") as fh:
            name = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores"


def mmap_threshold(size: int) -> None:
    """Set glibc's M_MMAP_THRESHOLD: blocks above it are mmap-ed and go back to the OS when freed."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, size)
    except (OSError, AttributeError):
        pass


def _rss_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_mib(fn: Callable[[], None], device: torch.device) -> float | None:
    """Extra peak memory (MiB) of one call of `fn`."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    # Small threshold while measuring only: every large block then shows in RSS and is returned on free (timed
    # runs keep glibc's large threshold, since page-faulting fresh mmaps would slow them down).
    mmap_threshold(1 << 16)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
    except (OSError, AttributeError):
        mmap_threshold(32 << 20)
        return None
    base = _rss_kib("VmRSS:")
    fn()
    top = _rss_kib("VmHWM:")
    mmap_threshold(32 << 20)
    return None if base is None or top is None else (top - base) / 1024


Variant = Callable[[], None] | tuple[Callable[[], None], Callable[[], None]]
#: What `interleaved` times with: wall-clock seconds (default), or the process's CPU seconds (``--clock cpu``), which
#: on a machine shared with other jobs counts only the time this process ran (use with ``--threads 1``: with more
#: threads, OpenMP's spin-waits for a descheduled thread count as CPU time too).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def interleaved(variants: dict[str, Variant], repeats: int, device: torch.device, warmup: int = 1
                ) -> dict[str, float]:
    """Median seconds of each variant, measured round-robin after `warmup` untimed rounds.

    A variant is a callable, or (setup, callable) where the untimed setup runs before each timed call. Every ratio
    the suite reports divides two medians of one call: variants timed in different calls moved apart by up to 1.7×
    on a GPU (a fresh model's first call, H200 bf16: plain forward 8,670 vs 14,664 seq/s later in the process).
    """
    times: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats + warmup):
        for name, variant in variants.items():
            setup, fn = variant if isinstance(variant, tuple) else (None, variant)
            if setup is not None:
                setup()
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = clock()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if r >= warmup:
                times[name].append(clock() - start)
    return {k: statistics.median(v) for k, v in times.items()}



def use_clock(name: str) -> None:
    """Time every later `interleaved` call (and part 4's grid) by clock `name` of `CLOCKS`."""
    global clock
    clock = CLOCKS[name]
