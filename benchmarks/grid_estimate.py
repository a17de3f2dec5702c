"""Expected time of the `full` reproduction on a GPU, beside its floor, from what `full_cost.py` measured.

    python -m benchmarks.grid_estimate COST.json [MORE.json ...] [--workers 1 4 8] [--host-gib G ...]

Several files (e.g. a part-B run and a part-A run of `full_cost.py`) are read as one when they name the same device.

The grid is read off the paper's notebooks (`papa.reproduce.jobs.notebook_jobs("full", PAPER_NOTEBOOKS)`: every
probe run, with its model, task, constants, selection, fraction and seed) and grouped as the runner runs it: per
(model, constants corpus, length) one extraction of average constants; per (model, task, kind) one λ ranking, and
one more per other seed of `STABILITY_SEEDS` where a notebook compares rankings across seeds (notebook 02); per head
configuration (a job without its seed) one point. Sizes are the `full` profile's: whole training and validation
sets (`SIZES`), Table 3's epochs. Every time is a part-B measurement of the task's own shape (`full_cost.py`); BASE
models (BERT, RoBERTa, ELECTRA, DeBERTa base) take roberta-base's, LARGE ones roberta-large's, so DeBERTa's rows
are a lower bound. Nothing is scaled from SST-2's real points (part A); they are checked against part B instead.

Estimate, as the runner runs:

* extraction: the corpus's training examples at the capture rate;
* λ ranking: epochs × steps × the λ step;
* a frozen point: one backbone pass over its training and evaluation examples (`fill_seq_per_s` of the store each
  split goes to: the first of device, host and disk whose budget its features fit, as `papa.probing.feature_store`
  decides), then for every seed epochs × steps × the probe step reading that store, and one evaluation over it;
* trained constants: for every seed, epochs × steps × the trained-constants step (Q/K dropped, as the runner), then
  one pass over the evaluation examples into a store and the probe's evaluation over it.

A split whose features fit no budget stops the runner with an error; such points are counted on the backbone path
(``PAPA_FEATURE_STORE=backbone``, the path without a feature store:
the backbone for every batch of every epoch of every seed, and for each seed's evaluation) and counted in the output,
beside what ``--batch-order blocks`` would take for them (one backbone pass per epoch, the seeds training on each
block held in memory; a stated change of batch order, so not the estimate).
The backbone path of every frozen point is printed too, as the cost without feature stores.

FLOPs and the FLOP floor: every part's FLOPs as the estimate runs it and as the protocol needs it (every
split stored: one backbone pass per frozen point), counted by `grid_flops.row_flops` (`papa.method.cost`); the FLOP
floor is the needed FLOPs at the device's dense peak and at 40% of it (`peaks.py`), and TFLOP/s the FLOPs run over
the estimate's hours. A second floor is "the plain model at measured rates" (key ``floor``): the
passes the protocol needs at the plain model's measured, launch-bound speed (one forward over a frozen point's
examples and each extraction corpus, a plain step for each λ and trained-constants step, a forward over the
evaluation examples per trained seed). Part A's rows are flagged where they and part B differ by more than
`AGREEMENT`. With the same device's speed table beside the cost (`load`), `grid_prediction.py` adds the estimate with
a store for every configuration and no launch overhead, a prediction from the committed rates.

On k workers the units spread greedily (longest first) after the preparations; on a Slurm array with enough parallel
slots the time is the longest chain: a model's constants, then its ranking, then its longest point.
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from papa.core.vocabulary import PAPER_NOTEBOOKS
from papa.probing.feature_store import BYTES_PER_VALUE, STORED as STORES
from papa.paper.sections import STABILITY_SEEDS
from papa.reproduce.jobs import Job, notebook_jobs
from papa.runs.profiles import Profile, get_profile
from papa.tasks.registry import TaskSpec, get_task

from benchmarks.cpu_estimate import measures_stability  # which notebooks learn rankings with other seeds
from benchmarks.grid_flops import row_flops
from benchmarks.peaks import floor_hours, peak_tflops, share_of_peak, tflops

#: Examples per split at full size (GLUE, CoNLL-2003, WikiText validation held-out articles; MNLI mismatched dev).
SIZES = {"cola": (8551, 1043), "sst2": (67349, 872), "mrpc": (3668, 408), "mnli": (392702, 9832),
         "ner": (14041, 3250), "pos": (14041, 3250), "mlm": (1603, 238)}
#: The format of `full_cost.py`'s JSON that this estimate reads (its ``format``; older files record none),
#: checked by `check_format`.
COST_FORMAT = 2
#: What a part-B row of that format holds (tests/unit/test_full_cost.py checks full_cost.py's rows against it).
REQUIRED = ("forward_seq_per_s", "capture_seq_per_s", "fill_seq_per_s", "stored_step_s", "stored_eval_seq_per_s",
            "rerun_step_s", "lambda_step_s", "trainable_step_s", "plain_step_s", "read_per_example", "budget_bytes",
            "layers", "hidden")


def size_class(model: str) -> str:
    return "roberta-large" if "large" in model else "roberta-base"


def check_format(cost: dict, where: str | None = None) -> None:
    """Raise a ValueError, saying what to do, unless the cost file `cost` (read from `where`) is of `COST_FORMAT`."""
    found = cost.get("format")
    if found != COST_FORMAT:
        has = "records no format: an older full_cost.py wrote it" if found is None else f"is of format {found!r}"
        why = (" Such a file has no plain forward or plain step to set a floor with, its probe step read features "
               "cached in host memory and was rescaled by SST-2's real point, and its trained constants kept Q/K."
               if found is None else "")
        raise ValueError(f"{where or cost.get('device', 'this file')}: a cost file that {has}; grid_estimate reads "
                         f"format {COST_FORMAT}.{why} Rerun benchmarks/full_cost.py.")


def store_for(examples: int, row: dict, budgets: dict[str, float]) -> str | None:
    """Where a split of `examples` goes: the first store measured in `row` whose budget its features fit, else None
    (the runner stops: `papa.probing.feature_store.plan_store`)."""
    size = examples * row["read_per_example"] * (row["layers"] + 1) * row["hidden"] * BYTES_PER_VALUE
    for store in STORES:
        if store in row["fill_seq_per_s"] and size <= budgets.get(store, 0):
            return store
    return None


@dataclass(frozen=True)
class PointSize:
    """One head configuration (`key`: a job without its seed, `seeds` of them) as the `full` profile sizes it (`p`:
    the profile for its task), with the part-B row it is costed from and the stores' budgets."""

    key: tuple
    job: Job
    seeds: int
    row: dict
    p: Profile
    spec: TaskSpec
    train: int
    evals: int
    epochs: int
    steps: int
    stores: dict[str, float]
    flops: dict[str, float]

    @classmethod
    def of(cls, key: tuple, members: list[Job], rows: dict, full: Profile, budgets: dict[str, float] | None
           ) -> "PointSize":
        job = members[0]
        spec = get_task(job.task)
        row = rows[(size_class(job.model), job.task)]
        p = full.for_task(job.task)
        train = min(SIZES[job.task][0], p.train_limit or SIZES[job.task][0])
        evals = min(SIZES[job.task][1], p.eval_limit or SIZES[job.task][1])
        return cls(key, job, len(members), row, p, spec, train, evals, p.epochs or spec.hparams.epochs,
                   math.ceil(train / spec.hparams.batch_size), dict(row["budget_bytes"], **(budgets or {})),
                   row_flops(row))


