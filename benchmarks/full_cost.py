"""What the `full` profile's work costs on one accelerator, measured for benchmarks/cost.py (docs/scaling.md), and what
a profile's grid costs on this CPU, from rates measured per task (docs/results.md).

    python -m benchmarks.full_cost --hub DIR --device cuda --json cost.json
    python -m benchmarks.full_cost --profile cpu [--notebooks 08_decoders --model smollm2] [--rates R.json]

DIR holds the paper's model folders (``roberta-base/``, ``roberta-large/``: configs and tokenizers), built with seeded
random weights. Part B times, per task at Table 3's batch and length, on real training rows where the data has them
(else synthetic ones: MNLI's with MRPC's real lengths, any other task's a quarter padding), every variant in one
round-robin call: the plain forward, capture, a frozen configuration's fill of each feature store, a probe's step and
evaluation over it, the backbone-path step, the λ, trained-constants and plain steps. Part A runs the grid runner
itself on SST-2 (constants, one epoch of the λ ranking, a λ-ranked and a trained-constants point), as a check.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

import papa
from benchmarks.cost import measures_stability
from benchmarks.suite import COST_FORMAT, cpu_name, env, interleaved, random_model_dir, synthetic_task
from papa.core.artifacts import atomic_path
from papa.core.settings import Resources
from papa.core.vocabulary import DEFAULT_PRECISION, PAPER_NOTEBOOKS, PRECISIONS
from papa.method.architectures import backbone
from papa.method.attention_free import drop_query_key, query_key_dropped_while, restore_query_key
from papa.method.constants import data_free_constants
from papa.method.models import canonical_model_name
from papa.method.precision import backbone_autocast
from papa.method.selection import heads_to_replace, replacement_order
from papa.probing.feature_store import (STORE_ENV, STORED, cache_budget_bytes, device_budget_bytes, disk_budget_bytes,
                                        read_positions)
from papa.probing.features import EncodedTask, FeatureSource, encode_task, hidden_features
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.reproduce.jobs import notebook_jobs
from papa.runs.profiles import get_profile
from papa.sections.main_results import STABILITY_SEEDS
from papa.tasks.data import load_examples
from papa.tasks.registry import get_task

#: A profile that is `full` in everything but epochs and seeds: one epoch of one seed of every run.
ONE_EPOCH = {"name": "full-one-epoch", "base": "full", "epochs": 1, "rank_epochs": 1, "seeds": [0]}
GRID_TASKS = ("cola", "sst2", "mrpc", "mnli", "ner", "pos", "mlm")
LAYOUT = "official"  # the full profile's layout for the paper's encoders (`papa jobs list --profile full`)
SST2_TRAIN, SST2_EVAL = 67349, 872  # GLUE SST-2's training and validation sets
#: A task without local data takes its rows' real lengths from this one (same kind of input).
LENGTH_PROXY = {"mnli": "mrpc"}


def timed(fn, device: torch.device) -> tuple[float, object]:
    """(wall seconds, value) of `fn()`, the device synchronised around it."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    value = fn()
    sync()
    return time.perf_counter() - start, value


@dataclass(frozen=True)
class PartA:
    """How part A runs the grid runner: on `device`, SST-2 from `data_dir`, under the profile file `profile`, seeing
    `train_examples` and `eval_examples` (as recorded), features in `store` (None: the runner's choice)."""

    device: torch.device
    data_dir: str
    profile: str
    train_examples: int
    eval_examples: int
    store: str | None
    precision: str = DEFAULT_PRECISION


