"""The cost model: the `full` profile's grid on one accelerator from what benchmarks/full_cost.py measured: the
estimate, its floors and FLOPs, and a prediction with a store for every configuration (docs/scaling.md).

    python -m benchmarks.cost COST.json [MORE.json ...] [--workers 1 4 8] [--host-gib G ...] [--disk-gbps 3] [--write]
"""
from __future__ import annotations

import argparse
import functools
import heapq
import json
import math
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

from benchmarks.rates import (DISK_SENSITIVITY, MNLI_LENGTHS, Prices, bandwidths, choose_path,  # noqa: F401
                               predicted_row, read_measured, runner_overhead, size_class, with_overhead)
from benchmarks.suite import (COST_FORMAT, device_peaks, feature_bytes, floor_hours, fmt, peak_tflops, row_flops,
                              share_of_peak, tflops)
from papa.core.vocabulary import PAPER_NOTEBOOKS
from papa.probing.feature_store import STORED as STORES
from papa.reproduce.jobs import notebook_jobs
from papa.runs.profiles import get_profile
from papa.sections.main_results import STABILITY_SEEDS
from papa.tasks.registry import get_task

#: Examples per split at full size (GLUE, CoNLL-2003, WikiText validation held-out articles; MNLI mismatched dev).
SIZES = {"cola": (8551, 1043), "sst2": (67349, 872), "mrpc": (3668, 408), "mnli": (392702, 9832),
         "ner": (14041, 3250), "pos": (14041, 3250), "mlm": (1603, 238)}
#: What a part-B row holds (tests/unit/test_full_cost.py checks full_cost.py's rows against it).
REQUIRED = ("forward_seq_per_s", "capture_seq_per_s", "fill_seq_per_s", "stored_step_s", "stored_eval_seq_per_s",
            "rerun_step_s", "lambda_step_s", "trainable_step_s", "plain_step_s", "read_per_example", "budget_bytes",
            "layers", "hidden")


def check_format(cost: dict, where: str | None = None) -> None:
    """Raise a ValueError, saying what to do, unless the cost file `cost` (read from `where`) is of `COST_FORMAT`."""
    found = cost.get("format")
    if found != COST_FORMAT:
        has = "records no format: an older full_cost.py wrote it" if found is None else f"is of format {found!r}"
        why = (" Such a file has no plain forward or plain step to set a floor with, its probe step read features "
               "cached in host memory and was rescaled by SST-2's real point, and its trained constants kept Q/K."
               if found is None else "")
        raise ValueError(f"{where or cost.get('device', 'this file')}: a cost file that {has}; the cost model reads "
                         f"format {COST_FORMAT}.{why} Rerun benchmarks/full_cost.py.")


def store_for(examples: int, row: dict, budgets: dict[str, float]) -> str | None:
    """Where a split of `examples` goes: the first store measured in `row` whose budget its features fit, else None
    (the runner stops: `papa.probing.feature_store.plan_store`)."""
    size = feature_bytes(examples, row)
    return next((s for s in STORES if s in row["fill_seq_per_s"] and size <= budgets.get(s, 0)), None)


def point_size(key: tuple, members: list, rows: dict, full, budgets: dict[str, float] | None) -> SimpleNamespace:
    """One head configuration (`key`: a job without its seed, `seeds` of them) as the `full` profile sizes it, with
    the part-B row it is costed from, its FLOPs and the stores' budgets."""
    job = members[0]
    spec, row, p = get_task(job.task), rows[(size_class(job.model), job.task)], full.for_task(job.task)
    train = min(SIZES[job.task][0], p.train_limit or SIZES[job.task][0])
    return SimpleNamespace(key=key, job=job, seeds=len(members), row=row, p=p, spec=spec, train=train,
                           evals=min(SIZES[job.task][1], p.eval_limit or SIZES[job.task][1]),
                           epochs=p.epochs or spec.hparams.epochs, steps=math.ceil(train / spec.hparams.batch_size),
                           stores=dict(row["budget_bytes"], **(budgets or {})), flops=row_flops(row))


def _part(parts: dict, name: str, t: float = 0.0, floor: float = 0.0, flops: float = 0.0,
          needed: float | None = None) -> None:
    """Add to a point's `parts` (part -> [estimate, floor, FLOPs as run, FLOPs needed]; needed: as run by default)."""
    for i, v in enumerate((t, floor, flops, flops if needed is None else needed)):
        parts.setdefault(name, [0.0] * 4)[i] += v