class Tally:
    """The estimate's sums, point by point (`estimate`): preparations, each point's estimate, floor and backbone
    path, their FLOPs (as run, and as the protocol needs them: every split stored), the parts, and the points whose
    features fit no store. `choose` says where a split goes (`store_for`'s signature)."""

    def __init__(self, restudied: set[tuple[str, str]], choose=store_for):
        self.restudied = restudied  # (model, task) whose rankings a notebook compares across seeds
        self.choose = choose
        self.prep: dict[tuple, float] = {}
        self.prep_floor: dict[tuple, float] = {}
        self.prep_flops: dict[tuple, float] = {}
        self.runs_flops: list[tuple[float, float]] = []  # per point: (as run, needed)
        self.part_flops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # part -> [as run, needed]
        self.runs: list[tuple[float, tuple]] = []
        self.runs_floor: list[float] = []
        self.runs_backbone: list[float] = []
        self.parts: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # part -> [estimate, floor]
        self.unfit: list[tuple] = []
        self.unfit_cost = [0.0, 0.0]  # frozen points no store holds: [backbone path, in blocks]

    def add(self, pt: PointSize) -> None:
        """Cost one point and the preparations it needs."""
        self._point_flops = [0.0, 0.0]
        needs = self._preparations(pt)
        eval_store = self.choose(pt.evals, pt.row, pt.stores)
        backbone_eval = pt.seeds * pt.evals / pt.row["fill_seq_per_s"]["host"]  # the backbone over the evaluation set
        if pt.job.constants.startswith("trainable_") and pt.job.fraction != "1":
            t, floor, backbone = self._trained(pt, eval_store, backbone_eval)
        else:
            t, floor, backbone = self._frozen(pt, eval_store, backbone_eval)
        self.runs.append((t, tuple(needs)))
        self.runs_floor.append(floor)
        self.runs_backbone.append(backbone)
        self.runs_flops.append((self._point_flops[0], self._point_flops[1]))

    def _preparations(self, pt: PointSize) -> list[tuple]:
        """The point's constants and λ ranking (and the other seeds' rankings), costed; the keys it waits for."""
        job, row, p, spec = pt.job, pt.row, pt.p, pt.spec
        needs = []
        if job.constants in ("average", "trainable_average"):
            corpus = job.task if job.constants_corpus in ("task", "none") else job.constants_corpus
            key = ("constants", job.model, corpus, spec.hparams.max_length)  # each length is its own extraction
            self.prep[key] = SIZES[corpus][0] / row["capture_seq_per_s"]
            self.prep_flops[key] = SIZES[corpus][0] * pt.flops["capture"]
            self.prep_floor[key] = SIZES[corpus][0] / row["forward_seq_per_s"]
            needs.append(key)
        if job.selection in ("lambda", "reversed_lambda"):
            rank_epochs = p.rank_epochs or spec.hparams.epochs
            rank_steps = math.ceil(min(pt.train, p.rank_limit or pt.train) / spec.hparams.batch_size)
            key = ("ranking", job.model, job.task, job.constants)
            self.prep[key] = rank_epochs * rank_steps * row["lambda_step_s"]
            self.prep_flops[key] = rank_epochs * rank_steps * pt.flops["lambda_step"]
            self.prep_floor[key] = rank_epochs * rank_steps * row["plain_step_s"]
            needs.append(key)
            if job.constants == "average" and (job.model, job.task) in self.restudied:  # no point depends on it
                extra = len(STABILITY_SEEDS) - 1
                key = ("stability", job.model, job.task)
                self.prep[key], self.prep_floor[key] = extra * self.prep[needs[-1]], extra * self.prep_floor[needs[-1]]
                self.prep_flops[key] = extra * self.prep_flops[needs[-1]]
        return needs

    def _trained(self, pt: PointSize, eval_store: str | None, backbone_eval: float) -> tuple[float, float, float]:
        """(estimate, floor, backbone path) of a trained-constants point."""
        p, row, seeds, evals, forward = pt.p, pt.row, pt.seeds, pt.evals, pt.row["forward_seq_per_s"]
        # a profile may size trained constants apart (Profile.trainable_limit / trainable_epochs; not `full`)
        epochs = p.trainable_epochs or pt.epochs
        steps = math.ceil(min(pt.train, p.trainable_limit or pt.train) / pt.spec.hparams.batch_size)
        train_s = seeds * epochs * steps * row["trainable_step_s"]
        eval_s = (seeds * (evals / row["fill_seq_per_s"][eval_store] + evals / row["stored_eval_seq_per_s"][
            eval_store]) if eval_store else backbone_eval)
        self.unfit += [] if eval_store else [pt.key]
        self.parts["trained constants: steps"][0] += train_s
        self.parts["trained constants: evaluation"][0] += eval_s
        t, backbone = train_s + eval_s, train_s + backbone_eval
        floor = seeds * (epochs * steps * row["plain_step_s"] + evals / forward)
        self.parts["trained constants: steps"][1] += seeds * epochs * steps * row["plain_step_s"]
        self.parts["trained constants: evaluation"][1] += seeds * evals / forward
        f = pt.flops
        self._flops("trained constants: steps", seeds * epochs * steps * f["trainable_step"])
        self._flops("trained constants: evaluation", seeds * evals * (f["fill_constant"] + f["stored_eval"]))
        return t, floor, backbone

    def _flops(self, part: str, flops: float, needed: float | None = None) -> None:
        """FLOPs of a point's `part` as run and as needed (default: the same), to the part and to the point."""
        needed = flops if needed is None else needed
        self.part_flops[part][0] += flops
        self.part_flops[part][1] += needed
        self._point_flops[0] += flops
        self._point_flops[1] += needed

    def _frozen(self, pt: PointSize, eval_store: str | None, backbone_eval: float) -> tuple[float, float, float]:
        """(estimate, floor, backbone path) of a frozen point: on the backbone path where a split fits no store."""
        row, seeds, train, evals, epochs, steps = pt.row, pt.seeds, pt.train, pt.evals, pt.epochs, pt.steps
        training = pt.spec.trains_probe
        train_store = self.choose(train, row, pt.stores) if training else "host"  # no training split: no store
        backbone = (seeds * epochs * steps * row["rerun_step_s"] if training else 0.0) + backbone_eval
        if train_store and eval_store:
            fill = (train / row["fill_seq_per_s"][train_store] if training else 0.0) + \
                evals / row["fill_seq_per_s"][eval_store]
            probe = seeds * epochs * steps * row["stored_step_s"][train_store] if training else 0.0
            ev = seeds * evals / row["stored_eval_seq_per_s"][eval_store]
            t = fill + probe + ev
            self.parts["frozen points: backbone pass"][0] += fill
            self.parts["frozen points: probe steps"][0] += probe
            self.parts["frozen points: evaluation"][0] += ev
            self._frozen_flops(pt, "frozen points: ")
        else:
            self.unfit.append(pt.key)
            t = backbone
            self.parts["frozen points: backbone path (no store fits)"][0] += t
            self.unfit_cost[0] += t
            self.unfit_cost[1] += _in_blocks(pt, eval_store, backbone_eval)
            self._frozen_flops(pt, None)
        floor = ((train if training else 0) + evals) / row["forward_seq_per_s"]
        self.parts["frozen points: backbone pass"][1] += floor
        return t, floor, backbone

    def _frozen_flops(self, pt: PointSize, prefix: str | None) -> None:
        """A frozen point's FLOPs into its parts (`prefix` + pass, steps, evaluation), or, on the backbone path
        (`prefix` None), as run there (the backbone every step and every evaluation) beside what a store needs."""
        f, seeds, evals = pt.flops, pt.seeds, pt.evals
        train = pt.train if pt.spec.trains_probe else 0
        probe_steps = seeds * pt.epochs * pt.steps if train else 0
        fill, probe, ev = (train + evals) * f["fill"], probe_steps * f["stored_step"], seeds * evals * f["stored_eval"]
        if prefix is not None:
            for part, flops in (("backbone pass", fill), ("probe steps", probe), ("evaluation", ev)):
                self._flops(prefix + part, flops)
            return
        rerun = probe_steps * f["rerun_step"] + seeds * evals * (f["fill"] + f["stored_eval"])
        self._flops("frozen points: backbone path (no store fits)", rerun, fill + probe + ev)

    def add_preparations(self) -> None:
        """Every preparation into its part, once the points are costed."""
        for key, t in self.prep.items():
            part = {"constants": "constants", "ranking": "λ rankings", "stability": "λ rankings, other seeds"}[key[0]]
            self.parts[part][0] += t
            self.parts[part][1] += self.prep_floor[key]
            self.part_flops[part][0] += self.prep_flops[key]
            self.part_flops[part][1] += self.prep_flops[key]

    def per_model(self, points: dict[tuple, list]) -> dict[str, dict[str, float]]:
        """Estimate, floor and backbone path of every model: its preparations and its points."""
        per_model: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for key in self.prep:
            for what, value in (("estimate", self.prep[key]), ("floor", self.prep_floor[key]),
                                ("backbone", self.prep[key]), ("flops", self.prep_flops[key]),
                                ("flops_needed", self.prep_flops[key])):
                per_model[key[1]][what] += value
        for members, t, floor, backbone, (flops, needed) in zip(points.values(), self.runs, self.runs_floor,
                                                                 self.runs_backbone, self.runs_flops):
            model = members[0].model
            per_model[model]["estimate"] += t[0]
            per_model[model]["floor"] += floor
            per_model[model]["backbone"] += backbone
            per_model[model]["flops"] += flops
            per_model[model]["flops_needed"] += needed
        return per_model

    def per_task(self, points: dict[tuple, list]) -> dict[str, float]:
        """Estimate of every task: a preparation counts to its corpus's or its ranking's task."""
        per_task: dict[str, float] = defaultdict(float)
        for key, t in self.prep.items():
            per_task[key[2]] += t
        for members, (t, _) in zip(points.values(), self.runs):
            per_task[members[0].task] += t
        return dict(per_task)