def real_points(model_dir: Path, label: str, out: Path, setup: PartA, points: bool) -> dict:
    """Constants, one epoch of the λ ranking and (with `points`) a λ-ranked point (fraction 1/2) and a trained-
    constants point, one epoch of one seed each, timed as run (wall clock around the runner's call, its set-up
    included), with the examples it saw and where the runner kept the features."""
    from papa.runs.experiment import run_grid
    from papa.runs.lambda_ranking import learn_ranking
    from papa.runs.session import GridConfig, task_constants

    device = setup.device
    common = dict(task="sst2", model=str(model_dir), profile=setup.profile, data_dir=setup.data_dir, folder=str(out),
                  device=str(device), precision=setup.precision)
    result = {"model": label, "train_examples": setup.train_examples, "eval_examples": setup.eval_examples,
              "epochs": 1, "seeds": 1, "precision": setup.precision}
    grid = GridConfig("sst2", model=str(model_dir), profile=setup.profile, folder=str(out), data_dir=setup.data_dir,
                      device=str(device))
    t, (constants, _, _) = timed(lambda: task_constants(grid, progress=False), device)
    result["constants_s"], result["constants_examples"] = t, constants.metadata.num_examples
    print(json.dumps(result), flush=True)
    result["ranking_s"], _ = timed(lambda: learn_ranking(GridConfig(**common), progress=False), device)
    print(json.dumps(result), flush=True)
    if not points:
        return result
    with env(STORE_ENV, setup.store or os.environ.get(STORE_ENV)):
        for key, extra in (("lambda_point", dict(fractions=("1/2",))),
                           ("trainable_point", dict(constants=("trainable_average",), fractions=("0",)))):
            t, rows = timed(lambda: run_grid(GridConfig(**common, **extra, seeds=(0,)), progress=False), device)
            result[f"{key}_s"], result[f"{key}_runtime_s"] = t, float(rows["runtime_s"].sum())  # the runner's clock
            if "extra" in rows:
                result[f"{key}_store"] = json.loads(rows["extra"].iloc[0]).get("feature_store")
            print(json.dumps(result), flush=True)
    return result


def task_rows(task: str, tokenizer, model_type: str, vocab: int, data_dir: str | None, sample: int
              ) -> tuple[EncodedTask, str]:
    """`sample` rows to time `task` on, and where they come from: random training rows in the grid's layout where
    the data is local, else synthetic ones (with a proxy task's real lengths where `LENGTH_PROXY` names one)."""
    def real(name: str | None) -> EncodedTask | None:
        if not data_dir or name is None:
            return None
        spec = get_task(name)
        try:
            examples = load_examples(spec, "train", data_dir, limit=sample, sample="random")
        except Exception:  # noqa: BLE001 -- no local copy of this task: synthetic rows instead
            return None
        return encode_task(tokenizer, spec, examples, max_length=spec.hparams.max_length, model_type=model_type,
                           layout=LAYOUT)

    spec, rows = get_task(task), real(task)
    if rows is not None:
        return rows, f"real: {len(rows)} random training rows, layout {LAYOUT}"
    proxy = real(LENGTH_PROXY.get(task))
    if proxy is not None:
        lengths = proxy.inputs["attention_mask"].sum(dim=1)
        return (synthetic_task(spec, tokenizer, sample, spec.hparams.max_length, vocab, lengths), f"synthetic: random "
                f"ids, the real lengths of {len(lengths)} {LENGTH_PROXY[task]} rows (no local {task})")
    return synthetic_task(spec, tokenizer, sample, spec.hparams.max_length, vocab), "synthetic: a quarter padding"


def _take(data: EncodedTask, count: int) -> EncodedTask:
    """The first `count` rows of `data`, cycling when it has fewer."""
    inputs, labels = data.batch(torch.arange(count) % len(data))
    return EncodedTask(kind=data.kind, inputs=inputs, labels=labels)