class Tally:
    """The estimate's work, unit by unit: each preparation (key -> estimate, floor, FLOPs), each point's parts (FLOPs
    as run, and as the protocol needs them: every split stored), floor and backbone path, and the points no store
    holds. `choose` says where a split goes (`store_for`'s signature)."""

    def __init__(self, restudied: set[tuple[str, str]], choose=store_for):
        self.restudied, self.choose = restudied, choose  # (model, task) whose rankings a notebook compares
        self.prep: dict[tuple, tuple[float, float, float]] = {}
        self.points: list[dict] = []
        self.unfit, self.unfit_cost = [], [0.0, 0.0]  # frozen points no store holds: [backbone path, in blocks]

    def add(self, pt: SimpleNamespace) -> None:
        """Cost one point and the preparations it needs."""
        point = {"model": pt.job.model, "task": pt.job.task, "needs": tuple(self._preparations(pt)), "parts": {}}
        eval_store = self.choose(pt.evals, pt.row, pt.stores)
        backbone_eval = pt.seeds * pt.evals / pt.row["fill_seq_per_s"]["host"]  # the backbone over the evaluation set
        trained = pt.job.constants.startswith("trainable_") and pt.job.fraction != "1"
        point["floor"], point["backbone"] = (self._trained if trained else self._frozen)(pt, point["parts"],
                                                                                         eval_store, backbone_eval)
        self.points.append(point)

    def _preparations(self, pt: SimpleNamespace) -> list[tuple]:
        """The point's constants and λ ranking (and the other seeds' rankings), costed; the keys it waits for."""
        job, row, p, spec, needs = pt.job, pt.row, pt.p, pt.spec, []
        if job.constants in ("average", "trainable_average"):
            corpus = job.task if job.constants_corpus in ("task", "none") else job.constants_corpus
            needs.append(("constants", job.model, corpus, spec.hparams.max_length))  # each length its own
            examples = SIZES[corpus][0]
            self.prep[needs[-1]] = (examples / row["capture_seq_per_s"], examples / row["forward_seq_per_s"],
                                    examples * pt.flops["capture"])
        if job.selection in ("lambda", "reversed_lambda"):
            steps = (p.rank_epochs or spec.hparams.epochs) * math.ceil(min(pt.train, p.rank_limit or pt.train)
                                                                       / spec.hparams.batch_size)
            needs.append(("ranking", job.model, job.task, job.constants))
            self.prep[needs[-1]] = (steps * row["lambda_step_s"], steps * row["plain_step_s"],
                                    steps * pt.flops["lambda_step"])
            if job.constants == "average" and (job.model, job.task) in self.restudied:  # no point depends on it
                extra = len(STABILITY_SEEDS) - 1
                self.prep[("stability", job.model, job.task)] = tuple(extra * v for v in self.prep[needs[-1]])
        return needs

    def _trained(self, pt: SimpleNamespace, parts: dict, eval_store: str | None, backbone_eval: float
                 ) -> tuple[float, float]:
        """(floor, backbone path) of a trained-constants point, its parts into `parts`."""
        p, row, seeds, evals, forward, f = pt.p, pt.row, pt.seeds, pt.evals, pt.row["forward_seq_per_s"], pt.flops
        # a profile may size trained constants apart (Profile.trainable_limit / trainable_epochs; not `full`)
        steps = (p.trainable_epochs or pt.epochs) * math.ceil(min(pt.train, p.trainable_limit or pt.train)
                                                               / pt.spec.hparams.batch_size)
        train_s = seeds * steps * row["trainable_step_s"]
        self.unfit += [] if eval_store else [pt.key]
        _part(parts, "trained constants: steps", train_s, seeds * steps * row["plain_step_s"],
              seeds * steps * f["trainable_step"])
        _part(parts, "trained constants: evaluation", seeds * (
            evals / row["fill_seq_per_s"][eval_store] + evals / row["stored_eval_seq_per_s"][eval_store])
            if eval_store else backbone_eval, seeds * evals / forward,
            seeds * evals * (f["fill_constant"] + f["stored_eval"]))
        return seeds * (steps * row["plain_step_s"] + evals / forward), train_s + backbone_eval

    def _frozen(self, pt: SimpleNamespace, parts: dict, eval_store: str | None, backbone_eval: float
                ) -> tuple[float, float]:
        """(floor, backbone path) of a frozen point, its parts into `parts`: on the backbone path where a split fits
        no store (beside what a store needs)."""
        row, seeds, train, evals, epochs, steps = pt.row, pt.seeds, pt.train, pt.evals, pt.epochs, pt.steps
        training, f = pt.spec.trains_probe, pt.flops
        train_store = self.choose(train, row, pt.stores) if training else "host"  # no training split: no store
        backbone = (seeds * epochs * steps * row["rerun_step_s"] if training else 0.0) + backbone_eval
        probe_steps = seeds * epochs * steps if training else 0
        fill_f, probe_f = ((train if training else 0) + evals) * f["fill"], probe_steps * f["stored_step"]
        ev_f = seeds * evals * f["stored_eval"]
        if train_store and eval_store:
            _part(parts, "frozen points: backbone pass", (train / row["fill_seq_per_s"][train_store] if training
                                                          else 0.0) + evals / row["fill_seq_per_s"][eval_store],
                  flops=fill_f)
            _part(parts, "frozen points: probe steps", probe_steps * row["stored_step_s"][train_store] if training
                  else 0.0, flops=probe_f)
            _part(parts, "frozen points: evaluation", seeds * evals / row["stored_eval_seq_per_s"][eval_store],
                  flops=ev_f)
        else:
            self.unfit.append(pt.key)
            self.unfit_cost[0] += backbone
            self.unfit_cost[1] += _in_blocks(pt, eval_store, backbone_eval)
            _part(parts, "frozen points: backbone path (no store fits)", backbone,
                  flops=probe_steps * f["rerun_step"] + seeds * evals * (f["fill"] + f["stored_eval"]),
                  needed=fill_f + probe_f + ev_f)
        floor = ((train if training else 0) + evals) / row["forward_seq_per_s"]
        _part(parts, "frozen points: backbone pass", floor=floor)
        return floor, backbone