def _in_blocks(pt: PointSize, eval_store: str | None, backbone_eval: float) -> float:
    """Seconds of a frozen point under `--batch-order blocks`: one backbone pass per epoch, each block's features
    held where blocks live (`papa.probing.feature_store.block_examples`: on the device where there is one, else in
    host memory), filled and read at that store's rates."""
    row, seeds, epochs, steps, evals = pt.row, pt.seeds, pt.epochs, pt.steps, pt.evals
    held = "device" if "device" in row["stored_step_s"] else "host"
    blocks = epochs * pt.train / row["fill_seq_per_s"][held] + \
        seeds * epochs * steps * row["stored_step_s"][held]
    blocks += (evals / row["fill_seq_per_s"][eval_store] + seeds * evals / row[
        "stored_eval_seq_per_s"][eval_store]) if eval_store else backbone_eval
    return blocks


def estimate(cost: dict, budgets: dict[str, float] | None = None, choose=store_for, predict: bool = True) -> dict:
    """Seconds of the estimate, the floor and the backbone path, and FLOPs, per unit and per part (module docstring).
    `budgets` (bytes per store) replaces the budgets each row measured, store by store; `choose` says where a split
    goes (`store_for`). With `predict` and the same device's speed table beside the cost (`load`), also the estimate
    with a store for every configuration and no launch overhead (`grid_prediction.predict`)."""
    check_format(cost)
    if not cost.get("steps"):
        raise ValueError(f"{cost.get('device', 'this cost')}: no part-B rows to multiply by the jobs (part A alone "
                         "is only checked against them): add a file of benchmarks/full_cost.py --parts B.")
    rows = {(r["model"], r["task"]): r for r in cost["steps"]}
    full = get_profile("full")
    jobs = notebook_jobs("full", PAPER_NOTEBOOKS)
    restudied = {(j.model, j.task) for nb in PAPER_NOTEBOOKS if measures_stability(nb)
                 for j in notebook_jobs("full", [nb]) if j.selection in ("lambda", "reversed_lambda")}
    points: dict[tuple, list] = defaultdict(list)
    for job in jobs:
        points[job.point].append(job)
    missing = sorted({(size_class(j.model), j.task) for j in jobs} - set(rows))
    if missing:
        raise ValueError(f"{cost.get('device', 'this file')}: no part-B row for "
                         f"{', '.join(f'{m} {t}' for m, t in missing)}: run full_cost.py with every task and size")
    tally = Tally(restudied, choose)
    for point, members in points.items():
        tally.add(PointSize.of(point, members, rows, full, budgets))
    tally.add_preparations()
    prep, runs = tally.prep, tally.runs
    per_task, per_model = tally.per_task(points), tally.per_model(points)
    totals = {what: sum(m[what] for m in per_model.values())
              for what in ("estimate", "floor", "backbone", "flops", "flops_needed")}
    # Slurm array with enough slots: each point waits for its own preparations (constants before ranking).
    chain = max(t + sum(prep[k] for k in needs) for t, needs in runs)
    est = {"jobs": len(jobs), "points": len(points), "preparations": len(prep), "prep": prep, "runs": runs,
           "prep_s": sum(prep.values()), "runs_s": sum(t for t, _ in runs), "per_model": {
               m: dict(v) for m, v in per_model.items()}, "per_task": per_task, "totals": totals,
           "parts": dict(tally.parts), "part_flops": dict(tally.part_flops), "chain_s": chain,
           "unfit": len(tally.unfit), "unfit_jobs": sum(len(points[p]) for p in tally.unfit),
           "unfit_backbone_s": tally.unfit_cost[0], "unfit_blocks_s": tally.unfit_cost[1]}
    add_floors(est, peak_tflops(cost.get("device", ""), cost.get("precision", "float32")))
    if predict and cost.get("bench"):
        from benchmarks import grid_prediction

        grid_prediction.predict(cost, est)
    return est