class ThroughActivations:
    """The plain step's feature source (called as `FeatureSource` is): every head kept, the input embeddings a leaf
    that requires grad, so the backward runs through every layer's activations while no weight takes a gradient."""

    def __init__(self, model, data: EncodedTask):
        self.model, self.data, self.device = model, data, next(model.parameters()).device

    def __call__(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        inputs, labels = self.data.batch(idx.cpu())
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        embeds = self.model.get_input_embeddings()(inputs.pop("input_ids")).detach().requires_grad_()
        out = backbone(self.model)(inputs_embeds=embeds, **inputs, output_hidden_states=True)
        return torch.stack(out.hidden_states, dim=1), inputs["attention_mask"], labels.to(self.device)


@dataclass(frozen=True)
class PartB:
    """How part B times: `tasks` on `device`, `steps` training steps per variant, `repeats` timed rounds, the forward
    passes on `forward_batches` batches of `forward_batch`, rows from `data_dir` (`sample` of them read), disk stores
    under `folder`, the backbone in `precision`."""

    device: torch.device
    tasks: tuple[str, ...] | list[str]
    steps: int
    repeats: int
    forward_batch: int
    forward_batches: int
    data_dir: str | None
    sample: int
    folder: Path
    precision: str = DEFAULT_PRECISION


class TaskBench:
    """One task's part-B variants on the shared model: its rows, its head modes, its probe, the stores it opened."""

    def __init__(self, model, tokenizer, ctrl, task: str, setup: PartB):
        self.model, self.ctrl, self.setup, self.task, self.spec = model, ctrl, setup, task, get_task(task)
        self.vocab = len(tokenizer)
        self.stores = tuple(store for store in STORED if store != "device" or setup.device.type == "cuda")
        self.n, self.bs = self.spec.hparams.max_length, self.spec.hparams.batch_size
        self.pool, self.origin = task_rows(task, tokenizer, model.config.model_type, self.vocab, setup.data_dir,
                                           setup.sample)
        self.read = read_positions(self.pool.kind, self.pool.inputs["attention_mask"], self.pool.labels).sum(1).float()
        self.data = _take(self.pool, self.bs * setup.steps)
        self.forward_data = _take(self.pool, setup.forward_batch * setup.forward_batches)
        self.batches = [{k: v[j:j + setup.forward_batch].to(setup.device) for k, v in self.forward_data.inputs.items()}
                        for j in range(0, len(self.forward_data), setup.forward_batch)]
        self.fixed = data_free_constants("toeplitz", ctrl.signature, self.n, LAYOUT)
        order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
        self.half = heads_to_replace(order, "1/2", ctrl.num_layers, ctrl.num_heads, "down")
        self.settings = TrainSettings(self.spec.hparams.learning_rate, self.bs, 1)
        self.budgets = {"device": device_budget_bytes(setup.device), "host": cache_budget_bytes(),
                        "disk": disk_budget_bytes(setup.folder)}
        self.probe: torch.nn.Module | None = None
        self.opened: dict[str, FeatureSource] = {}

    def heads(self, mode: str) -> None:
        """Put the heads in `mode` (plain, half, lambda, trainable): Q/K restored first, then dropped where the
        runner drops them."""
        ctrl = self.ctrl
        restore_query_key(ctrl)
        ctrl.set_constants(self.fixed, trainable=mode == "trainable")
        ctrl.keep_all()
        if mode == "lambda":
            ctrl.mix()
        elif mode in ("half", "trainable"):
            ctrl.replace(self.half if mode == "half" else None)
            if ctrl.info.adapter.can_drop_query_key(ctrl.info):
                drop_query_key(ctrl)

    def fresh_probe(self, mode: str | None = None) -> None:
        """A step's or an evaluation's untimed set-up: the heads in `mode` (None: as they are), a new probe."""
        if mode is not None:
            self.heads(mode)
        self.probe = make_probe(self.spec, self.model, self.n, self.vocab).to(self.setup.device)

    def source(self, d: EncodedTask, store: str, trainable: bool = False) -> FeatureSource:
        """`d`'s features as the runner reads them, from `store` (``backbone``: the backbone run every batch)."""
        return FeatureSource(self.model, d, trainable_backbone=trainable, progress=False, folder=self.setup.folder,
                             store=store)

    def train(self, source, extra=()) -> None:
        """The probe's training steps on `source`, `extra` parameters trained beside it."""
        train_probe(self.probe, self.spec.kind, source, self.settings, seed=0, extra_parameters=list(extra),
                    progress=False)

    def fill_setup(self, store: str) -> None:
        """A fill's untimed set-up: half the heads replaced, the store the last fill opened closed."""
        self.heads("half")
        if store in self.opened:
            self.opened.pop(store).close()

    def fill(self, store: str) -> None:
        """One backbone pass over the forward examples into `store`."""
        self.opened[store] = self.source(self.forward_data, store)

    def forward(self, capture: bool = False) -> None:
        """The plain forward (hidden states, no gradient) of the forward batches, or constant extraction over them."""
        with self.ctrl.capturing(self.n) if capture else nullcontext(), torch.no_grad():
            for b in self.batches:
                if capture:
                    self.model(**b)
                else:
                    hidden_features(self.model, b)

    def step(self, name: str) -> None:
        """The probe's steps of variant `name`: the backbone run again for every batch (``rerun_step``), λ
        (``lambda_step``) or trained constants (``trainable_step``) trained beside it, or the plain model's steps
        through every layer's activations (``plain_step``)."""
        if name == "plain_step":
            return self.train(ThroughActivations(self.model, self.data))
        extra = {"rerun_step": [], "lambda_step": [self.ctrl.theta], "trainable_step": [self.ctrl.constants]}[name]
        self.train(self.source(self.data, "backbone", trainable=bool(extra)), extra)

    def stored_eval(self, source: FeatureSource) -> None:
        """The probe's evaluation over stored features."""
        evaluate_probe(self.probe, self.spec, source)

    def variants(self, stored: dict[str, FeatureSource]) -> dict[str, tuple[Callable[[], object], Callable[[], None]]]:
        """(untimed set-up, timed call) of every variant; the backbone's passes under the precision's autocast, a
        probe reading stored features in float32 (as the runner runs them)."""
        plain = partial(self.heads, "plain")
        variants = {"forward": (plain, self.forward), "capture": (plain, partial(self.forward, True))}
        for store in self.stores:
            variants[f"fill_{store}"] = (partial(self.fill_setup, store), partial(self.fill, store))
            variants[f"stored_step_{store}"] = (self.fresh_probe, partial(self.train, stored[store]))
            variants[f"stored_eval_{store}"] = (self.fresh_probe, partial(self.stored_eval, stored[store]))
        for name, mode in (("rerun_step", "half"), ("lambda_step", "lambda"), ("trainable_step", "trainable"),
                           ("plain_step", "plain")):
            variants[name] = (partial(self.fresh_probe, mode), partial(self.step, name))
        return {name: (setup, go if name.startswith(("stored_step", "stored_eval")) else
                       partial(_under_autocast, self.setup.precision, self.setup.device, go))
                for name, (setup, go) in variants.items()}

    def time(self, warmup: int) -> dict[str, float]:
        """Median seconds of every variant in one timing call; every store closed after it."""
        self.heads("half")  # what each seed's probe reads: stored once, as a frozen configuration's are
        stored = {store: self.source(self.data, store) for store in self.stores}
        t = interleaved(self.variants(stored), self.setup.repeats, self.setup.device, warmup=warmup)
        self.heads("plain")
        for s in [*stored.values(), *self.opened.values()]:
            s.close()
        self.probe = None
        return t

    def row(self, label: str, t: dict[str, float]) -> dict:
        """The task's row of the JSON from the medians `t`: rates per sequence, step times per step, and what sizes
        the stores (positions a probe reads per example, the budgets)."""
        cfg, steps, stores = self.model.config, self.setup.steps, self.stores
        forward_n, data_n = len(self.forward_data), len(self.data)
        return {"model": label, "task": self.task, "n": self.n, "batch_size": self.bs, "steps": steps,
                "repeats": self.setup.repeats, "precision": self.setup.precision, "layers": cfg.num_hidden_layers,
                "hidden": cfg.hidden_size, "rows": self.origin, "read_per_example": float(self.read.mean()),
                "real_tokens_per_example": float(self.pool.inputs["attention_mask"].sum(dim=1).float().mean()),
                "forward_batch": self.setup.forward_batch, "forward_examples": forward_n,
                "budget_bytes": self.budgets, "forward_seq_per_s": forward_n / t["forward"],
                "capture_seq_per_s": forward_n / t["capture"],
                "fill_seq_per_s": {s: forward_n / t[f"fill_{s}"] for s in stores},
                "stored_step_s": {s: t[f"stored_step_{s}"] / steps for s in stores},
                "stored_eval_seq_per_s": {s: data_n / t[f"stored_eval_{s}"] for s in stores},
                **{f"{k}_s": t[k] / steps for k in ("rerun_step", "lambda_step", "trainable_step", "plain_step")}}


def _under_autocast(precision: str, device: torch.device, fn: Callable[[], object]) -> None:
    """`fn` with the backbone under `precision`'s autocast, as the runner runs it."""
    with backbone_autocast(precision, device):
        fn()


def step_times(model_dir: Path, label: str, setup: PartB) -> list[dict]:
    """Part B: every task's row, each task's variants in one timing call (the model's first call run once untimed)."""
    model, tokenizer = papa.load_model(str(model_dir), device=setup.device)
    ctrl = papa.attach(model)
    rows = []
    for i, task in enumerate(setup.tasks):
        bench = TaskBench(model, tokenizer, ctrl, task, setup)
        rows.append(bench.row(label, bench.time(warmup=setup.repeats + 1 if i == 0 else 1)))
        print(json.dumps(rows[-1]), flush=True)
    papa.detach(model)
    return rows


# ---- a profile's rates on this CPU -------------------------------------------------------------------------------

def measure(model, tokenizer, task: str, layout: str, data_dir, sample: int) -> dict:
    """Rates of `task`'s work on `sample` random training examples in `layout` (fewer for backward passes): examples/s
    of a frozen configuration's features (half the heads replaced, Q/K dropped), seconds per example and epoch of the
    probe over them, seconds per example of a λ and a trained-constants step, examples/s of extraction."""
    from papa.method.extract import extract_constants
    from papa.tasks.corpus import task_corpus

    spec = get_task(task)
    n, bs = spec.hparams.max_length, spec.hparams.batch_size
    examples = load_examples(spec, "train", data_dir, limit=sample, sample="random")
    data, small = (encode_task(tokenizer, spec, e, max_length=n, model_type=model.config.model_type, layout=layout)
                   for e in (examples, examples[: max(2 * bs, sample // 8)]))
    ctrl = papa.controller_of(model)
    toeplitz = partial(data_free_constants, "toeplitz", ctrl.signature, n, layout)
    ctrl.set_constants(toeplitz())
    order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
    settings, row = TrainSettings(spec.hparams.learning_rate, bs, 1), {"task": task, "n": n, "batch_size": bs}
    ctrl.keep_all()
    ctrl.replace(heads_to_replace(order, "1/2", ctrl.num_layers, ctrl.num_heads, "down"))
    with query_key_dropped_while(ctrl):
        t, source = timed(partial(FeatureSource, model, data, trainable_backbone=False, progress=False), model.device)
    row["features_per_s"] = len(data) / t
    if spec.trains_probe:
        probe = make_probe(spec, model, n, len(tokenizer))
        t, _ = timed(partial(train_probe, probe, spec.kind, source, settings, seed=0, progress=False), model.device)
        row["probe_s"] = t / len(data)
    source = None  # its features freed before the backward passes
    for kind in ("lambda", "trainable"):
        ctrl.keep_all()
        if kind == "lambda":
            ctrl.mix()
        else:
            ctrl.set_constants(toeplitz(), trainable=True)
            ctrl.replace()
        probe = make_probe(spec, model, n, len(tokenizer))
        t, _ = timed(lambda: train_probe(probe, spec.kind, FeatureSource(model, small, trainable_backbone=True,
                                                                         progress=False), settings, seed=0,
                                         extra_parameters=[ctrl.theta if kind == "lambda" else ctrl.constants],
                                         progress=False), model.device)
        row[f"{kind}_s"] = t / len(small)
        ctrl.set_constants(toeplitz())
    ctrl.keep_all()
    corpus = task_corpus(task, "train", data_dir=data_dir, limit=sample // 2, sample="random")
    ctrl.detach()  # extraction attaches its own
    t, _ = timed(lambda: extract_constants(model, tokenizer, corpus, max_length=n, layout=layout,
                                           token_task=spec.token_level, progress=False), model.device)
    row["capture_per_s"] = len(corpus.texts) / t
    papa.attach(model)
    return row


def cpu_rates(model_name: str, layout: str, tasks: list[str], rates: dict, data_dir, sample: int,
              saved: Path | None):
    """(task, rates) of every task: read from `rates`, else measured (the model loaded once) and, where `saved` is
    given, every measurement written there as it is made."""
    model = None
    for task in tasks:
        if task not in rates:
            if model is None:
                model, tokenizer = papa.load_model(model_name)
                papa.attach(model)
            rates[task] = measure(model, tokenizer, task, layout, data_dir, sample)
            if saved:
                with atomic_path(saved) as tmp:  # a run stopped mid-write keeps the rates it had
                    tmp.write_text(json.dumps(rates, indent=1))
        yield task, rates[task]


@functools.cache  # every head configuration of a task asks again: read each file once
def split_size(task: str, split: str, limit, data_dir) -> int:
    from papa.tasks.data import load_examples

    return len(load_examples(get_task(task), split, data_dir, limit=limit, sample="random"))


def cpu_estimate(profile: str, notebooks, model: str, rates: dict, data_dir) -> dict:
    """Expected seconds per task and part of `notebooks`' grid on `model` from `rates` (task -> rates of
    `full_cost.cpu_rates`), grouped as the runner runs it and sized by the profile, capped by the data."""
    def ours(names):
        return [j for j in notebook_jobs(profile, names, resources=Resources(data_dir))
                if canonical_model_name(j.model) == canonical_model_name(model)]

    # (profile, task) of every λ ranking a notebook learns again with other seeds
    restudied = {(j.profile, j.task) for nb in notebooks if measures_stability(nb) for j in ours([nb])
                 if j.selection in ("lambda", "reversed_lambda")}
    points = defaultdict(list)
    for j in ours(notebooks):  # one head configuration serves every seed; learning curves have profiles of their own
        points[(j.profile, j.task, j.constants, j.constants_corpus, j.selection, j.fraction)].append(j.seed)
    cost: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    prep = set()
    for (name, task, kind, corpus, selection, fraction), seeds in points.items():
        p, r, spec, c = get_profile(name).for_task(task), rates[task], get_task(task), cost[task]
        train, evals = (split_size(task, s, limit, data_dir) for s, limit in (("train", p.train_limit),
                                                                              ("eval", p.eval_limit)))
        epochs = p.epochs or spec.hparams.epochs
        if kind in ("average", "trainable_average") and ("constants", task, corpus, p.corpus_limit) not in prep:
            prep.add(("constants", task, corpus, p.corpus_limit))
            source = task if corpus in ("task", "none") else corpus
            c["constants"] += split_size(source, "train", p.corpus_limit, data_dir) / r["capture_per_s"]
        if selection in ("lambda", "reversed_lambda") and ("rank", name, task, kind) not in prep:
            prep.add(("rank", name, task, kind))
            ranking = min(train, p.rank_limit or train) * (p.rank_epochs or spec.hparams.epochs) * r["lambda_s"]
            c["ranking"] += ranking
            if kind == "average" and (name, task) in restudied:  # the stability table compares average's rankings
                c["stability"] += (len(STABILITY_SEEDS) - 1) * ranking
        c["eval"] += evals / r["features_per_s"]
        if kind.startswith("trainable_") and fraction != "1":
            c["trainable"] += len(seeds) * (p.trainable_epochs or epochs) * min(train, p.trainable_limit or train) \
                * r["trainable_s"]
        elif spec.trains_probe:
            c["features"] += train / r["features_per_s"]
            c["probe"] += len(seeds) * epochs * train * r["probe_s"]
        c["configs"] += 1
    return cost


def cpu_main(args: argparse.Namespace) -> int:
    """`--profile`: the rates of the profile's tasks (measured, or read from `--rates`), then its expected minutes."""
    from papa.method.layout import layout_for
    from papa.method.models import is_causal_model
    from papa.tasks.data import resolve_data_dir

    torch.manual_seed(0)
    args.notebooks, data_dir = args.notebooks or list(PAPER_NOTEBOOKS), resolve_data_dir(args.data_dir)
    layout = layout_for(bool(is_causal_model(args.model)), None, get_profile(args.profile).layout)
    tasks = sorted({j.task for j in notebook_jobs(args.profile, args.notebooks, resources=Resources(args.data_dir))
                    if canonical_model_name(j.model) == canonical_model_name(args.model)})
    saved = Path(args.rates) if args.rates else None
    rates = json.loads(saved.read_text()) if saved and saved.is_file() else {}
    print(f"# {args.profile} profile, notebooks {' '.join(args.notebooks)}, {args.model}, layout {layout}, torch "
          f"threads {torch.get_num_threads()}" + (f", rates from {saved}" if saved and rates else "") + "\n")
    print("| task | n | features/s | probe ms/example/epoch | λ ms/example | trainable ms/example | capture/s |\n"
          "|---|---|---|---|---|---|---|")
    for task, r in cpu_rates(args.model, layout, tasks, rates, data_dir, args.sample, saved):
        probe = f"{1e3 * r['probe_s']:.2f}" if "probe_s" in r else "–"
        print(f"| {task} | {r['n']} | {r['features_per_s']:.0f} | {probe} | {1e3 * r['lambda_s']:.1f} | "
              f"{1e3 * r['trainable_s']:.1f} | {r['capture_per_s']:.0f} |", flush=True)
    cost = cpu_estimate(args.profile, args.notebooks, args.model, rates, data_dir)
    parts = ("constants", "ranking", "stability", "features", "probe", "eval", "trainable")
    print(f"\n| task | head configs | {' | '.join(parts)} | minutes |\n|---|---|{'---|' * len(parts)}---|")
    for task, c in sorted(cost.items()):
        print(f"| {task} | {c['configs']:.0f} | {' | '.join(f'{c[p] / 60:.1f}' for p in parts)} | "
              f"{sum(c[p] for p in parts) / 60:.1f} |")
    total = sum(sum(c[p] for p in parts) / 60 for c in cost.values())
    print(f"\nexpected: {total:.0f} minutes of grid work (seconds per part, in minutes above; notebooks' own "
          f"figures and tables add little)")
    return 0


# ---- the command line --------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hub", help="folder holding roberta-base/ and roberta-large/ configs (parts A and B)")
    p.add_argument("--data-dir", default=os.environ.get("PAPA_DATA_DIR"),
                   help="local data: SST-2 for part A, every task's real rows for part B")
    p.add_argument("--device", default="cuda")
    p.add_argument("--steps", type=int, default=6, help="training steps per task and kind (part B)")
    p.add_argument("--repeats", type=int, default=2, help="timed rounds per task (part B)")
    p.add_argument("--sample", type=int, default=None,
                   help="training rows per task read for their lengths (part B: default 1,024; --profile: timed, 512)")
    p.add_argument("--forward-batch", type=int, default=64,
                   help="batch of the forward, fill and capture passes (default 64, the runner's)")
    p.add_argument("--forward-batches", type=int, default=2, help="batches per forward pass timed (part B)")
    p.add_argument("--parts", default="AB", help="A, B or AB")
    p.add_argument("--tasks", nargs="+", default=list(GRID_TASKS), help="part B's tasks")
    p.add_argument("--sizes", nargs="+", default=["base", "large"], choices=("base", "large"))
    p.add_argument("--limit", type=int, default=None, help="smoke run only: cap every example count of part A")
    p.add_argument("--train-examples", type=int, default=None, help="part A's ranking and points see this many "
                   "SST-2 training examples (default: all 67,349); the constants always see the whole set")
    p.add_argument("--store", default=None, help="PAPA_FEATURE_STORE for part A's points (default: the runner's)")
    p.add_argument("--precision", default=DEFAULT_PRECISION, choices=[p for p in PRECISIONS if p != "tf32"],
                   help="how the backbone runs, as `papa probe --precision` (default float32)")
    p.add_argument("--tiny", action="store_true", help="smoke run only: models shrunk to suite.TINY")
    p.add_argument("--json", default=None, help="write the measurements to this JSON file")
    cpu = p.add_argument_group("a profile's grid on this CPU (--profile)")
    cpu.add_argument("--profile", default=None, help="measure this profile's tasks here and print its expected minutes")
    cpu.add_argument("--notebooks", nargs="+", default=None, help="default: the paper's notebooks")
    cpu.add_argument("--model", default=papa.DEFAULT_MODEL)
    cpu.add_argument("--rates", default=None, help="JSON file of rates: read where it exists (nothing measured), "
                     "else written")
    return p


def _one_epoch_profile(train_examples: int | None, limit: int | None) -> tuple[dict, int, int]:
    """Part A's profile (`ONE_EPOCH`, its training sets cut to `train_examples`, every set to `limit` in a smoke run),
    and the SST-2 training and evaluation examples it sees."""
    spec, seen, evals = dict(ONE_EPOCH), SST2_TRAIN, SST2_EVAL
    if train_examples:
        spec.update(name=f"full-one-epoch-{train_examples}", train_limit=train_examples)
        seen = min(train_examples, SST2_TRAIN)
    if limit:
        spec.update(name="full-one-epoch-smoke", train_limit=limit, eval_limit=limit, corpus_limit=limit)
        seen, evals = min(seen, limit), min(evals, limit)
    return spec, seen, evals


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.profile:
        args.sample = args.sample or 512
        return cpu_main(args)
    if args.hub is None:
        parser.error("give --hub (parts A and B) or --profile (a profile's grid on this CPU)")
    args.sample = args.sample or 1024
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    spec, seen, evals = _one_epoch_profile(args.train_examples, args.limit)
    report = {"format": COST_FORMAT,
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
              "torch": torch.__version__, "threads": torch.get_num_threads(),
              "command": "python -m benchmarks.full_cost " + " ".join(sys.argv[1:] if argv is None else argv),
              "profile": spec, "precision": args.precision, "tiny": args.tiny, "points": [], "steps": []}

    def write() -> None:
        if args.json:
            with atomic_path(args.json) as tmp:  # rewritten after each part: a stop mid-write keeps the last whole one
                tmp.write_text(json.dumps(report, indent=1))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "one_epoch.json").write_text(json.dumps(spec))
        dirs = {size: random_model_dir(Path(args.hub) / f"roberta-{size}", tmp / f"roberta-{size}-random",
                                       tiny=args.tiny) for size in args.sizes}
        if "B" in args.parts:
            part_b = PartB(device, args.tasks, args.steps, args.repeats, args.forward_batch, args.forward_batches,
                           args.data_dir, args.sample, tmp / "features", args.precision)
            for size in args.sizes:
                report["steps"] += step_times(dirs[size], f"roberta-{size}", part_b)
                write()
        if "A" in args.parts:
            part_a = PartA(device, args.data_dir, str(tmp / "one_epoch.json"), seen, evals, args.store, args.precision)
            for size in args.sizes:
                report["points"].append(real_points(dirs[size], f"roberta-{size}", tmp / f"out-{size}", part_a,
                                                    points=size == "base"))
                print(json.dumps(report["points"][-1]), flush=True)
                write()
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
