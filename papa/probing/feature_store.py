"""Where a frozen backbone's features are kept while a grid point's probes train on them.

Only the positions a probe reads are kept, flat ([kept positions, L+1, d]) and in float32, so a batch read back is
bit for bit the padded batch (``bf16_store`` keeps bfloat16). `plan_store` places a split, before the first forward
pass, in the first that fits: ``device`` (``PAPA_FEATURE_DEVICE_GB``, default 40% of free accelerator memory),
``host`` (``PAPA_FEATURE_CACHE_GB``, default 60% of available memory; read through pinned staging buffers for an
accelerator) or ``disk`` (``PAPA_FEATURE_DISK_GB``, default 90% of free space; a memory-mapped file removed on close
unless ``PAPA_KEEP_FEATURES=1``). ``PAPA_FEATURE_STORE`` forces a placement, ``backbone`` storing nothing.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import torch

from papa.core.errors import Arg, InputError, check_one_of
from papa.core.progress import tqdm
from papa.core.vocabulary import BF16_SUFFIX, DEFAULT_BATCH_ORDER, FEATURE_STORES
from papa.probing.probes import IGNORE_INDEX

CACHE_BUDGET_ENV = "PAPA_FEATURE_CACHE_GB"
DEVICE_BUDGET_ENV = "PAPA_FEATURE_DEVICE_GB"
DISK_BUDGET_ENV = "PAPA_FEATURE_DISK_GB"
STORE_ENV = "PAPA_FEATURE_STORE"
KEEP_ENV = "PAPA_KEEP_FEATURES"
BYTES_PER_VALUE = 4  # float32: what the probes read, bit for bit
STORED = FEATURE_STORES[:3]  # the placements that keep the features, in the order they are tried
#: The dtypes a store keeps its values in: float32 (the default: bit for bit) and bfloat16 (``bf16_store``).
STORE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: The batch order that reads a stored split in chunks (`papa.probing.training.train_probes_in_chunks`).
CHUNKS = "chunks"


def read_positions(kind: str, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """[N, n] bool: the positions a probe of `kind` reads, real tokens (sentence, pair) or labelled ones."""
    if kind in ("sentence", "pair"):
        return attention_mask.bool()
    return labels != IGNORE_INDEX


def _gib(value: int) -> str:
    """Bytes as GiB, or MiB / KiB when smaller."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if value >= size / 10:
            return f"{value / size:.2f} {unit}"
    return f"{value / 2**10:.1f} KiB"


def _env_budget(name: str) -> int | None:
    if os.environ.get(name, "").strip() == "":
        return None
    try:
        value = float(os.environ[name])
    except ValueError:
        raise InputError(f"{name}={os.environ[name]!r} is not a number of GiB: give e.g. {name}=8, or unset it "
                         "for the default") from None
    if value < 0:
        raise InputError(f"{name}={os.environ[name]!r} is negative: give a number of GiB >= 0, or unset it")
    return int(value * 2**30)