#: The share of the dense peak the goals' second floor assumes ("whole grid ≤ 2× its FLOP floor at 40% of peak").
GOAL_SHARE = 0.4


def add_floors(est: dict, peak: float | None) -> None:
    """Into every model's and the totals' figures: the FLOP floor (the FLOPs the protocol needs, every split stored)
    at the dense `peak` and at `GOAL_SHARE` of it (``flop_floor_s``, ``flop_floor_40_s``; None for an unknown
    device), and the rate the estimate implies (``tflops``: FLOPs as run over the estimate's time)."""
    est["peak_tflops"] = peak
    for figures in (*est["per_model"].values(), est["totals"]):
        floor = floor_hours(figures["flops_needed"], peak)
        figures["flop_floor_s"] = None if floor is None else floor * 3600
        figures["flop_floor_40_s"] = None if floor is None else floor * 3600 / GOAL_SHARE
        figures["tflops"] = tflops(figures["flops"], figures["estimate"])


def on_workers(est: dict, k: int) -> float:
    """Greedy longest-first schedule: preparations first (spread over k), then the points (spread over k)."""
    def makespan(times: list[float]) -> float:
        heap = [0.0] * k
        for t in sorted(times, reverse=True):
            heapq.heappush(heap, heapq.heappop(heap) + t)
        return max(heap)
    return makespan(list(est["prep"].values())) + makespan([t for t, _ in est["runs"]])


