"""Where a frozen backbone's features are kept while a grid point's probes train on them.

Only the positions a probe reads are kept: the real tokens of a sentence probe's inputs (it zeroes the pads before it
pools), the labelled positions of a token, MLM, LM or next-token probe's (it classifies only those). They are kept in
float32, as the backbone gave them, so a batch read back is bit for bit the padded batch the probe would have read,
zeros in the positions it never reads. Kept flat, [kept positions, L+1, d], with each example's first row, they take a
fraction of the padded size (SST-2's sentences fill about a fifth of its 64 slots).

Where they go is decided from their size before the first forward pass (`plan_store`), in this order:

* ``device``: on an accelerator, when they fit ``PAPA_FEATURE_DEVICE_GB`` (by default 40% of its free memory);
* ``host``: in memory, when they fit ``PAPA_FEATURE_CACHE_GB`` (by default 60% of the memory available);
* ``disk``: in a memory-mapped file under the run's folder, when they fit ``PAPA_FEATURE_DISK_GB`` (by default 90%
  of the free space there); the file is written under a temporary name, renamed when complete, and removed when the
  store is closed (``PAPA_KEEP_FEATURES=1`` keeps it, with a JSON file saying what it holds; a process killed
  mid-point leaves its file, which nothing reads again: delete ``<out>/features/``);

and when none fits, one error says what each budget was and what to do. ``PAPA_FEATURE_STORE`` forces a placement
(``backbone``: keep nothing and run the backbone again for every batch, the path before features were stored).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import torch

from papa.core.errors import InputError
from papa.core.vocabulary import FEATURE_STORES
from papa.probing.probes import IGNORE_INDEX

CACHE_BUDGET_ENV = "PAPA_FEATURE_CACHE_GB"
DEVICE_BUDGET_ENV = "PAPA_FEATURE_DEVICE_GB"
DISK_BUDGET_ENV = "PAPA_FEATURE_DISK_GB"
STORE_ENV = "PAPA_FEATURE_STORE"
KEEP_ENV = "PAPA_KEEP_FEATURES"
BYTES_PER_VALUE = 4  # float32: what the probes read, bit for bit
STORED = FEATURE_STORES[:3]  # the placements that keep the features, in the order they are tried


def read_positions(kind: str, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """[N, n] bool: the positions a probe of `kind` reads, real tokens (sentence, pair) or labelled ones (the kinds
    labelled slot by slot: token, mlm, lm, next_token). The rest never reach the probe: the sentence probe zeroes pads,
    the others select labelled positions."""
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


def _available_memory() -> int:
    """Bytes that can be allocated now without swapping, page cache included (psutil's `available`: on Linux the
    kernel's MemAvailable)."""
    return int(psutil.virtual_memory().available)


def cache_budget_bytes() -> int:
    """Bytes one split's features may take in host memory: ``PAPA_FEATURE_CACHE_GB`` GiB, else 60% of the memory
    available now (so that a training split stored first leaves room for its evaluation split)."""
    budget = _env_budget(CACHE_BUDGET_ENV)
    if budget is not None:
        return budget
    return int(0.6 * _available_memory())


def device_budget_bytes(device: torch.device) -> int:
    """Bytes one split's features may take on `device`: 0 on the CPU (host memory is `cache_budget_bytes`'s), else
    ``PAPA_FEATURE_DEVICE_GB`` GiB or 40% of its free memory (the model, the probes and the other split need the
    rest)."""
    if device.type != "cuda":
        return 0
    budget = _env_budget(DEVICE_BUDGET_ENV)
    if budget is not None:
        return budget
    free, _ = torch.cuda.mem_get_info(device)
    return int(0.4 * free)


def disk_budget_bytes(folder: Path) -> int:
    """Bytes one split's features may take on disk under `folder`: ``PAPA_FEATURE_DISK_GB`` GiB, else 90% of the
    free space there."""
    budget = _env_budget(DISK_BUDGET_ENV)
    if budget is not None:
        return budget
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return int(0.9 * shutil.disk_usage(probe).free)


def block_examples(layers: int, length: int, hidden: int, device: torch.device, *, batch_size: int,
                   total: int) -> int:
    """How many examples' padded features one block of `train_probes_in_blocks` holds: as many whole batches as fit
    the device's budget (on an accelerator) or host memory's, at least one batch, at most `total` (rounded up to a
    whole batch)."""
    budget = device_budget_bytes(device) if device.type == "cuda" else cache_budget_bytes()
    fit = budget // (layers * length * hidden * BYTES_PER_VALUE)
    whole = -(-total // batch_size) * batch_size
    return int(min(max(fit - fit % batch_size, batch_size), whole))


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

    @property
    def stored(self) -> bool:
        return self.placement != "backbone"

    def line(self, desc: str) -> str:
        """The decision in one line."""
        what = (f"{desc}: {self.examples:,} examples, {self.kept_positions:,} positions the probe reads: "
                f"{_gib(self.kept_bytes)} of float32 features (padded: {_gib(self.padded_bytes)})")
        if self.placement == "backbone":
            return f"{what}: not stored, the backbone runs again for every batch ({STORE_ENV}=backbone)"
        where = {"device": "on the device", "host": "in host memory",
                 "disk": f"in a memory-mapped file under {self.folder}"}[self.placement]
        return f"{what}: stored {where} (budget {_gib(self.budget_bytes)})"


def check_settings(device: str | torch.device | None = None) -> None:
    """The feature store's settings from the environment (``PAPA_FEATURE_*``) checked as `plan_store` reads them,
    for a run to refuse them before it loads a model or does any work; `device`, where known, rules out a forced
    ``device`` placement on the CPU."""
    for name in (CACHE_BUDGET_ENV, DEVICE_BUDGET_ENV, DISK_BUDGET_ENV):
        _env_budget(name)
    forced = _forced_store()
    if forced == "device" and device is not None and torch.device(device).type == "cpu":
        raise InputError(f"{STORE_ENV}=device: the model is on the CPU, so host memory is its device: give "
                         f"{STORE_ENV}=host")


def _forced_store(forced: str | None = None) -> str | None:
    """The placement `forced` or ``PAPA_FEATURE_STORE`` asks for (None: the first that fits), checked."""
    forced = forced or os.environ.get(STORE_ENV, "").strip() or None
    if forced is not None and forced not in FEATURE_STORES:
        raise InputError(f"{STORE_ENV}={forced!r}: choose one of {', '.join(FEATURE_STORES)}, or unset it to pick "
                         "the first that fits")
    return forced


def plan_store(keep: torch.Tensor, layers: int, hidden: int, device: torch.device, *, folder: Path | None = None,
               forced: str | None = None, desc: str = "features") -> StorePlan:
    """Where the features at `keep`'s positions ([N, n] bool) go: the first of device, host and disk whose budget
    they fit (or `forced`, default ``PAPA_FEATURE_STORE``); an `InputError` when none fits. A disk store goes under
    `folder` (None: the system's temporary folder)."""
    forced = _forced_store(forced)
    kept = int(keep.sum())
    kept_bytes = kept * layers * hidden * BYTES_PER_VALUE
    padded = keep.numel() * layers * hidden * BYTES_PER_VALUE
    folder = Path(folder) if folder is not None else Path(tempfile.gettempdir())

    def plan(placement: str, budget: int | None) -> StorePlan:
        return StorePlan(placement, keep.shape[0], kept, kept_bytes, padded, budget, folder)

    if forced == "backbone":
        return plan("backbone", None)
    budgets = {"device": lambda: device_budget_bytes(device), "host": cache_budget_bytes,
               "disk": lambda: disk_budget_bytes(folder)}
    if forced is not None:
        if forced == "device" and device.type == "cpu":
            raise InputError(f"{STORE_ENV}=device: the model is on the CPU, so host memory is its device: give "
                             f"{STORE_ENV}=host")
        return plan(forced, budgets[forced]())
    seen = {}
    for placement in STORED:
        if placement == "device" and device.type == "cpu":
            continue
        seen[placement] = budgets[placement]()
        if kept_bytes <= seen[placement]:
            return plan(placement, seen[placement])
    budget_text = ", ".join(f"{p} {_gib(b)}" for p, b in seen.items())
    raise InputError(
        f"{desc}: the features the probe reads take {_gib(kept_bytes)} ({kept:,} positions of {keep.shape[0]:,} "
        f"examples), more than every budget ({budget_text}; disk = free space under {folder}). Raise "
        f"{CACHE_BUDGET_ENV} or {DISK_BUDGET_ENV} (GiB) if the machine has room, use fewer examples, train in "
        "blocks (the grid's batch order 'blocks': the backbone runs once per example and epoch and every seed trains "
        "on its block; a stated change of batch order, recorded in the rows), or set "
        f"{STORE_ENV}=backbone to run the backbone again for every batch of every epoch and seed (same results, "
        "much slower).")


class FeatureStore:
    """The features at `keep`'s positions of one split, filled batch by batch (`put`) and read back padded (`get`)."""

    def __init__(self, plan: StorePlan, keep: torch.Tensor, layers: int, hidden: int, device: torch.device,
                 desc: str = "features"):
        if not plan.stored:
            raise ValueError("a 'backbone' plan stores nothing")
        self.plan, self.layers, self.hidden = plan, layers, hidden
        self.keep = keep.bool().cpu()
        counts = self.keep.sum(dim=1)
        self._counts = counts
        self._starts = torch.cumsum(counts, 0) - counts
        shape = (plan.kept_positions, layers, hidden)
        self.path: Path | None = None
        self._tmp: Path | None = None
        self._finalizer = None
        self._mapped = None
        self.home = device if plan.placement == "device" else torch.device("cpu")
        if plan.placement == "disk":
            plan.folder.mkdir(parents=True, exist_ok=True)
            stem = "".join(c if c.isalnum() else "-" for c in desc).strip("-") or "features"
            self.path = plan.folder / f"{stem}-{os.getpid()}-{id(self):x}.f32"
            self._tmp = self.path.with_suffix(".f32.tmp")
            # np.memmap cannot map an empty file: a split without a read position gets one unused row
            self._mapped = np.memmap(self._tmp, dtype=np.float32, mode="w+", shape=(max(shape[0], 1), *shape[1:]))
            self.values = torch.from_numpy(self._mapped)[:shape[0]]
            keep_file = os.environ.get(KEEP_ENV, "").strip() not in ("", "0")
            self._finalizer = weakref.finalize(self, _remove, None if keep_file else [self._tmp, self.path,
                                                                                       self._meta_path()])
        else:
            self.values = torch.empty(shape, dtype=torch.float32, device=self.home)

    def _meta_path(self) -> Path | None:
        return None if self.path is None else self.path.with_suffix(".json")

    def put(self, start: int, features: torch.Tensor) -> None:
        """Store the read positions of examples `start`… from their padded `features` [B, L+1, n, d]."""
        stop = start + features.shape[0]
        at = tuple(i.to(features.device) for i in self.keep[start:stop].nonzero(as_tuple=True))  # found on the host
        rows = features.permute(0, 2, 1, 3)[at]  # [kept in these examples, L+1, d], in row-major order
        first = int(self._starts[start]) if start < len(self._starts) else 0
        self.values[first:first + rows.shape[0]] = rows.to(self.values.device, torch.float32)

    def finish(self) -> None:
        """Every example is in: a disk store's file gets its final name (and a JSON file saying what it holds)."""
        if self._tmp is None:
            return
        self._mapped.flush()
        os.replace(self._tmp, self.path)
        meta = {"examples": self.plan.examples, "kept_positions": self.plan.kept_positions, "layers": self.layers,
                "hidden": self.hidden, "dtype": "float32", "layout": "[kept positions, L+1, d], row-major"}
        tmp_meta = self._meta_path().with_suffix(".json.tmp")
        tmp_meta.write_text(json.dumps(meta, sort_keys=True))
        os.replace(tmp_meta, self._meta_path())
        self._tmp = None

    def get(self, idx: torch.Tensor, device: torch.device) -> torch.Tensor:
        """Padded features [B, L+1, n, d] of examples `idx` on `device`: the stored values at the read positions,
        zeros elsewhere."""
        idx = idx.cpu()
        keep = self.keep[idx]
        counts = self._counts[idx]
        # each example's rows: its start + 0..count-1
        base = torch.repeat_interleave(self._starts[idx], counts)
        offset = torch.arange(base.shape[0]) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        values = self.values[(base + offset).to(self.values.device)].to(device)
        out = torch.zeros(len(idx), self.layers, keep.shape[1], self.hidden, dtype=torch.float32, device=device)
        # integer positions found on the host: a boolean mask on an accelerator would wait for it to count them
        at = tuple(i.to(device) for i in keep.nonzero(as_tuple=True))
        out.permute(0, 2, 1, 3)[at] = values
        return out

    def close(self) -> None:
        """Free the store; a disk store's file is removed (unless ``PAPA_KEEP_FEATURES=1``)."""
        self.values = self._mapped = None
        if self._finalizer is not None:
            self._finalizer()


def _remove(paths: list[Path | None] | None) -> None:
    for path in paths or []:
        if path is not None:
            path.unlink(missing_ok=True)