def _in_blocks(pt: SimpleNamespace, eval_store: str | None, backbone_eval: float) -> float:
    """Seconds of a frozen point under `--batch-order blocks`: one backbone pass per epoch, each block's features
    held on the device where there is one, else in host memory, filled and read at that store's rates."""
    row, seeds, epochs, steps, evals = pt.row, pt.seeds, pt.epochs, pt.steps, pt.evals
    held = "device" if "device" in row["stored_step_s"] else "host"
    blocks = epochs * pt.train / row["fill_seq_per_s"][held] + seeds * epochs * steps * row["stored_step_s"][held]
    return blocks + ((evals / row["fill_seq_per_s"][eval_store] + seeds * evals / row["stored_eval_seq_per_s"][
        eval_store]) if eval_store else backbone_eval)


def _sums(tally: Tally, runs: list[tuple[float, tuple]]) -> tuple[dict, dict, dict, dict]:
    """(per model: estimate, floor, backbone path and FLOPs; per task: estimate; per part: [estimate, floor] and
    [FLOPs as run, needed]) of the points and then the preparations."""
    per_model: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    per_task, parts, flops = defaultdict(float), defaultdict(lambda: [0.0, 0.0]), defaultdict(lambda: [0.0, 0.0])
    for key, (t, floor, f) in tally.prep.items():
        for what, value in (("estimate", t), ("floor", floor), ("backbone", t), ("flops", f), ("flops_needed", f)):
            per_model[key[1]][what] += value
        per_task[key[2]] += t
    for point, (t, _) in zip(tally.points, runs):
        run, needed = (sum(v[i] for v in point["parts"].values()) for i in (2, 3))
        for what, value in (("estimate", t), ("floor", point["floor"]), ("backbone", point["backbone"]),
                            ("flops", run), ("flops_needed", needed)):
            per_model[point["model"]][what] += value
        per_task[point["task"]] += t
        for name, v in point["parts"].items():
            parts[name][0], parts[name][1] = parts[name][0] + v[0], parts[name][1] + v[1]
            flops[name][0], flops[name][1] = flops[name][0] + v[2], flops[name][1] + v[3]
    for key, (t, floor, f) in tally.prep.items():
        part = {"constants": "constants", "ranking": "λ rankings", "stability": "λ rankings, other seeds"}[key[0]]
        parts[part][0], parts[part][1] = parts[part][0] + t, parts[part][1] + floor
        flops[part][0], flops[part][1] = flops[part][0] + f, flops[part][1] + f
    return per_model, dict(per_task), dict(parts), dict(flops)


@functools.cache
def measures_stability(notebook: str) -> bool:
    """Whether `notebook` compares its λ rankings across seeds (calls `ranking_stability`)."""
    from papa.reproduce.notebooks import NOTEBOOK_DIR, code_cells

    return any("ranking_stability(" in source for _, source in code_cells(NOTEBOOK_DIR / f"{notebook}.ipynb"))


