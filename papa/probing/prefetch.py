"""Batches read from a feature store for the probes' steps: every seed's batch of a step in one gather, and, where the
store is in host memory and the model on an accelerator, in one copy on a side stream a step ahead."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from papa.probing.feature_store import FeatureStore, pinned_buffer

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (features, attention mask, labels) on the model's device


def stored_steps(store: FeatureStore, orders: Sequence[torch.Tensor], start: int, batch_size: int,
                 device: torch.device, mask: torch.Tensor, labels: torch.Tensor) -> Iterator[list[Batch]]:
    """Each step of one epoch from example `start` on: every order's (seed's) batch as `store.get` gives it, with its
    mask and labels (the split's `mask` and `labels` on `device`); the next step's read is issued a step ahead."""
    taken = torch.stack([order.cpu() for order in orders])  # [seeds, N]
    at_device = taken.to(device)  # once per epoch: the steps index mask and labels where they are
    at_home = taken.to(store.home)
    n = taken.shape[1]
    spans = [(a, min(a + batch_size, n)) for a in range(start, n, batch_size)]
    copier = None
    if store.home != device and device.type == "cuda":
        copier = _SideCopier(store, device, rows=len(orders) * batch_size * store.keep.shape[1])
    pending = None if not spans else _issue(store, copier, at_home, spans[0])
    for i, (a, b) in enumerate(spans):
        following = _issue(store, copier, at_home, spans[i + 1]) if i + 1 < len(spans) else None
        flat = pending if copier is None else copier.take(pending)
        per_seed = flat.shape[0] // len(orders)
        yield [(store.padded(flat[k * per_seed:(k + 1) * per_seed], device), mask[at_device[k, a:b]],
                labels[at_device[k, a:b]]) for k in range(len(orders))]
        pending = following


def _issue(store: FeatureStore, copier: "_SideCopier | None", at_home: torch.Tensor, span: tuple[int, int]):
    """Start one step's read: every seed's rows in one gather (and, with `copier`, their transfer)."""
    idx = at_home[:, span[0]:span[1]].reshape(-1)
    return store.gather(idx) if copier is None else copier.issue(idx)


class _SideCopier:
    """Two pinned staging buffers taking turns: a step's read rows are gathered into one, with each slot's place
    among them, and copied to the device on a side stream."""

    def __init__(self, store: FeatureStore, device: torch.device, rows: int):
        self.store, self.device = store, device
        self.stream = torch.cuda.Stream(device)
        shape = (rows + 1, store.layers, store.hidden)  # + a zero row for the slots the probe does not read
        self.buffers = [pinned_buffer(shape, store.dtype) for _ in range(2)]
        self.places = [pinned_buffer((rows,), torch.long) for _ in range(2)]
        self.done: list[torch.cuda.Event | None] = [None, None]
        self.turn = 0

    def issue(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.cuda.Event]:
        """Gather `idx`'s read rows into the next buffer (once its last copy has left it) and copy them, with each
        slot's place among them, on the side stream."""
        k = self.turn
        self.turn = 1 - k
        if self.done[k] is not None:
            self.done[k].synchronize()  # the copy two steps back still reads this buffer
        rows = self.store.rows[idx].reshape(-1)
        read = rows != self.store.plan.kept_positions
        taken = rows[read]
        m = taken.numel()
        torch.index_select(self.store.table, 0, taken, out=self.buffers[k][:m])
        self.buffers[k][m].zero_()
        place = self.places[k][:rows.numel()]
        place.fill_(m)
        place[read] = torch.arange(m, device="cpu")
        with torch.cuda.stream(self.stream):
            moved = self.buffers[k][:m + 1].to(self.device, non_blocking=True)
            where = place.to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        self.done[k] = event
        return moved, where, event

    def take(self, issued: tuple[torch.Tensor, torch.Tensor, torch.cuda.Event]) -> torch.Tensor:
        """Every slot's row on the device; the current stream (not the host) waits for the copy."""
        moved, where, event = issued
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        moved.record_stream(current)
        where.record_stream(current)
        return moved[where]


def stored_chunks(store: FeatureStore, spans: Sequence[tuple[int, int]], device: torch.device, mask: torch.Tensor,
                  labels: torch.Tensor) -> Iterator[Batch]:
    """The padded features, mask and labels of each range of examples in `spans`, each in one sequential read; from
    a host store the next range is read on a thread meanwhile."""
    # The thread only copies host memory into a block made here: no CUDA call that could break a graph capture.
    if not spans:
        return
    if store.home.type != "cpu":
        for a, b in spans:
            block, index = store.read_range(a, b)
            yield store.padded(block[index.to(block.device).reshape(-1)], device), mask[a:b], labels[a:b]
        return
    with ThreadPoolExecutor(max_workers=1) as reader:
        def read(span: tuple[int, int]):
            return reader.submit(store.read_range, *span, out=store.range_block(*span))

        pending = read(spans[0])
        for i, (a, b) in enumerate(spans):
            block, index = pending.result()
            if i + 1 < len(spans):
                pending = read(spans[i + 1])
            # from a pinned block the copy runs without the host; torch's allocator keeps the block until it is done
            rows = block.to(device, non_blocking=True)
            yield store.padded(rows[index.to(device).reshape(-1)], device), mask[a:b], labels[a:b]
