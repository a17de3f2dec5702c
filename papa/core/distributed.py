"""Data parallelism across the processes that ``accelerate launch`` (or ``torchrun``) starts.

Each process takes a contiguous block of the batches a single process would make; extraction sums the statistics
(`sum_across`), probing gathers the features (`gather_blocks`), and the main process alone writes. λ learning and
trainable constants are not split, so that their result is exactly the single-process one. With one process every
function is the identity.
"""
from __future__ import annotations

import functools
import os

import torch


def launched() -> bool:
    """Whether this process is one of several started by a launcher (WORLD_SIZE > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@functools.lru_cache(maxsize=1)
def _state():
    from accelerate import PartialState  # initialises the process group from the launcher's environment

    # Without GPUs accelerate only forms a process group when told it runs on CPUs (then with gloo).
    return PartialState(cpu=not torch.cuda.is_available())


def world_size() -> int:
    return _state().num_processes if launched() else 1


def rank() -> int:
    return _state().process_index if launched() else 0


def is_main() -> bool:
    """True in the process that writes results and artifacts (the only one without a launcher)."""
    return rank() == 0


def process_device(requested: str | None) -> str | None:
    """Under a launcher on GPUs, each process's own GPU (a plain "cuda"/"auto" would put all on GPU 0)."""
    if launched() and requested in (None, "auto", "cuda") and torch.cuda.is_available():
        return str(_state().device)
    return requested


def batch_block(num_batches: int) -> range:
    """The batches (of ``range(num_batches)``) this process computes: a contiguous block, in rank order."""
    w, r = world_size(), rank()
    return range(r * num_batches // w, (r + 1) * num_batches // w)


def batch_spans(length: int, batch_size: int) -> list[tuple[int, int]]:
    """(start, end) of this process's batches of `length` items (its `batch_block`)."""
    return [(b * batch_size, min((b + 1) * batch_size, length)) for b in batch_block(-(-length // batch_size))]


def barrier() -> None:
    if launched():
        _state().wait_for_everyone()


def _group():
    """torch.distributed, with the process group formed, and the device its collectives need."""
    import torch.distributed as dist

    state = _state()
    return dist, state.device if dist.get_backend() == "nccl" else torch.device("cpu")


def sum_across(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` summed over all processes (a new tensor on `tensor`'s device); itself with one process."""
    if not launched():
        return tensor
    dist, device = _group()
    moved = tensor.to(device)
    dist.all_reduce(moved, op=dist.ReduceOp.SUM)
    return moved.to(tensor.device)


def gather_blocks(block: torch.Tensor) -> torch.Tensor:
    """Every process's `block` (rows of one tensor, possibly of different lengths) concatenated in rank order."""
    if not launched():
        return block
    dist, device = _group()
    lengths = [None] * world_size()
    dist.all_gather_object(lengths, block.shape[0])
    longest = max(lengths)
    padded = torch.zeros((longest, *block.shape[1:]), dtype=block.dtype, device=device)
    padded[: block.shape[0]] = block.to(device)
    parts = [torch.empty_like(padded) for _ in lengths]
    dist.all_gather(parts, padded)
    return torch.cat([p[:n] for p, n in zip(parts, lengths)]).to(block.device)


def main_decides(value):
    """The main process's `value` in every process (e.g. whether an artifact is already on disk)."""
    if not launched():
        return value
    dist, _ = _group()
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]
