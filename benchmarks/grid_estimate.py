"""Expected time of the `full` reproduction on GPUs, from the per-step times `full_cost.py` measured.

    python benchmarks/grid_estimate.py artifacts/gpu/full_cost.json [--workers 1 4 8] [--array 861]

The grid is read off the paper's notebooks (`papa.reproduce.jobs.notebook_jobs("full", PAPER_NOTEBOOKS)`: every
probe run, with its model, task, constants, selection and fraction) and grouped into what actually runs: per (model, constants corpus) one
extraction of average constants; per (model, task, kind) one λ ranking; per job one probe run. Costs:

* extraction: training examples / the capture rate measured at the task's length (part B);
* λ ranking and trainable constants: Table 3 epochs × steps per epoch × the part-B step time of that kind;
* every other run: Table 3 epochs × steps × the per-step time of part A's real SST-2 λ-ranked point (features
  re-computed every batch, as at full size), scaled to the task and model by part B's probe-step ratios.

BASE models (BERT, RoBERTa, ELECTRA, DeBERTa base) take roberta-base's times, LARGE ones roberta-large's; DeBERTa's
disentangled attention costs more than that, so its rows are a lower bound. Evaluation passes are counted at the
capture rate. On k workers the runs spread greedily (longest first) after each preparation; on a Slurm array with
enough parallel slots the time is the longest chain: a model's constants, then its ranking, then its longest run.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections import defaultdict

from papa.core.vocabulary import PAPER_NOTEBOOKS
from papa.reproduce.jobs import notebook_jobs
from papa.tasks.registry import get_task

#: Examples per split at full size (GLUE, CoNLL-2003, WikiText validation held-out articles; MNLI mismatched dev).
SIZES = {"cola": (8551, 1043), "sst2": (67349, 872), "mrpc": (3668, 408), "mnli": (392702, 9832),
         "ner": (14041, 3250), "pos": (14041, 3250), "mlm": (1603, 238)}


def size_class(model: str) -> str:
    return "roberta-large" if "large" in model else "roberta-base"


def estimate(cost: dict) -> dict:
    steps = {(r["model"], r["task"]): r for r in cost["steps"]}
    base_point = next(p for p in cost["points"] if p["model"] == "roberta-base")
    sst2_steps = math.ceil(SIZES["sst2"][0] / get_task("sst2").hparams.batch_size)
    probe_step_real = base_point["lambda_point_epoch_s"] / sst2_steps  # part A: seconds per step of a frozen run
    probe_scale = probe_step_real / steps[("roberta-base", "sst2")]["probe_step_s"]

    def per_epoch(cls: str, task: str, kind: str) -> float:
        spec = get_task(task)
        n_steps = math.ceil(SIZES[task][0] / spec.hparams.batch_size)
        s = steps[(cls, task)][f"{kind}_step_s"] * (probe_scale if kind == "probe" else 1.0)
        return n_steps * s

    def eval_s(cls: str, task: str) -> float:
        return SIZES[task][1] / steps[(cls, task)]["capture_seq_per_s"]

    jobs = notebook_jobs("full", PAPER_NOTEBOOKS)
    prep: dict[tuple, float] = {}
    runs: list[tuple[float, tuple]] = []
    for job in jobs:
        cls, spec = size_class(job.model), get_task(job.task)
        epochs = spec.hparams.epochs
        needs: list[tuple] = []
        if job.constants in ("average", "trainable_average"):
            corpus = job.task if job.constants_corpus in ("task", "none") else job.constants_corpus
            key = ("constants", job.model, corpus)
            prep[key] = SIZES[corpus][0] / steps[(cls, job.task)]["capture_seq_per_s"]
            needs.append(key)
        if job.selection in ("lambda", "reversed_lambda"):
            key = ("ranking", job.model, job.task, job.constants)
            prep[key] = epochs * per_epoch(cls, job.task, "lambda")
            needs.append(key)
        kind = "trainable" if job.constants.startswith("trainable_") and job.fraction != "1" else "probe"
        runs.append((epochs * per_epoch(cls, job.task, kind) + eval_s(cls, job.task), tuple(needs)))
    total_prep, total_runs = sum(prep.values()), sum(t for t, _ in runs)
    per_model: dict[str, float] = defaultdict(float)
    for key, t in prep.items():
        per_model[key[1]] += t
    for job, (t, _) in zip(jobs, runs):
        per_model[job.model] += t
    # Slurm array with enough slots: each run waits for its own preparations (constants before ranking).
    chain = max(t + sum(prep[k] for k in needs) for t, needs in runs)
    return {"jobs": len(jobs), "preparations": len(prep), "prep_s": total_prep, "runs_s": total_runs,
            "per_model_s": dict(per_model), "chain_s": chain, "prep": prep, "runs": runs}


def on_workers(est: dict, k: int) -> float:
    """Greedy longest-first schedule: preparations first (spread over k), then the runs (spread over k)."""
    def makespan(times: list[float]) -> float:
        heap = [0.0] * k
        for t in sorted(times, reverse=True):
            heapq.heappush(heap, heapq.heappop(heap) + t)
        return max(heap)
    return makespan(list(est["prep"].values())) + makespan([t for t, _ in est["runs"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cost", help="JSON written by benchmarks/full_cost.py")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 4, 8])
    args = parser.parse_args(argv)
    with open(args.cost) as fh:
        cost = json.load(fh)
    est = estimate(cost)
    h = 3600.0
    print(f"# full profile on {cost['device']} (torch {cost['torch']}): {est['jobs']} probe runs, "
          f"{est['preparations']} preparations (constants, λ rankings)\n")
    print("| model | GPU hours (1 GPU) |\n|---|---|")
    for model, t in sorted(est["per_model_s"].items()):
        print(f"| {model} | {t / h:.1f} |")
    print(f"\npreparations {est['prep_s'] / h:.1f} h, probe runs {est['runs_s'] / h:.1f} h\n")
    print("| where | expected wall time |\n|---|---|")
    for k in args.workers:
        print(f"| {k} GPU{'s' if k > 1 else ''} (`papa reproduce --workers {k}`) | {on_workers(est, k) / h:.1f} h |")
    print(f"| Slurm array, every job in parallel (`--submitit slurm`) | {est['chain_s'] / h:.1f} h "
          "(the longest chain: constants, ranking, run) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