def release_pinned() -> None:
    """Give the pinned host blocks torch's caching allocator holds unused back to the system."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.accelerator.empty_host_cache()


def cache_budget_bytes() -> int:
    """Bytes one split's features may take in host memory: ``PAPA_FEATURE_CACHE_GB`` GiB, else 60% of the memory
    available now (room for the evaluation split); staging buffers are outside it."""
    if (budget := _env_budget(CACHE_BUDGET_ENV)) is not None:
        return budget
    release_pinned()  # torch's cached pinned blocks count as available once given back
    return int(0.6 * psutil.virtual_memory().available)


def device_budget_bytes(device: torch.device) -> int:
    """Bytes one split's features may take on `device`: 0 on the CPU, else ``PAPA_FEATURE_DEVICE_GB`` GiB or 40% of
    its free memory."""
    if device.type != "cuda":
        return 0
    if (budget := _env_budget(DEVICE_BUDGET_ENV)) is not None:
        return budget
    free, _ = torch.cuda.mem_get_info(device)
    return int(0.4 * free)


def disk_budget_bytes(folder: Path) -> int:
    """Bytes one split's features may take on disk under `folder`: ``PAPA_FEATURE_DISK_GB`` GiB, else 90% of the
    free space there."""
    if (budget := _env_budget(DISK_BUDGET_ENV)) is not None:
        return budget
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return int(0.9 * shutil.disk_usage(probe).free)


def block_examples(layers: int, length: int, hidden: int, device: torch.device, *, batch_size: int,
                   total: int) -> int:
    """How many examples' padded features one block of `train_probes_in_blocks` holds: whole batches that fit the
    device's or host's budget, at least one, at most `total` rounded up."""
    budget = device_budget_bytes(device) if device.type == "cuda" else cache_budget_bytes()
    fit = budget // (layers * length * hidden * BYTES_PER_VALUE)
    whole = -(-total // batch_size) * batch_size
    return int(min(max(fit - fit % batch_size, batch_size), whole))


def _path_name(placement: str, *, accelerator: bool, batch_order: str, bf16: bool) -> str:
    """The `STORE_PATHS` name of `placement` (+ ``_bf16``)."""
    name = {"device": "device", "host": "pinned_host" if accelerator else "host",
            "disk": "disk_streamed" if batch_order == CHUNKS else "disk"}[placement]
    return name + (BF16_SUFFIX if bf16 else "")


def store_path(kept_bytes: int, budgets: Mapping[str, int], *, batch_order: str = DEFAULT_BATCH_ORDER,
               bf16: bool = False, places: tuple[str, ...] = STORED) -> str | None:
    """The `STORE_PATHS` name of the first of `places` whose budget (bytes; no ``device`` key: the model is on the
    CPU) holds `kept_bytes` of float32 features (half with `bf16`); None when none does."""
    if set(budgets) - set(STORED) or any(not isinstance(b, int) or b < 0 for b in budgets.values()):
        raise InputError(f"budgets {dict(budgets)!r}: give bytes >= 0 for some of {', '.join(STORED)} (no 'device' "
                         "key: no accelerator)")
    if kept_bytes < 0:
        raise InputError(f"kept_bytes={kept_bytes}: give the float32 features' size in bytes, >= 0")
    placement = _first_fit(kept_bytes // 2 if bf16 else kept_bytes, budgets, places)
    if placement is None:
        return None
    return _path_name(placement, accelerator="device" in budgets, batch_order=batch_order, bf16=bf16)


def _first_fit(size: int, budgets: Mapping[str, int], places: tuple[str, ...] = STORED) -> str | None:
    """The first of `places` whose budget in `budgets` holds `size` bytes (None: none does)."""
    return next((p for p in places if p in budgets and size <= budgets[p]), None)


def choose_path(kept_bytes: int, budgets: Mapping[str, int], *, allow_bf16: bool = False,
                batch_order: str = DEFAULT_BATCH_ORDER) -> str | None:
    """The path an estimate gives a configuration's split: float32 in memory, else (`allow_bf16`) bfloat16 in memory,
    else on disk, bfloat16 first where `allow_bf16` (half the bytes to read); None when nothing holds it."""
    memory = tuple(p for p in STORED if p != "disk")
    tries = [(False, memory)] + [(True, memory)] * allow_bf16 + [(True, ("disk",))] * allow_bf16 + [(False, ("disk",))]
    for bf16, places in tries:
        path = store_path(kept_bytes, budgets, batch_order=batch_order, bf16=bf16, places=places)
        if path is not None:
            return path
    return None


@dataclass(frozen=True)
class StorePlan:
    """Where one split's features go, and why: decided before the first forward pass (`plan_store`)."""

    placement: str        # one of FEATURE_STORES
    examples: int
    kept_positions: int
    kept_bytes: int       # what the store holds
    padded_bytes: int     # what every padded position would take
    budget_bytes: int | None  # the budget of the chosen placement (None: nothing is stored)
    folder: Path | None = None  # where a disk store's file goes
    dtype: str = "float32"      # what the values are kept in (STORE_DTYPES)
    accelerator: bool = False   # the model is on an accelerator: host memory is pinned
    batch_order: str = DEFAULT_BATCH_ORDER

    @property
    def stored(self) -> bool:
        return self.placement != "backbone"

    @property
    def path(self) -> str:
        """The `STORE_PATHS` name of the path the features take (+ ``_bf16``); ``backbone`` when none is stored."""
        if not self.stored:
            return "backbone"
        return _path_name(self.placement, accelerator=self.accelerator, batch_order=self.batch_order,
                          bf16=self.dtype == "bfloat16")

    def line(self, desc: str) -> str:
        """The decision in one line."""
        what = (f"{desc}: {self.examples:,} examples, {self.kept_positions:,} positions the probe reads: "
                f"{_gib(self.kept_bytes)} of {self.dtype} features (padded: {_gib(self.padded_bytes)})")
        if self.placement == "backbone":
            return f"{what}: not stored, the backbone runs again for every batch ({STORE_ENV}=backbone)"
        where = {"device": "on the device",
                 "host": "in host memory, read through pinned buffers" if self.accelerator else "in host memory",
                 "disk": f"in a memory-mapped file under {self.folder}"}[self.placement]
        streamed = ", read in sequential chunks" if self.batch_order == CHUNKS else ""
        return f"{what}: stored {where}{streamed} (budget {_gib(self.budget_bytes)}; path {self.path})"