def estimate(cost: dict, budgets: dict[str, float] | None = None, choose=store_for, predict: bool = True,
             **inputs) -> dict:
    """Seconds of the estimate, the floor and the backbone path, and FLOPs, per unit, model, task and part, from the
    cost file's part-B rows times the `full` profile's jobs. `budgets` (bytes per store) replaces the ones each row
    measured; `choose` says where a split goes. With `predict` and the same device's speed table or steps and store
    measurements beside the cost (`load`), also the prediction with a store for every configuration (`prediction`;
    `inputs`: its ``disk_gbps`` and ``launch``)."""
    check_format(cost)
    if not cost.get("steps"):
        raise ValueError(f"{cost.get('device', 'this cost')}: no part-B rows to multiply by the jobs (part A alone "
                         "is only checked against them): add a file of benchmarks/full_cost.py --parts B.")
    rows = {(r["model"], r["task"]): r for r in cost["steps"]}
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
    tally, full = Tally(restudied, choose), get_profile("full")
    for point, members in points.items():
        tally.add(point_size(point, members, rows, full, budgets))
    prep = {key: t for key, (t, _, _) in tally.prep.items()}
    runs = [(sum(v[0] for v in point["parts"].values()), point["needs"]) for point in tally.points]
    per_model, per_task, parts, part_flops = _sums(tally, runs)
    est = {"jobs": len(jobs), "points": len(points), "preparations": len(prep), "prep": prep, "runs": runs,
           "prep_s": sum(prep.values()), "runs_s": sum(t for t, _ in runs),
           "per_model": {m: dict(v) for m, v in per_model.items()}, "per_task": per_task,
           "totals": {what: sum(m[what] for m in per_model.values())
                      for what in ("estimate", "floor", "backbone", "flops", "flops_needed")},
           "parts": parts, "part_flops": part_flops,
           # a Slurm array with enough slots: each point waits for its own preparations (constants before ranking)
           "chain_s": max(t + sum(prep[k] for k in needs) for t, needs in runs), "unfit": len(tally.unfit),
           "unfit_jobs": sum(len(points[p]) for p in tally.unfit), "unfit_backbone_s": tally.unfit_cost[0],
           "unfit_blocks_s": tally.unfit_cost[1]}
    add_floors(est, peak_tflops(cost.get("device", ""), cost.get("precision", "float32")))
    if predict and (cost.get("bench") or cost.get("measured")):
        prediction(cost, est, **inputs)
    return est


#: The share of the dense peak the goals' second floor assumes ("whole grid ≤ 2× its FLOP floor at 40% of peak").
GOAL_SHARE = 0.4


def add_floors(est: dict, peak: float | None) -> None:
    """Into every model's and the totals' figures: the FLOP floor (the FLOPs the protocol needs) at the dense `peak`
    and at `GOAL_SHARE` of it (None for an unknown device), and the rate the estimate implies (``tflops``)."""
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


def part_a_check(cost: dict, budgets: dict[str, float] | None = None) -> list[tuple[str, float, float, str, str]]:
    """(what, measured s, part B's prediction s, how predicted, the estimate's parts it stands for) for each of part
    A's real SST-2 measurements."""
    rows, out = {(r["model"], r["task"]): r for r in cost["steps"]}, []
    for point in cost.get("points", []):
        row = rows.get((point["model"], "sst2"))
        if row is None or "train_examples" not in point:
            continue
        train, evals, label = point["train_examples"], point["eval_examples"], f"{point['model']}, SST-2"
        steps, stores = math.ceil(train / get_task("sst2").hparams.batch_size), dict(row["budget_bytes"],
                                                                                      **(budgets or {}))
        out.append((f"{label}: constants, {point['constants_examples']:,} sentences", point["constants_s"],
                    point["constants_examples"] / row["capture_seq_per_s"], "capture rate", "constants"))
        out.append((f"{label}: λ ranking, 1 epoch of {train:,}", point["ranking_s"], steps * row["lambda_step_s"],
                    "λ step", "λ rankings"))
        if "lambda_point_s" in point:
            store = point.get("lambda_point_store") or store_for(train, row, stores)
            predicted = (steps * row["rerun_step_s"] + evals / row["fill_seq_per_s"]["host"] if store == "backbone"
                         else (train + evals) / row["fill_seq_per_s"][store] + steps * row["stored_step_s"][store]
                         + evals / row["stored_eval_seq_per_s"][store])
            out.append((f"{label}: λ-ranked point 1/2, 1 epoch of {train:,} + {evals} evaluated",
                        point["lambda_point_s"], predicted, f"store {store}", "frozen points"))
        if "trainable_point_s" in point:
            store = store_for(evals, row, stores) or "host"
            predicted = steps * row["trainable_step_s"] + evals / row["fill_seq_per_s"][store] \
                + evals / row["stored_eval_seq_per_s"][store]
            out.append((f"{label}: trained constants, 1 epoch of {train:,} + {evals} evaluated",
                        point["trainable_point_s"], predicted, "trained-constants step", "trained constants"))
    return out


