"""The step's fetch on each path a split's stored features can take (`papa.probing.feature_store.store_path`), on
synthetic features at the grid's shapes: milliseconds per step (every seed's batch) and GB/s of padded float32
features handed to the probes (docs/performance.md).

    python -m benchmarks.store_paths --shapes grid --json artifacts/timings/store_paths_gpu.json
    python -m benchmarks.store_paths --smoke      # tiny shapes, on the CPU, in seconds

On the CPU the device paths are left out and the pinned ones are plain host memory; a file just written is read
from the page cache (a split beyond memory is read from the disk itself).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from papa.core.artifacts import write_json_atomic
from papa.probing.feature_store import FeatureStore, StorePlan
from papa.probing.prefetch import stored_chunks, stored_steps


@dataclass(frozen=True)
class PathShape:
    """One configuration's features, synthetic: hidden states (L+1) x width, Table 3's length and batch."""

    name: str
    layers: int
    hidden: int
    length: int
    batch: int
    examples: int


#: BERT-base and RoBERTa-large on MNLI (Table 3: batch 8, length 256), RoBERTa-large on SST-2 (32, 64).
PATH_SHAPES = {"grid": (PathShape("bert-base mnli", 13, 768, 256, 8, 512),
                        PathShape("roberta-large mnli", 25, 1024, 256, 8, 256),
                        PathShape("roberta-large sst2", 25, 1024, 64, 32, 1024)),
               "smoke": (PathShape("tiny", 3, 32, 16, 4, 64),)}
#: (row name, placement, dtype, how) of each path timed: the device store; pinned host memory with every seed's
#: next batch copied on a side stream ("prefetch") or one `get` per seed and step; a memory-mapped file read batch by
#: batch, or in sequential chunks, each seed indexing its batches in the chunk; the same in bfloat16.
PATH_ROWS = (("device", "device", "float32", "prefetch"), ("device_bf16", "device", "bfloat16", "prefetch"),
             ("pinned_host: all seeds in one gather", "host", "float32", "prefetch"),
             ("pinned_host: one get per seed", "host", "float32", "get"),
             ("pinned_host_bf16: prefetch", "host", "bfloat16", "prefetch"),
             ("disk: batch by batch", "disk", "float32", "prefetch"),
             ("disk_streamed: chunks", "disk", "float32", "chunks"),
             ("disk_streamed_bf16: chunks", "disk", "bfloat16", "chunks"))


def _store(shape: PathShape, keep: torch.Tensor, placement: str, dtype: str, device: torch.device,
           folder: Path) -> FeatureStore:
    """A store of `keep`'s positions filled with random features, as `plan_store` would place it."""
    kept = int(keep.sum())
    width = shape.layers * shape.hidden * (4 if dtype == "float32" else 2)
    plan = StorePlan(placement, shape.examples, kept, kept * width, keep.numel() * width, None, folder, dtype,
                     device.type == "cuda", "chunks" if placement == "disk" else "per_seed")
    store = FeatureStore(plan, keep, shape.layers, shape.hidden, device, desc=f"bench {shape.name}")
    generator = torch.Generator().manual_seed(0)
    for a in range(0, kept, 4096):  # in pieces: a whole split of random float32 would double the memory
        piece = torch.randn(min(4096, kept - a), shape.layers, shape.hidden, generator=generator)
        store.values[a:a + len(piece)] = piece.to(store.values.device, store.dtype)
    store.finish()
    return store


