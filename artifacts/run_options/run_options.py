"""What the backbone's run options do to one task's scores, paired by seed against float32 eager.

    python artifacts/run_options/run_options.py --profile cpu --task sst2 --fractions 1 0 \
        --out artifacts/run_options/cpu
    python artifacts/run_options/run_options.py --profile cpu --task sst2 --fractions 1 --settings float32 bf16_store
        --out artifacts/run_options/bf16_store    # (one line) bfloat16 stores against float32

Runs the same grid points (`papa.runs.experiment.run_grid`, the profile's seeds, average constants) once per setting
into one results table: float32 eager (the protocol's), `--precision bf16`, `--compile`, `--batch-order blocks`
(`--settings` picks; also `--precision bf16_store` and `--batch-order chunks`; tf32 needs CUDA), then prints each
setting − float32 eager per fraction, paired by seed, with its 95% interval (seeds and evaluation examples:
`papa.runs.compare`) and the smallest difference the comparison could detect, beside each setting's wall time.
Writes ``comparison.csv`` and ``run_options.json`` (the command, the machine, the wall times) beside the table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd
import torch

from papa.core.artifacts import atomic_path
from papa.core.run_folder import RunFolder
from papa.runs.compare import compare, comparison_text
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.results import ResultsTable

SETTINGS = {"float32": {}, "bf16": {"precision": "bf16"}, "tf32": {"precision": "tf32"},
            "bf16_store": {"precision": "bf16_store"}, "compiled": {"compile": True},
            "blocks": {"batch_order": "blocks"}, "chunks": {"batch_order": "chunks"}}
COLUMN = {"bf16": ("precision", "float32", "bf16"), "tf32": ("precision", "float32", "tf32"),
          "bf16_store": ("precision", "float32", "bf16_store"), "compiled": ("execution", "eager", "compiled"),
          "blocks": ("batch_order", "per_seed", "blocks"), "chunks": ("batch_order", "per_seed", "chunks")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--fractions", nargs="+", default=["1", "0"])
    parser.add_argument("--settings", nargs="+", default=["float32", "bf16", "compiled", "blocks"],
                        choices=list(SETTINGS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data-dir", default=os.environ.get("PAPA_DATA_DIR") or None)
    parser.add_argument("--out", type=Path, default=Path("artifacts/run_options/cpu"))
    args = parser.parse_args(argv)
    if "float32" not in args.settings:
        args.settings.insert(0, "float32")  # the reference every other setting is paired with

    seconds = {}
    for name in args.settings:
        cfg = GridConfig(task=args.task, profile=args.profile, fractions=tuple(args.fractions),
                         constants=("average",), folder=args.out, data_dir=args.data_dir, device=args.device,
                         **SETTINGS[name])
        start = time.perf_counter()
        rows = run_grid(cfg, progress=False)
        seconds[name] = round(time.perf_counter() - start, 1)
        print(f"{name}: {len(rows)} runs in {seconds[name]:.0f} s (0 when they were already in the table)",
              flush=True)
    results = ResultsTable(args.out / "results.csv").read()
    tables = []
    for name in args.settings[1:]:
        column, reference, other = COLUMN[name]
        fixed = {c: d for c, d in (("precision", "float32"), ("execution", "eager"), ("batch_order", "per_seed"))
                 if c != column}
        table = compare(results, column, reference, other, folder=RunFolder.at(args.out), fixed=fixed)
        print(f"\n{name} - float32 eager, paired by seed ({args.task}, profile {args.profile}):")
        print(comparison_text(table))
        tables.append(table.assign(setting=name))
    comparison = pd.concat(tables, ignore_index=True)
    with atomic_path(args.out / "comparison.csv") as tmp:
        comparison.to_csv(tmp, index=False)
    record = {"command": "python artifacts/run_options/run_options.py " + " ".join(argv or sys.argv[1:]),
              "seconds": seconds,
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                          "torch": torch.__version__, "threads": torch.get_num_threads()}}
    with atomic_path(args.out / "run_options.json") as tmp:
        tmp.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