def load(paths: list[str]) -> dict:
    """The cost files as one: their part-B rows and part-A points together (one device, one format), with the speed
    table the same GPU check wrote beside them in the cost's precision (``bench``), where there is one."""
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
    merged["precisions"] = sorted({c.get("precision", "float32") for c in costs})  # each file's: bf16, float32
    bench = Path(paths[0]).parent / f"bench_{'bf16' if merged.get('precision') == 'bf16' else 'fp32'}.json"
    merged["measured"] = read_measured(Path(paths[0]).parent, merged.get("device", ""))
    table = json.loads(bench.read_text()) if bench.is_file() else None
    if table is not None and table.get("device") == merged.get("device"):
        merged["bench"] = table
    return merged


# ---- the prediction: a store for every configuration, no launch overhead ----------------------------------------

#: Host memory of the nodes predicted for (bytes), and the share of it the pinned host store may take (the feature
#: store's default host budget is 60% of the memory available).
NODES, HOST_SHARE = {"1 TiB": 2**40, "2 TiB": 2**41}, 0.6
#: The grid's goals: (goal, model or None for the whole grid, hours, estimate / FLOP floor at 40% of peak).
GOALS = (("whole grid ≤ 25 GPU-hours", None, 25.0, None),
         ("whole grid ≤ 2× its FLOP floor at 40% of peak", None, None, 2.0),
         ("BERT-base, every section, ≤ 1 GPU-hour", "bert-base-uncased", 1.0, None))


def node_key(node: str) -> str:
    """The key of a node's predicted seconds in a model's figures: ``predicted_1tib_s`` for "1 TiB"."""
    return f"predicted_{node.replace(' ', '').lower()}_s"


def _node(cost: dict, prices: Prices, bandwidth: dict[str, float], memory: float) -> tuple[dict, dict]:
    """(the estimate, each split's path) with every split where `choose_path` puts it on a node of `memory` bytes
    (bf16 where the cost's precision is), its steps and stores priced by `prices` and `bandwidth`."""
    paths: dict[tuple, str] = {}

    def choose(examples: int, row: dict, budgets: dict[str, float]) -> str:
        paths[(row["model"], row["task"], examples)] = path = choose_path(
            feature_bytes(examples, row), budgets["device"], budgets["host"], cost.get("precision") == "bf16")[0]
        return path
    rows = [predicted_row(r, prices, bandwidth, HOST_SHARE * memory) for r in cost["steps"]]
    return estimate(dict(cost, steps=rows), choose=choose, predict=False), paths


def prediction(cost: dict, est: dict, disk_gbps: float | None = None, launch: float | None = None) -> None:
    """Into `est`: ``prediction`` (the inputs and each price's source, and per node the estimate's figures, each
    split's path and the total at each of `DISK_SENSITIVITY`'s disk bandwidths), and each model's and the totals'
    predicted seconds per node. `disk_gbps` and `launch` (seconds a step) replace the defaults
    (`benchmarks/rates.py`)."""
    peaks, prices = device_peaks(cost.get("device", "")), Prices(cost, launch)
    overhead = runner_overhead(part_a_check(cost))
    nominal = {"device": peaks.hbm * 1e9 if peaks else math.inf, "pinned_host": peaks.link * 1e9 if peaks else math.inf}
    bandwidth, why = bandwidths(nominal, disk_gbps, cost.get("measured", {}).get("store"))
    out = est["prediction"] = {"nodes": {}, "disk_gbps": bandwidth["disk_streamed"] / 1e9, "bandwidth": why,
                               "host_share": HOST_SHARE, "launch_ms": prices.launch * 1e3, "mnli_lengths": MNLI_LENGTHS,
                               "measured": sorted(cost.get("measured", {})), "disk_sensitivity": {},
                               "runner_overhead": overhead}
    for node, memory in NODES.items():
        pred, paths = _node(cost, prices, bandwidth, memory)
        out["nodes"][node] = {"totals": pred["totals"], "per_model": pred["per_model"], "parts": pred["parts"],
                              "unfit": pred["unfit"], "with_runner_overhead_s": with_overhead(pred["parts"], overhead),
                              "paths": {f"{m} {t} {n}": p for (m, t, n), p in sorted(paths.items())}}
        for model, figures in pred["per_model"].items():
            est["per_model"][model][node_key(node)] = figures["estimate"]
        est["totals"][node_key(node)] = pred["totals"]["estimate"]
        out["disk_sensitivity"][node] = {f"{g:g}": _node(cost, prices, bandwidths(nominal, g, None)[0], memory)[0][
            "totals"]["estimate"] for g in DISK_SENSITIVITY}
    out["sources"] = {kind: sorted(v) for kind, v in sorted(prices.sources.items())}