def _fetch_seconds(store: FeatureStore, shape: PathShape, how: str, device: torch.device, seeds: int,
                   chunk: int) -> tuple[float, int]:
    """(seconds, steps) of one epoch's fetch of every seed's batches, `how` the store is read (`PATH_ROWS`)."""
    n, batch = shape.examples, shape.batch
    orders = [torch.randperm(n, generator=torch.Generator().manual_seed(s)) for s in range(seeds)]
    mask = torch.ones(n, shape.length, dtype=torch.long, device=device)
    labels = torch.zeros(n, dtype=torch.long, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start, steps = time.perf_counter(), 0
    if how == "prefetch":
        steps = sum(1 for _ in stored_steps(store, orders, 0, batch, device, mask, labels))
    elif how == "get":
        for a in range(0, n, batch):
            for order in orders:
                store.get(order[a:a + batch], device)
            steps += 1
    else:
        for feats, _, _ in stored_chunks(store, [(a, min(a + chunk, n)) for a in range(0, n, chunk)], device, mask,
                                         labels):
            for s in range(seeds):
                order = torch.randperm(len(feats), generator=torch.Generator().manual_seed(s)).to(device)
                for a in range(0, len(feats), batch):
                    feats[order[a:a + batch]]
            steps += -(-len(feats) // batch)
    sync()
    return time.perf_counter() - start, steps


def path_rows(args: argparse.Namespace, measured=lambda rows: None) -> list[dict]:
    """Every path's fetch timed at every shape of `args.shapes` (`--kept` of the slots read, lengths drawn uniformly
    around it), each on a second, warm pass; `measured` is given the rows so far after each one."""
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    folder, rows = Path(args.folder or tempfile.gettempdir()), []
    for shape in PATH_SHAPES["smoke" if args.smoke else args.shapes]:
        shape = replace(shape, examples=args.examples or shape.examples)
        lengths = torch.randint(max(1, int(shape.length * args.kept / 2)),
                                max(2, int(shape.length * args.kept * 1.5)) + 1, (shape.examples,),
                                generator=torch.Generator().manual_seed(0)).clamp(max=shape.length)
        keep = torch.arange(shape.length)[None, :] < lengths[:, None]
        padded = shape.batch * args.seeds * shape.layers * shape.length * shape.hidden * 4
        for name, placement, dtype, how in PATH_ROWS:
            if placement == "device" and device.type != "cuda":
                continue
            store = _store(shape, keep, placement, dtype, device, folder)
            try:
                for _ in range(2):  # the second: warm
                    seconds, steps = _fetch_seconds(store, shape, how, device, args.seeds,
                                                    args.chunk_examples or 8 * shape.batch)
            finally:
                store.close()
            rows.append({"shape": shape.name, "path": name if device.type == "cuda" else name.replace("pinned_", ""),
                         "ms_per_step": 1e3 * seconds / steps, "gb_per_s": padded * steps / seconds / 1e9,
                         "steps": steps, "device": device.type, "kept_gib": store.plan.kept_bytes / 2**30})
            measured(rows)
    return rows


def _save(args: argparse.Namespace, argv: list[str] | None, rows: list[dict], *, complete: bool) -> None:
    """The rows so far and their metadata, written atomically to ``--json`` when it is given."""
    if not args.json:
        return
    record = {"command": "python -m benchmarks.store_paths " + " ".join(argv or sys.argv[1:]),
              "machine": {"cpus": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None},
              "seeds": args.seeds, "kept": args.kept, "complete": complete, "rows": rows}
    write_json_atomic(args.json, record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, on the CPU, in seconds")
    parser.add_argument("--shapes", choices=sorted(PATH_SHAPES), default="grid")
    parser.add_argument("--seeds", type=int, default=5, help="seeds reading each epoch (default 5)")
    parser.add_argument("--examples", type=int, default=None, help="examples per split (default: the shapes')")
    parser.add_argument("--kept", type=float, default=0.3, help="share of slots the probe reads (default 0.3)")
    parser.add_argument("--chunk-examples", type=int, default=None, help="examples per chunk (default: 8 batches)")
    parser.add_argument("--folder", default=None, help="where the disk stores go (default: the temporary folder)")
    parser.add_argument("--json", default=None, help="write the table and its metadata here")
    args = parser.parse_args(argv)
    for bad, says in ((args.examples is not None and args.examples < 1, f"--examples {args.examples}: give at least 1"),
                      (not 0 < args.kept <= 1, f"--kept {args.kept}: give the share of slots read, in (0, 1]"),
                      (args.seeds < 1, f"--seeds {args.seeds}: give at least 1"),
                      (args.chunk_examples is not None and args.chunk_examples < 1,
                       f"--chunk-examples {args.chunk_examples}: give at least 1")):
        if bad:
            parser.error(says)
    if args.folder is not None and not Path(args.folder).is_dir():
        parser.error(f"--folder {args.folder}: no such folder")
    rows = path_rows(args, lambda rows: _save(args, argv, rows, complete=False))  # a stopped run keeps its rows
    width = max(len(r["path"]) for r in rows)
    print(f"{'shape':<20} {'path':<{width}} {'ms/step':>9} {'GB/s':>7}  ({args.seeds} seeds' batches a step)")
    for r in rows:
        print(f"{r['shape']:<20} {r['path']:<{width}} {r['ms_per_step']:9.3f} {r['gb_per_s']:7.2f}")
    _save(args, argv, rows, complete=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