def check_settings(device: str | torch.device | None = None, batch_order: str = DEFAULT_BATCH_ORDER) -> None:
    """Check the ``PAPA_FEATURE_*`` settings as `plan_store` reads them, before any work."""
    for name in (CACHE_BUDGET_ENV, DEVICE_BUDGET_ENV, DISK_BUDGET_ENV):
        _env_budget(name)
    _forced_store(None, None if device is None else torch.device(device), batch_order)


def _forced_store(forced: str | None, device: torch.device | None, batch_order: str) -> str | None:
    """The placement `forced` or ``PAPA_FEATURE_STORE`` asks for (None: the first that fits), checked against the
    model's `device` (None: not known yet) and the `batch_order`."""
    forced = forced or os.environ.get(STORE_ENV, "").strip() or None
    if forced is not None and forced not in FEATURE_STORES:
        raise InputError(f"{STORE_ENV}={forced!r}: choose one of {', '.join(FEATURE_STORES)}, or unset it to pick "
                         "the first that fits")
    if forced == "device" and device is not None and device.type == "cpu":
        raise InputError(f"{STORE_ENV}=device: the model is on the CPU, so host memory is its device: give "
                         f"{STORE_ENV}=host")
    if batch_order == CHUNKS and forced == "backbone":
        raise InputError(f"batch order 'chunks' reads the training split from its store in chunks, and "
                         f"{STORE_ENV}=backbone stores nothing: unset {STORE_ENV} (or give host or disk), or give "
                         "another batch order")
    return forced


def store_budgets(device: torch.device, folder: Path) -> dict[str, int]:
    """Each placement's budget for one split now (bytes): no ``device`` key on the CPU (`store_path`'s input)."""
    budgets = {} if device.type == "cpu" else {"device": device_budget_bytes(device)}
    return {**budgets, "host": cache_budget_bytes(), "disk": disk_budget_bytes(folder)}


def plan_store(keep: torch.Tensor, layers: int, hidden: int, device: torch.device, *, folder: Path | None = None,
               forced: str | None = None, desc: str = "features", dtype: str = "float32",
               batch_order: str = DEFAULT_BATCH_ORDER) -> StorePlan:
    """Where the features at `keep`'s positions ([N, n] bool), kept in `dtype`, go: `forced`, else the first
    placement whose budget they fit; an `InputError` when none does. A disk store goes under `folder`."""
    forced = _forced_store(forced, device, batch_order)
    check_one_of(dtype, STORE_DTYPES, "feature dtype", error=InputError)
    kept = int(keep.sum())
    width = layers * hidden * STORE_DTYPES[dtype].itemsize
    kept_bytes, padded = kept * width, keep.numel() * width
    folder = Path(folder) if folder is not None else Path(tempfile.gettempdir())

    def plan(placement: str, budget: int | None) -> StorePlan:
        return StorePlan(placement, keep.shape[0], kept, kept_bytes, padded, budget, folder, dtype,
                         device.type == "cuda", batch_order)

    if forced == "backbone":
        return plan("backbone", None)
    if forced is not None:
        return plan(forced, store_budgets(device, folder)[forced])
    budgets = store_budgets(device, folder)
    placement = _first_fit(kept_bytes, budgets)  # store_path's rule, with the budget kept for the plan's line
    if placement is not None:
        return plan(placement, budgets[placement])
    budget_text = ", ".join(f"{p} {_gib(b)}" for p, b in budgets.items())
    half, half_fp32 = Arg("precision", "bf16_with_store"), Arg("precision", "bf16_store")
    chunks, blocks = Arg("batch_order", "chunks"), Arg("batch_order", "blocks")
    raise InputError(
        f"{desc}: the features the probe reads take {_gib(kept_bytes)} of {dtype} ({kept:,} positions of "
        f"{keep.shape[0]:,} examples), more than every budget ({budget_text}; disk = free space under {folder}). "
        f"Raise {CACHE_BUDGET_ENV} or {DISK_BUDGET_ENV} (GiB) if the machine has room (on disk, {chunks} reads them "
        "in large sequential chunks: the backbone runs once per point; a stated change of batch order, recorded in "
        f"the rows), keep them in bfloat16 ({half}, or {half_fp32} with the backbone in float32: half the bytes, a "
        f"stated option recorded in the rows), use fewer examples, train in blocks ({blocks}: the backbone runs once "
        "per example and epoch and every seed trains on its block; a stated change of batch order, recorded in the "
        f"rows), or set {STORE_ENV}=backbone to run the backbone again for every batch of every epoch and seed (same "
        "results, much slower).", advice=[chunks, half, half_fp32, blocks])


