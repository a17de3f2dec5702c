"""Committed runs against the same runs recomputed by today's code: a change that should not move results, checked.

    python artifacts/cpu_recheck/recheck.py --committed artifacts/cpu/results.csv \
        --recomputed RUNS/results.csv [...] --made-by "the commands that made them" --out artifacts/cpu_recheck

Rows are paired by run id (a run id hashes the run's whole configuration, seed included), so each pair is the same
run made by two versions of papa. Writes ``pairs.csv`` (each pair and its difference) and ``recheck.json`` (the
commands, the machine, and per task, constants kind and fraction: the pairs, how many are equal, the largest
difference), and prints that summary.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import pandas as pd
import torch

from papa.core.artifacts import atomic_path
from papa.runs.results import ResultsTable


def pairs(committed: pd.DataFrame, recomputed: pd.DataFrame) -> pd.DataFrame:
    """The runs of `recomputed` that `committed` holds too, with both values and their difference."""
    keep = ["run_id", "task", "constants", "selection", "fraction_label", "seed", "metric", "value"]
    both = recomputed[keep].merge(committed[["run_id", "value"]], on="run_id", suffixes=("_recomputed", "_committed"))
    return both.assign(difference=both["value_recomputed"] - both["value_committed"])


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per task, constants and fraction: pairs, equal pairs, the largest and the mean absolute difference."""
    grouped = table.assign(equal=table["difference"].eq(0), size=table["difference"].abs())
    return (grouped.groupby(["task", "constants", "fraction_label"], sort=False)
            .agg(pairs=("run_id", "size"), equal=("equal", "sum"), largest=("size", "max"),
                 mean_abs=("size", "mean")).reset_index())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--committed", type=Path, required=True)
    parser.add_argument("--recomputed", type=Path, nargs="+", required=True)
    parser.add_argument("--made-by", required=True, help="the commands that made the recomputed tables")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    committed = ResultsTable(args.committed).read()
    table = pd.concat([pairs(committed, ResultsTable(p).read()) for p in args.recomputed], ignore_index=True)
    if table.empty:
        raise SystemExit("no recomputed run is in the committed table (no run id in common)")
    per_group = summary(table)
    print(per_group.to_string(index=False))
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out / "pairs.csv") as tmp:
        table.to_csv(tmp, index=False)
    record = {"command": "python artifacts/cpu_recheck/recheck.py " + " ".join(argv or sys.argv[1:]),
              "made_by": args.made_by, "committed": str(args.committed),
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                          "torch": torch.__version__},
              "summary": per_group.to_dict(orient="records")}
    with atomic_path(args.out / "recheck.json") as tmp:
        tmp.write_text(json.dumps(record, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