def part_a_check(cost: dict, budgets: dict[str, float] | None = None) -> list[tuple[str, float, float, str]]:
    """(what, measured s, part B's prediction s, how predicted) for each of part A's real SST-2 measurements."""
    rows = {(r["model"], r["task"]): r for r in cost["steps"]}
    out = []
    for point in cost.get("points", []):
        row = rows.get((point["model"], "sst2"))
        if row is None or "train_examples" not in point:
            continue
        spec = get_task("sst2")
        train, evals = point["train_examples"], point["eval_examples"]
        steps = math.ceil(train / spec.hparams.batch_size)
        stores = dict(row["budget_bytes"], **(budgets or {}))
        label = f"{point['model']}, SST-2"
        out.append((f"{label}: constants, {point['constants_examples']:,} sentences", point["constants_s"],
                    point["constants_examples"] / row["capture_seq_per_s"], "capture rate"))
        out.append((f"{label}: λ ranking, 1 epoch of {train:,}", point["ranking_s"], steps * row["lambda_step_s"],
                    "λ step"))
        if "lambda_point_s" in point:
            store = point.get("lambda_point_store") or store_for(train, row, stores)
            if store == "backbone":
                predicted = steps * row["rerun_step_s"] + evals / row["fill_seq_per_s"]["host"]
            else:
                predicted = (train + evals) / row["fill_seq_per_s"][store] + steps * row["stored_step_s"][store] \
                    + evals / row["stored_eval_seq_per_s"][store]
            out.append((f"{label}: λ-ranked point 1/2, 1 epoch of {train:,} + {evals} evaluated", point[
                "lambda_point_s"], predicted, f"store {store}"))
        if "trainable_point_s" in point:
            store = store_for(evals, row, stores) or "host"
            predicted = steps * row["trainable_step_s"] + evals / row["fill_seq_per_s"][store] \
                + evals / row["stored_eval_seq_per_s"][store]
            out.append((f"{label}: trained constants, 1 epoch of {train:,} + {evals} evaluated",
                        point["trainable_point_s"], predicted, "trained-constants step"))
    return out