def goal_readings(est: dict, key: str = "estimate", precision: str | None = None) -> list[dict]:
    """Each of `GOALS` as the estimate's figures `key` read it: {goal, value, met}; not read (met None) off an
    estimate in another precision than bf16 (`precision`, where known) or without a FLOP floor."""
    found = []
    for goal, model, hours, ratio in GOALS:
        figures = est["per_model"][model] if model else est["totals"]
        value, met = "–", None
        if precision not in (None, "bf16"):
            value = f"the estimate is in {precision}"
        elif hours is not None:
            value, met = f"{figures[key] / 3600:.1f} h", figures[key] / 3600 <= hours
        elif figures.get("flop_floor_40_s"):
            value, met = f"{figures[key] / figures['flop_floor_40_s']:.2f}×", figures[key] / figures[
                "flop_floor_40_s"] <= ratio
        found.append({"goal": goal, "value": value, "met": met})
    return found


# ---- the estimate's tables ---------------------------------------------------------------------------------------

def _h(seconds: float | None, spec: str = ".1f") -> str:
    return "–" if seconds is None else format(seconds / 3600, spec)


def _model_rows(est: dict) -> list[str]:
    """The per-model table: FLOPs, the FLOP floor at peak and at 40% of it, the estimate and the rate it implies."""
    peak = est.get("peak_tflops")
    out = ["| model | PFLOP | FLOP floor at peak (h) | at 40% of peak (h) | estimate (h) | estimate / floor at 40% | "
           "TFLOP/s | % of peak | plain model at measured rates (h) | backbone path (h) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for model, v, bold in [(m, v, False) for m, v in sorted(est["per_model"].items())] + [("all", est["totals"], True)]:
        ratio = v["estimate"] / v["flop_floor_40_s"] if v.get("flop_floor_40_s") else None
        cells = [model, f"{v['flops_needed'] / 1e15:,.0f}", _h(v.get("flop_floor_s"), ".2f"),
                 _h(v.get("flop_floor_40_s"), ".2f"), _h(v["estimate"]), fmt(ratio, ".2f"), fmt(v.get("tflops"), ".1f"),
                 fmt(share_of_peak(v.get("tflops"), peak), ".1%"), _h(v["floor"]), _h(v["backbone"])]
        out.append("| " + " | ".join(f"**{c}**" if bold else c for c in cells) + " |")
    return out


def _part_rows(est: dict) -> list[str]:
    """The per-part table: FLOPs needed and as run, the FLOP floor, the estimate and the rate it implies."""
    peak = est.get("peak_tflops")
    out = ["| part | PFLOP needed | FLOP floor at peak (h) | at 40% of peak (h) | estimate (h) | PFLOP as run | "
           "TFLOP/s | % of peak | plain model at measured rates (h) |", "|---|---|---|---|---|---|---|---|---|"]
    for part, (t, floor) in est["parts"].items():
        run, needed = est.get("part_flops", {}).get(part, (0.0, 0.0))
        at_peak, rate = floor_hours(needed, peak), tflops(run, t)
        out.append(f"| {part} | {needed / 1e15:,.1f} | {fmt(at_peak, '.2f')} | "
                   f"{fmt(None if at_peak is None else at_peak / GOAL_SHARE, '.2f')} | {t / 3600:.1f} | "
                   f"{run / 1e15:,.1f} | {fmt(rate, '.1f')} | {fmt(share_of_peak(rate, peak), '.1%')} | "
                   f"{floor / 3600:.1f} |")
    return out


#: Part A and part B agree when neither is more than this many times the other.
AGREEMENT = 1.2


def _part_a_rows(checks: list[tuple[str, float, float, str, str]]) -> list[str]:
    """Part A's check, each row with measured / predicted and whether they agree within `AGREEMENT`."""
    out = [f"| part A, the runner on SST-2 | measured (s) | part B predicts (s) | from | measured / predicted | "
           f"within {AGREEMENT}× |", "|---|---|---|---|---|---|"]
    apart = 0
    for what, measured, predicted, how, _ in checks:
        ratio = measured / predicted if predicted > 0 else math.inf
        ok = 1 / AGREEMENT <= ratio <= AGREEMENT
        apart += not ok
        out.append(f"| {what} | {measured:.1f} | {predicted:.1f} | {how} | {ratio:.2f} | {'yes' if ok else '**no**'} |")
    out.append(f"\nPart B agrees with part A within {AGREEMENT}× on {len(checks) - apart} of {len(checks)} rows"
               + ("; where not, the runner's own work (set-up, encoding, host copies, launches between part B's "
                  "timed calls) is what part B does not time." if apart else "."))
    return out


def _prediction_rows(est: dict) -> list[str]:
    """The prediction's section: its inputs and each price's source, where each split goes on each node, the hours
    per model and part, the total at other disk bandwidths and with the runner's overhead part A measured, and the
    goals now and predicted."""
    p, nodes = est["prediction"], list(est["prediction"]["nodes"])
    cols, bw = "---|" * len(nodes), p["bandwidth"]
    out = [f"**With a store for every configuration, at measured rates: a prediction, not a measurement** "
           f"(`benchmarks/cost.py`, `benchmarks/rates.py`). Every split stored where `choose_path` puts it on the node "
           f"(bf16 where the precision allows, on disk bf16 first), no configuration on the backbone path. Each step "
           f"kind is priced at what was measured at its own shape (below); passes, fills and evaluations at part B's "
           f"rate in the store the path is computed in (bf16 paths: the float32 store's) or their bytes at the "
           f"path's bandwidth, whichever is longer. Inputs: pinned host memory {p['host_share']:.0%} of the node's; "
           f"bandwidth device {bw['device']}, pinned host {bw['pinned_host']}, disk {bw['disk_streamed']} "
           f"(`--disk-gbps`); launch overhead {p['launch_ms']:.1f} ms an eager step (part B's median probe step on "
           f"device-stored features, `--launch-ms`), added only where a step is priced off its own shape; MNLI's "
           f"lengths {p['mnli_lengths']}. Measurements beside the cost files: "
           f"{', '.join(p['measured']) or 'none (no steps or store-path benchmark in the folder)'}.\n",
           "| step kind | priced from |", "|---|---|"]
    out += [f"| {kind.replace('_', ' ')} | {'; '.join(src)} |" for kind, src in p["sources"].items()]
    out += ["", "| size class | task | examples | " + " | ".join(f"path, {n} node" for n in nodes) + " |",
            f"|---|---|---|{cols}"]
    for split in sorted({s for v in p["nodes"].values() for s in v["paths"]},
                        key=lambda s: (s.split()[0], s.split()[1], -int(s.split()[2]))):
        model, task, examples = split.split()
        out.append(f"| {model} | {task} | {int(examples):,} | "
                   + " | ".join(p["nodes"][n]["paths"].get(split, "–") for n in nodes) + " |")
    out += ["", "| model | FLOP floor at 40% of peak (h) | now (h) | "
            + " | ".join(f"predicted, {n} (h)" for n in nodes) + " |", f"|---|---|---|{cols}"]
    for model, v in [*sorted(est["per_model"].items()), ("**all**", est["totals"])]:
        out.append(f"| {model} | {_h(v.get('flop_floor_40_s'), '.2f')} | {v['estimate'] / 3600:.1f} | "
                   + " | ".join(f"{v[node_key(n)] / 3600:.1f}" for n in nodes) + " |")
    out += ["", "| part | " + " | ".join(f"predicted, {n} (h)" for n in nodes) + " |", f"|---|{cols}"]
    for part in p["nodes"][nodes[0]]["parts"]:
        out.append(f"| {part} | " + " | ".join(f"{p['nodes'][n]['parts'].get(part, (0.0,))[0] / 3600:.2f}"
                                             for n in nodes) + " |")
    gbps = list(p["disk_sensitivity"][nodes[0]])
    out += ["", "| disk (GB/s) | " + " | ".join(f"predicted, {n} (h)" for n in nodes) + " |", f"|---|{cols}"]
    out += [f"| {g} | " + " | ".join(f"{p['disk_sensitivity'][n][g] / 3600:.1f}" for n in nodes) + " |" for g in gbps]
    if p.get("runner_overhead"):
        said = ", ".join(f"{group} {r:.2f}×" for group, r in p["runner_overhead"].items())
        out += ["", "| runner overhead | " + " | ".join(f"predicted, {n} (h)" for n in nodes) + " |", f"|---|{cols}",
                "| none: part B's rates | " + " | ".join(f"{est['totals'][node_key(n)] / 3600:.1f}" for n in nodes)
                + " |", f"| part A's measured / predicted, each part at its group's ({said}; any other part 1×) | "
                + " | ".join(f"{p['nodes'][n]['with_runner_overhead_s'] / 3600:.1f}" for n in nodes) + " |"]
    out += ["", "| goal | now | " + " | ".join(f"predicted, {n}" for n in nodes) + " |", f"|---|---|{cols}"]
    readings = [goal_readings(est, key) for key in ["estimate", *map(node_key, nodes)]]
    for row in zip(*readings):
        out.append(f"| {row[0]['goal']} | " + " | ".join(g["value"] if g["met"] is None else
                                                       f"{g['value']} ({'met' if g['met'] else '**not met**'})"
                                                       for g in row) + " |")
    return out


def report(cost: dict, est: dict, workers: tuple[int, ...] = (1, 4, 8), budgets: dict[str, float] | None = None
           ) -> str:
    """The estimate's tables in Markdown: per model, per task, per part, on k workers, part A's check, and (where
    `estimate` made one) the prediction."""
    h, peak = 3600.0, est.get("peak_tflops")
    out = [f"Full profile on {cost['device']} (torch {cost['torch']}): {est['jobs']} probe runs in {est['points']} "
           f"head configurations, {est['preparations']} preparations (constants, λ rankings, rankings with other "
           "seeds)\n"]
    if est["unfit"]:
        out.append(f"{est['unfit']} head configurations ({est['unfit_jobs']} runs) have a split whose features fit no "
                   "store's budget: the runner stops there; they are counted on the backbone path "
                   f"(PAPA_FEATURE_STORE=backbone), {est['unfit_backbone_s'] / h:.1f} h for the frozen ones, which "
                   f"`--batch-order blocks` (a stated change of batch order) would run in "
                   f"{est['unfit_blocks_s'] / h:.1f} h.\n")
    out.append(f"Hours of one {cost['device']} in {cost.get('precision', 'float32')} (dense peak "
               f"{fmt(peak, ',.1f')} TFLOP/s, `benchmarks/suite.py`). FLOPs: what the protocol needs, every split "
               "stored (`benchmarks/cost.py`); the FLOP floor: those FLOPs at the dense peak and at 40% of it; "
               "TFLOP/s: the FLOPs the estimate runs over its hours; the plain model at measured rates: the floor "
               "of eager passes and steps at their measured (launch-bound) rates.\n")
    out += [*_model_rows(est), "\n| task (every model) | estimate (h) | share |\n|---|---|---|"]
    out += [f"| {task} | {t / h:.1f} | {t / est['totals']['estimate']:.0%} |"
            for task, t in sorted(est["per_task"].items(), key=lambda kv: -kv[1])]
    out += ["", *_part_rows(est), "\n| where | expected wall time |\n|---|---|"]
    out += [f"| {k} GPU{'s' if k > 1 else ''} (`papa reproduce --workers {k}`) | {on_workers(est, k) / h:.1f} h |"
            for k in workers]
    out.append(f"| Slurm array, every job in parallel (`--submitit slurm`) | {est['chain_s'] / h:.1f} h "
               "(the longest chain: constants, ranking, point) |")
    checks = part_a_check(cost, budgets)
    out += ["", *_part_a_rows(checks)] if checks else []
    out += ["", *_prediction_rows(est)] if est.get("prediction") else []
    return "\n".join(out) + "\n"


def write_estimate(files: list[str], **inputs) -> str:
    """The estimate of the cost files that exist, its tables written to estimate.md and its numbers (and the goals'
    readings) to estimate.json beside the first; returns the tables."""
    files = [p for p in files if Path(p).is_file()]
    if not files:
        raise RuntimeError("no cost file to estimate from: the cost steps did not run")
    cost = load(files)
    est = {**estimate(cost, **inputs), "precision": "/".join(cost["precisions"])}  # the files': bf16, float32, or both
    printed, folder = report(cost, est), Path(files[0]).parent
    record = {"from": [Path(f).name for f in files], "precision": est["precision"], **{
        k: v for k, v in est.items() if k not in ("prep", "runs", "prep_s", "runs_s", "part_flops", "peak_tflops")},
        "goals": goal_readings(est, precision=est["precision"])}
    for name, text in (("estimate.md", printed), ("estimate.json", json.dumps(record, indent=1))):  # each atomically
        (folder / f".{name}.tmp").write_text(text, encoding="utf-8")
        (folder / f".{name}.tmp").replace(folder / name)
    return printed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cost", nargs="+", help="JSON written by benchmarks/full_cost.py (part B, part A, or both)")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 4, 8])
    for store in STORES:
        parser.add_argument(f"--{store}-gib", type=float, default=None,
                            help=f"the {store} store's budget per split (default: what full_cost.py measured)")
    parser.add_argument("--disk-gbps", type=float, default=None, help="the prediction's disk bandwidth (default: "
                        "the folder's store-path benchmark, else 3 GB/s assumed)")
    parser.add_argument("--launch-ms", type=float, default=None, help="the prediction's launch overhead an eager step "
                        "(default: part B's median probe step on device-stored features)")
    parser.add_argument("--write", action="store_true",
                        help="write estimate.md and estimate.json beside the first file (the GPU check's estimate)")
    args = parser.parse_args(argv)
    inputs = {"disk_gbps": args.disk_gbps, "launch": None if args.launch_ms is None else args.launch_ms / 1e3}
    if args.write:
        sys.stdout.write(write_estimate(args.cost, **inputs))
        return 0
    budgets = {s: getattr(args, f"{s}_gib") * 2**30 for s in STORES if getattr(args, f"{s}_gib") is not None}
    try:
        cost = load(args.cost)
        est = estimate(cost, budgets, **inputs)
    except ValueError as exc:
        print(f"cost: {exc}", file=sys.stderr)
        return 2
    print(report(cost, est, tuple(args.workers), budgets), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