class FeatureStore:
    """The features at `keep`'s positions of one split, filled batch by batch (`put`) and read back padded (`get`,
    `gather` + `padded`, or `read_range` + `padded`).

    A table of the kept rows and one zero row; `rows` maps every slot to its row, so a batch is one gather."""

    def __init__(self, plan: StorePlan, keep: torch.Tensor, layers: int, hidden: int, device: torch.device,
                 desc: str = "features"):
        if not plan.stored:
            raise ValueError("a 'backbone' plan stores nothing")
        self.plan, self.layers, self.hidden = plan, layers, hidden
        self.keep = keep.bool().cpu()
        counts = self.keep.sum(dim=1)
        self._starts = torch.cumsum(counts, 0) - counts
        self.dtype = STORE_DTYPES[plan.dtype]
        kept = plan.kept_positions
        self.home = device if plan.placement == "device" else torch.device("cpu")
        self.rows = torch.where(self.keep, self._starts[:, None] + self.keep.cumsum(1) - 1, kept).to(self.home)
        shape = (kept + 1, layers, hidden)  # the last row stays zero: what the probe reads at unread slots
        self.path: Path | None = None
        self._tmp: Path | None = None
        self._finalizer = None
        self._mapped = None
        if plan.placement == "disk":
            plan.folder.mkdir(parents=True, exist_ok=True)
            stem = "".join(c if c.isalnum() else "-" for c in desc).strip("-") or "features"
            suffix = ".f32" if self.dtype == torch.float32 else ".bf16"
            self.path = plan.folder / f"{stem}-{os.getpid()}-{id(self):x}{suffix}"
            self._tmp = self.path.with_suffix(suffix + ".tmp")
            # numpy has no bfloat16: its bits are mapped as uint16 and viewed as bfloat16 (a new file reads zeros)
            np_dtype = np.float32 if self.dtype == torch.float32 else np.uint16
            self._mapped = np.memmap(self._tmp, dtype=np_dtype, mode="w+", shape=shape)
            self.table = torch.from_numpy(self._mapped).view(self.dtype)
            keep_file = os.environ.get(KEEP_ENV, "").strip() not in ("", "0")
            self._finalizer = weakref.finalize(self, _remove, None if keep_file else [self._tmp, self.path,
                                                                                       self._meta_path()])
        else:  # pageable, exactly its size: torch's pinned allocator would round it up and keep it cached
            self.table = torch.empty(shape, dtype=self.dtype, device=self.home)
            self.table[kept].zero_()
        self.values = self.table[:kept]

    def _meta_path(self) -> Path | None:
        return None if self.path is None else self.path.with_suffix(".json")

    def put(self, start: int, features: torch.Tensor) -> None:
        """Store the read positions of examples `start`… from their padded `features` [B, L+1, n, d]."""
        stop = start + features.shape[0]
        at = tuple(i.to(features.device) for i in self.keep[start:stop].nonzero(as_tuple=True))  # found on the host
        rows = features.permute(0, 2, 1, 3)[at]  # [kept in these examples, L+1, d], in row-major order
        first = int(self._starts[start]) if start < len(self._starts) else 0
        self.values[first:first + rows.shape[0]] = rows.to(self.values.device, self.dtype)

    def finish(self) -> None:
        """Every example is in: a disk store's file gets its final name (and a JSON file saying what it holds)."""
        if self._tmp is None:
            return
        self._mapped.flush()
        os.replace(self._tmp, self.path)
        meta = {"examples": self.plan.examples, "kept_positions": self.plan.kept_positions, "layers": self.layers,
                "hidden": self.hidden, "dtype": self.plan.dtype,
                "layout": "[kept positions + 1 zero row, L+1, d], row-major"}
        tmp_meta = self._meta_path().with_suffix(".json.tmp")
        tmp_meta.write_text(json.dumps(meta, sort_keys=True))
        os.replace(tmp_meta, self._meta_path())
        self._tmp = None

    def gather(self, idx: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The table's rows of examples `idx`, slot by slot, [len(idx) * n, L+1, d] (into `out` if given)."""
        rows = self.rows[idx.to(self.rows.device)].reshape(-1)
        return torch.index_select(self.table, 0, rows, out=out) if out is not None else self.table[rows]

    def padded(self, gathered: torch.Tensor, device: torch.device, *, non_blocking: bool = False) -> torch.Tensor:
        """Float32 padded features [B, L+1, n, d] on `device` from `gather`'s rows (B = rows / n)."""
        n = self.keep.shape[1]
        moved = gathered.to(device, non_blocking=non_blocking).to(torch.float32)
        return moved.view(-1, n, self.layers, self.hidden).permute(0, 2, 1, 3).contiguous()

    @property
    def staged(self) -> bool:
        """Whether reads go through pinned staging buffers (table on the host, model on an accelerator)."""
        return self.plan.accelerator and self.home.type == "cpu"

    def get(self, idx: torch.Tensor, device: torch.device) -> torch.Tensor:
        """Padded float32 features [B, L+1, n, d] of examples `idx` on `device`, zeros at unread positions."""
        if self.staged and device.type != "cpu":
            shape = (idx.numel() * self.keep.shape[1], self.layers, self.hidden)
            staging = _empty(shape, self.dtype, self.home, pinned=True, desc="a batch", quiet=True)
            return self.padded(self.gather(idx, out=staging), device, non_blocking=True)
        return self.padded(self.gather(idx), device)

    def _range(self, start: int, stop: int) -> tuple[int, int]:
        """The table's rows [first, last) of examples `start`..`stop`-1."""
        first = int(self._starts[start])
        return first, int(self._starts[stop]) if stop < len(self._starts) else self.plan.kept_positions

    def range_block(self, start: int, stop: int) -> torch.Tensor:
        """An uninitialised block for `read_range(start, stop)` (pinned where `staged`)."""
        # Made by the thread that copies it to the device: a reader thread must not make a CUDA call.
        first, last = self._range(start, stop)
        return _empty((last - first + 1, self.layers, self.hidden), self.dtype, self.home, pinned=self.staged,
                      desc="a chunk", quiet=True)

    def read_range(self, start: int, stop: int, out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Examples `start`..`stop`-1 in one sequential read: (their rows and a zero row, in `out` or a new
        `range_block`; each slot's row index, [stop - start, n]), for `padded(rows[index])`."""
        first, last = self._range(start, stop)
        block = self.range_block(start, stop) if out is None else out
        if block.shape != (last - first + 1, self.layers, self.hidden):
            raise ValueError(f"a block of shape {tuple(block.shape)} for examples {start}..{stop - 1}: give "
                             "range_block(start, stop)")
        block[:-1].copy_(self.table[first:last])
        block[-1].zero_()
        index = self.rows[start:stop]
        return block, torch.where(index == self.plan.kept_positions, last - first, index - first)

    def close(self) -> None:
        """Free the store, its disk file (unless ``PAPA_KEEP_FEATURES=1``) and cached pinned buffers."""
        self.values = self.table = self.rows = self._mapped = None
        if self._finalizer is not None:
            self._finalizer()
        if self.staged:
            release_pinned()


def _empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, *, pinned: bool, desc: str,
           quiet: bool = False) -> torch.Tensor:
    """An uninitialised tensor on `device`; pinned host memory with `pinned`, pageable where pinning is refused
    (said unless `quiet`). Any other failure to pin is raised."""
    if pinned and device.type == "cpu":
        refusal = None if torch.cuda.is_available() else "no CUDA device to pin for"
        if refusal is None:
            try:
                return _pinned_empty(shape, dtype)
            except RuntimeError as error:
                # only the system refusing to lock that much memory (CUDA's out of memory) is a refusal
                if not (isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()):
                    raise
                refusal = str(error).splitlines()[0]
        if not quiet:
            tqdm.write(f"{desc}: could not pin {_gib(int(np.prod(shape)) * dtype.itemsize)} of host memory "
                       f"({refusal}); kept in pageable memory, so each copy to the device waits for the host")
    return torch.empty(shape, dtype=dtype, device=device)


def _pinned_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor in pinned host memory, from torch's caching pinned allocator."""
    return torch.empty(shape, dtype=dtype, device="cpu", pin_memory=True)


def pinned_buffer(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A staging buffer for copies to an accelerator: pinned host memory, pageable where pinning is refused."""
    return _empty(shape, dtype, torch.device("cpu"), pinned=True, desc="a staging buffer", quiet=True)


def _remove(paths: list[Path | None] | None) -> None:
    for path in paths or []:
        if path is not None:
            path.unlink(missing_ok=True)