def load(paths: list[str]) -> dict:
    """The cost files as one: their part-B rows and part-A points together (one device, one format), with the speed
    table the same GPU check wrote beside them in the cost's precision (``bench``, `bench_file`), where there is one."""
    costs = [json.loads(Path(p).read_text()) for p in paths]
    for path, cost in zip(paths, costs):
        check_format(cost, path)
    merged = dict(costs[0], steps=[], points=[])
    for path, cost in zip(paths, costs):
        if cost.get("device") != merged.get("device"):
            raise ValueError(f"{path}: measured on {cost.get('device')!r}, not {merged.get('device')!r} as {paths[0]}")
        merged["steps"] += cost.get("steps", [])
        merged["points"] += cost.get("points", [])
    if len(paths) > 1:
        merged["command"] = " && ".join(c.get("command", "?") for c in costs)
    bench = bench_file(Path(paths[0]).parent, merged)
    if bench is not None:
        merged["bench"] = json.loads(bench.read_text())
    return merged


def bench_file(folder: Path, cost: dict) -> Path | None:
    """`folder`'s speed table (`bench.py --json`, eager) in the cost's precision, measured on the same device."""
    path = folder / f"bench_{'bf16' if cost.get('precision') == 'bf16' else 'fp32'}.json"
    if not path.is_file():
        return None
    return path if json.loads(path.read_text()).get("device") == cost.get("device") else None


def _h(seconds: float | None, spec: str = ".1f") -> str:
    return "–" if seconds is None else format(seconds / 3600, spec)


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{share:.1%}"


def _model_rows(est: dict) -> list[str]:
    """The per-model table: FLOPs, the FLOP floor at peak and at 40% of it, the estimate and the rate it implies."""
    peak = est.get("peak_tflops")
    out = ["| model | PFLOP | FLOP floor at peak (h) | at 40% of peak (h) | estimate (h) | estimate / floor at 40% | "
           "TFLOP/s | % of peak | plain model at measured rates (h) | backbone path (h) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    rows = [(m, v, False) for m, v in sorted(est["per_model"].items())] + [("all", est["totals"], True)]
    for model, v, bold in rows:
        ratio = v["estimate"] / v["flop_floor_40_s"] if v.get("flop_floor_40_s") else None
        cells = [model, f"{v['flops_needed'] / 1e15:,.0f}", _h(v.get("flop_floor_s"), ".2f"),
                 _h(v.get("flop_floor_40_s"), ".2f"), _h(v["estimate"]), _fmt(ratio, ".2f"),
                 _fmt(v.get("tflops"), ".1f"), _pct(share_of_peak(v.get("tflops"), peak)), _h(v["floor"]),
                 _h(v["backbone"])]
        out.append("| " + " | ".join(f"**{c}**" if bold else c for c in cells) + " |")
    return out


def _part_rows(est: dict) -> list[str]:
    """The per-part table: FLOPs needed and as run, the FLOP floor, the estimate and the rate it implies."""
    peak = est.get("peak_tflops")
    out = ["| part | PFLOP needed | FLOP floor at peak (h) | at 40% of peak (h) | estimate (h) | PFLOP as run | "
           "TFLOP/s | % of peak | plain model at measured rates (h) |", "|---|---|---|---|---|---|---|---|---|"]
    for part, (t, floor) in est["parts"].items():
        run, needed = est.get("part_flops", {}).get(part, (0.0, 0.0))
        at_peak = floor_hours(needed, peak)
        rate = tflops(run, t)
        out.append(f"| {part} | {needed / 1e15:,.1f} | {_fmt(at_peak, '.2f')} | "
                   f"{_fmt(None if at_peak is None else at_peak / GOAL_SHARE, '.2f')} | {t / 3600:.1f} | "
                   f"{run / 1e15:,.1f} | {_fmt(rate, '.1f')} | {_pct(share_of_peak(rate, peak))} | "
                   f"{floor / 3600:.1f} |")
    return out


#: Part A and part B agree when neither is more than this many times the other.
AGREEMENT = 1.2


def _part_a_rows(checks: list[tuple[str, float, float, str]]) -> list[str]:
    """Part A's check, each row with measured / predicted and whether they agree within `AGREEMENT`."""
    out = [f"| part A, the runner on SST-2 | measured (s) | part B predicts (s) | from | measured / predicted | "
           f"within {AGREEMENT}× |", "|---|---|---|---|---|---|"]
    apart = 0
    for what, measured, predicted, how in checks:
        ratio = measured / predicted if predicted > 0 else math.inf
        ok = 1 / AGREEMENT <= ratio <= AGREEMENT
        apart += not ok
        out.append(f"| {what} | {measured:.1f} | {predicted:.1f} | {how} | {ratio:.2f} | {'yes' if ok else '**no**'} |")
    out.append(f"\nPart B agrees with part A within {AGREEMENT}× on {len(checks) - apart} of {len(checks)} rows"
               + (f"; where not, the runner's own work (set-up, encoding, host copies, launches between part B's "
                  "timed calls) is what part B does not time." if apart else "."))
    return out


def report(cost: dict, est: dict, workers: tuple[int, ...] = (1, 4, 8), budgets: dict[str, float] | None = None
           ) -> str:
    """The estimate's tables in Markdown: per model, per task, per part, on k workers, part A's check, and (where
    `estimate` made one) the estimate with a store for every configuration and no launch overhead."""
    h = 3600.0
    out = [f"Full profile on {cost['device']} (torch {cost['torch']}): {est['jobs']} probe runs in {est['points']} "
           f"head configurations, {est['preparations']} preparations (constants, λ rankings, rankings with other "
           "seeds)\n"]
    if est["unfit"]:
        out.append(f"{est['unfit']} head configurations ({est['unfit_jobs']} runs) have a split whose features fit no "
                   "store's budget: the runner stops there; they are counted on the backbone path "
                   f"(PAPA_FEATURE_STORE=backbone), {est['unfit_backbone_s'] / h:.1f} h for the frozen ones, which "
                   f"`--batch-order blocks` (a stated change of batch order) would run in "
                   f"{est['unfit_blocks_s'] / h:.1f} h.\n")
    peak = est.get("peak_tflops")
    out.append(f"Hours of one {cost['device']} in {cost.get('precision', 'float32')} (dense peak "
               f"{_fmt(peak, ',.1f')} TFLOP/s, `benchmarks/peaks.py`). FLOPs: what the protocol needs, every split "
               "stored (`benchmarks/grid_flops.py`); the FLOP floor: those FLOPs at the dense peak and at 40% of it; "
               "TFLOP/s: the FLOPs the estimate runs over its hours; the plain model at measured rates: the floor "
               "of eager passes and steps at their measured (launch-bound) rates.\n")
    out += _model_rows(est)
    out.append("\n| task (every model) | estimate (h) | share |\n|---|---|---|")
    for task, t in sorted(est["per_task"].items(), key=lambda kv: -kv[1]):
        out.append(f"| {task} | {t / h:.1f} | {t / est['totals']['estimate']:.0%} |")
    out += ["", *_part_rows(est)]
    out.append("\n| where | expected wall time |\n|---|---|")
    for k in workers:
        out.append(f"| {k} GPU{'s' if k > 1 else ''} (`papa reproduce --workers {k}`) | {on_workers(est, k) / h:.1f} h |")
    out.append(f"| Slurm array, every job in parallel (`--submitit slurm`) | {est['chain_s'] / h:.1f} h "
               "(the longest chain: constants, ranking, point) |")
    checks = part_a_check(cost, budgets)
    if checks:
        out += ["", *_part_a_rows(checks)]
    if est.get("prediction"):
        from benchmarks import grid_prediction

        out += ["", *grid_prediction.report_rows(est)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cost", nargs="+", help="JSON written by benchmarks/full_cost.py (part B, part A, or both)")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 4, 8])
    for store in STORES:
        parser.add_argument(f"--{store}-gib", type=float, default=None,
                            help=f"the {store} store's budget per split (default: what full_cost.py measured)")
    args = parser.parse_args(argv)
    budgets = {s: getattr(args, f"{s}_gib") * 2**30 for s in STORES if getattr(args, f"{s}_gib") is not None}
    try:
        cost = load(args.cost)
        est = estimate(cost, budgets)
    except ValueError as exc:
        print(f"grid_estimate: {exc}", file=sys.stderr)
        return 2
    print(report(cost, est, tuple(args.workers), budgets), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
