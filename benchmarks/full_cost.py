"""What the `full` profile costs on one accelerator: per-task step times and rates, and real points on SST-2.

    python -m benchmarks.full_cost --hub DIR --device cuda --json cost.json

DIR holds the paper's model folders (config.json and tokenizer files, e.g. ``roberta-base/``, ``roberta-large/``);
the models are built from their configs with seeded random weights (time does not depend on the weights' values).

Part B, per task of the full grid at Table 3's batch size and length, what `grid_estimate.py` multiplies by the
grid. Each task is timed on its own shape (MNLI at n = 256 and batch 8 like any other: nothing is scaled from another
task), on real training rows in the grid's layout where the data directory has them (random ones, `--sample` of
them, also give the mean number of positions a probe reads per example, which sizes the feature stores), else on
synthetic rows: MNLI's take MRPC's real lengths (another sentence-pair task; MNLI's pairs are likely shorter, so its
stores probably come out larger than they are), any other task's a quarter padding.

* ``forward_seq_per_s``: the plain forward (every head kept, hidden states, no gradient), batches of
  `--forward-batch`: the floor's unit;
* ``fill_seq_per_s[store]``: a frozen head configuration's single backbone pass as the runner makes it (half the
  heads replaced, their Q/K dropped, what the probe reads put in a `papa.probing.feature_store` on the device, in
  host memory or on disk);
* ``stored_step_s[store]`` and ``stored_eval_seq_per_s[store]``: one seed's probe step, and its evaluation, reading
  that store (no backbone; a disk store is read back from the page cache, so its time is a lower bound once the
  file outgrows memory);
* ``rerun_step_s``: ``PAPA_FEATURE_STORE=backbone``, the backbone path (no feature store): the
  backbone run again for every batch (half the heads replaced, Q/K dropped) plus the probe's step;
* ``lambda_step_s``: a λ step (every head mixed, θ and the probe trainable, backward through the backbone);
* ``trainable_step_s``: a trained-constants step as the runner runs it (every head replaced by trainable constants,
  their Q/K dropped where the model allows: `query_key_dropped_while(ctrl, where_possible=True)`);
* ``plain_step_s``: the plain model's step (every head kept, gradient through every layer's activations into the
  probe's loss, the probe trainable): the floor's unit for λ and trained constants;
* ``capture_seq_per_s``: constant extraction (capture inside attention), batches of `--forward-batch`;
* ``budget_bytes``: the stores' budgets on this machine when the task was timed (`papa.probing.feature_store`).

All of a task's variants are timed in one round-robin call (`bench.interleaved`: medians of `--repeats` rounds after
an untimed one; a model's first call is run once untimed and discarded), so their ratios share a call.

Part A, the grid runner itself (`papa.runs.experiment`) on SST-2, as a check of part B, not a calibration: the
constants of roberta-base (and roberta-large) over all 67,349 training sentences; one epoch of the λ ranking on
`--train-examples` sentences; and (roberta-base) one λ-ranked point (fraction 1/2) and one trained-constants point
(``trainable_average``, every head replaced, Q/K dropped) for one epoch and one seed on those sentences, evaluated
once on the 872 validation sentences, where the runner stores features (``PAPA_FEATURE_STORE`` = `--store` if given).
Each is recorded as measured (wall clock around the runner's call), with the examples it saw; `grid_estimate.py`
prints what part B predicts for the same work beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

import papa
from benchmarks.grid_estimate import COST_FORMAT
from benchmarks.inputs import random_model_dir
from benchmarks.timing import cpu_name, interleaved  # the suite's timing call (round-robin medians, warm-up discarded)
from papa.method.architectures import backbone
from papa.method.attention_free import drop_query_key, restore_query_key
from papa.core.vocabulary import DEFAULT_PRECISION, PRECISIONS
from papa.method.constants import data_free_constants
from papa.method.precision import backbone_autocast
from papa.method.selection import heads_to_replace, replacement_order
from papa.probing.feature_store import (STORE_ENV, STORED, cache_budget_bytes, device_budget_bytes,
                                        disk_budget_bytes, read_positions)
from papa.probing.features import EncodedTask, FeatureSource, encode_task, hidden_features
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.runs.experiment import run_grid
from papa.runs.lambda_ranking import learn_ranking
from papa.runs.session import GridConfig, task_constants
from papa.tasks.data import load_examples
from papa.tasks.registry import get_task

#: Version of the JSON this script writes: the one `grid_estimate.check_format` reads, which refuses every other.
FORMAT = COST_FORMAT
#: A profile that is `full` in everything but epochs and seeds: one epoch of one seed of every run.
ONE_EPOCH = {"name": "full-one-epoch", "base": "full", "epochs": 1, "rank_epochs": 1, "seeds": [0]}
GRID_TASKS = ("cola", "sst2", "mrpc", "mnli", "ner", "pos", "mlm")
LAYOUT = "official"  # the full profile's layout for the paper's encoders (`papa jobs list --profile full`)
SST2_TRAIN, SST2_EVAL = 67349, 872  # GLUE SST-2's training and validation sets
#: A task without local data takes its rows' real lengths from this one (same kind of input).
LENGTH_PROXY = {"mnli": "mrpc"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: torch.device) -> tuple[float, object]:
    _sync(device)
    start = time.perf_counter()
    value = fn()
    _sync(device)
    return time.perf_counter() - start, value


# ---- part A ------------------------------------------------------------------------------------------------------

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
    """Constants, one epoch of the λ ranking and (with `points`) the two probe points of part A, each timed as run
    (wall clock around the runner's call, its set-up included: encoding the data, loading cached constants and the
    ranking), with the examples it saw and where the runner kept the features."""
    device, data_dir, profile = setup.device, setup.data_dir, setup.profile
    common = dict(task="sst2", model=str(model_dir), profile=profile, data_dir=data_dir, out_dir=str(out),
                  device=str(device), precision=setup.precision)
    result = {"model": label, "train_examples": setup.train_examples, "eval_examples": setup.eval_examples,
              "epochs": 1, "seeds": 1, "precision": setup.precision}
    grid = GridConfig("sst2", model=str(model_dir), profile=profile, out_dir=str(out), data_dir=data_dir,
                      device=str(device))
    t, (constants, _, _) = timed(lambda: task_constants(grid, progress=False), device)
    result["constants_s"], result["constants_examples"] = t, constants.metadata.num_examples
    print(json.dumps(result), flush=True)
    result["ranking_s"], _ = timed(lambda: learn_ranking(GridConfig(**common), progress=False), device)
    print(json.dumps(result), flush=True)
    if not points:
        return result
    saved = os.environ.get(STORE_ENV)
    if setup.store:
        os.environ[STORE_ENV] = setup.store
    try:
        for key, extra in (("lambda_point", dict(fractions=("1/2",))),
                           ("trainable_point", dict(constants=("trainable_average",), fractions=("0",)))):
            t, rows = timed(lambda: run_grid(GridConfig(**common, **extra, seeds=(0,)), progress=False), device)
            result[f"{key}_s"] = t
            result[f"{key}_runtime_s"] = float(rows["runtime_s"].sum())  # the runner's own per-run clock
            if "extra" in rows:
                result[f"{key}_store"] = json.loads(rows["extra"].iloc[0]).get("feature_store")
            print(json.dumps(result), flush=True)
    finally:
        if saved is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = saved
    return result


# ---- part B ------------------------------------------------------------------------------------------------------

def synthetic_task(spec, tokenizer, count: int, n: int, vocab: int, lengths: torch.Tensor | None = None,
                   seed: int = 0) -> EncodedTask:
    """`count` rows of `spec`'s shape with random ids: row i has `lengths[i % len(lengths)]` real tokens (default
    three quarters of n), padding after them; token tasks label every real slot but the first and last."""
    g = torch.Generator().manual_seed(seed)
    low = min(1000, vocab // 2)  # clear of the special tokens
    if lengths is None:
        lengths = torch.tensor([n * 3 // 4])
    real = lengths.clamp(2, n)[torch.arange(count) % len(lengths)]
    mask = (torch.arange(n)[None, :] < real[:, None]).long()
    ids = torch.randint(low, vocab, (count, n), generator=g)
    ids[mask == 0] = tokenizer.pad_token_id
    inputs = {"input_ids": ids, "attention_mask": mask}
    if spec.kind in ("token", "mlm"):
        high = vocab if spec.kind == "mlm" else spec.num_labels
        labels = torch.randint(high, (count, n), generator=g)
        labels[mask == 0] = -100
        labels[:, 0] = -100
        labels[torch.arange(count), real - 1] = -100
    else:
        labels = torch.randint(spec.num_labels, (count,), generator=g)
    return EncodedTask(kind=spec.kind, inputs=inputs, labels=labels)


def _real_rows(task: str, tokenizer, model_type: str, data_dir: str | None, sample: int) -> EncodedTask | None:
    """`sample` random training rows of `task` in the grid's layout, or None without local data."""
    if not data_dir:
        return None
    spec = get_task(task)
    try:
        examples = load_examples(spec, "train", data_dir, limit=sample, sample="random")
    except Exception:  # noqa: BLE001 -- no local copy of this task: synthetic rows instead
        return None
    return encode_task(tokenizer, spec, examples, max_length=spec.hparams.max_length, model_type=model_type,
                       layout=LAYOUT)


def task_rows(task: str, tokenizer, model_type: str, vocab: int, data_dir: str | None, sample: int
              ) -> tuple[EncodedTask, str]:
    """Rows to time `task` on, and where they come from: real ones where the data is local, else synthetic ones
    (with a proxy task's real lengths where `LENGTH_PROXY` names one)."""
    spec = get_task(task)
    rows = _real_rows(task, tokenizer, model_type, data_dir, sample)
    if rows is not None:
        return rows, f"real: {len(rows)} random training rows, layout {LAYOUT}"
    proxy = LENGTH_PROXY.get(task)
    proxy_rows = _real_rows(proxy, tokenizer, model_type, data_dir, sample) if proxy else None
    if proxy_rows is not None:
        lengths = proxy_rows.inputs["attention_mask"].sum(dim=1)
        return (synthetic_task(spec, tokenizer, sample, spec.hparams.max_length, vocab, lengths),
                f"synthetic: random ids, the real lengths of {len(lengths)} {proxy} rows (no local {task})")
    return synthetic_task(spec, tokenizer, sample, spec.hparams.max_length, vocab), "synthetic: a quarter padding"


def _take(data: EncodedTask, count: int) -> EncodedTask:
    """The first `count` rows of `data`, cycling when it has fewer."""
    idx = torch.arange(count) % len(data)
    inputs, labels = data.batch(idx)
    return EncodedTask(kind=data.kind, inputs=inputs, labels=labels)


class ThroughActivations:
    """A probe's feature source for the plain step: the backbone with every head kept, its input embeddings made a
    leaf that requires grad, so the backward pass runs through every layer's activations (as λ's and trained
    constants' do) while no weight takes a gradient. Called as `FeatureSource` is, by `train_probe`."""

    def __init__(self, model, data: EncodedTask):
        self.model, self.data = model, data
        self.device = next(model.parameters()).device

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


def _under_autocast(precision: str, device: torch.device, fn: Callable[[], object]) -> None:
    """`fn` with the backbone under `precision`'s autocast, as the runner runs it."""
    with backbone_autocast(precision, device):
        fn()


class TaskBench:
    """One task's part-B variants on the shared model (module docstring): its rows, its head modes, its probe and
    the feature stores it opened."""

    def __init__(self, model, tokenizer, ctrl, task: str, setup: PartB):
        self.model, self.ctrl, self.setup = model, ctrl, setup
        self.vocab, cfg = len(tokenizer), model.config
        self.stores = tuple(store for store in STORED if store != "device" or setup.device.type == "cuda")
        self.task, self.spec = task, get_task(task)
        self.n, self.bs = self.spec.hparams.max_length, self.spec.hparams.batch_size
        self.pool, self.origin = task_rows(task, tokenizer, cfg.model_type, self.vocab, setup.data_dir, setup.sample)
        self.read = read_positions(self.pool.kind, self.pool.inputs["attention_mask"], self.pool.labels
                                   ).sum(dim=1).float()
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
        """Put the heads in `mode`: Q/K restored first, then dropped where the runner drops them."""
        ctrl = self.ctrl
        restore_query_key(ctrl)
        ctrl.set_constants(self.fixed, trainable=mode == "trainable")
        ctrl.keep_all()
        if mode == "half":
            ctrl.replace(self.half)
        elif mode == "trainable":
            ctrl.replace()
        elif mode == "lambda":
            ctrl.mix()
        if mode in ("half", "trainable") and ctrl.info.adapter.can_drop_query_key(ctrl.info):
            drop_query_key(ctrl)

    def fresh_probe(self) -> None:
        """A new probe for the task, on the device (a step's or an evaluation's untimed set-up)."""
        self.probe = make_probe(self.spec, self.model, self.n, self.vocab).to(self.setup.device)

    def prepare(self, mode: str) -> None:
        """A training step's untimed set-up: the heads in `mode`, a fresh probe."""
        self.heads(mode)
        self.fresh_probe()

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

    def forward(self) -> None:
        """The plain forward: hidden states of the forward batches, no gradient."""
        with torch.no_grad():
            for b in self.batches:
                hidden_features(self.model, b)

    def capture(self) -> None:
        """Constant extraction: the forward batches with capture inside attention."""
        with self.ctrl.capturing(self.n), torch.no_grad():
            for b in self.batches:
                self.model(**b)

    def rerun_step(self) -> None:
        """The probe's steps with the backbone run again for every batch (``PAPA_FEATURE_STORE=backbone``)."""
        self.train(self.source(self.data, "backbone"))

    def lambda_step(self) -> None:
        """λ steps: θ and the probe trained, backward through the backbone."""
        self.train(self.source(self.data, "backbone", trainable=True), [self.ctrl.theta])

    def trainable_step(self) -> None:
        """Trained-constants steps: the constants and the probe trained."""
        self.train(self.source(self.data, "backbone", trainable=True), [self.ctrl.constants])

    def plain_step(self) -> None:
        """The plain model's steps: gradient through every layer's activations, no weight trained."""
        self.train(ThroughActivations(self.model, self.data))

    def stored_eval(self, source: FeatureSource) -> None:
        """The probe's evaluation over stored features."""
        evaluate_probe(self.probe, self.spec, source)

    def variants(self, stored: dict[str, FeatureSource]) -> dict[str, tuple[Callable[[], object], Callable[[], None]]]:
        """(untimed set-up, timed call) of every variant; the backbone's passes under the precision's autocast, a
        probe reading stored features in float32 (as the runner runs them)."""
        plain = partial(self.heads, "plain")
        variants = {"forward": (plain, self.forward), "capture": (plain, self.capture)}
        for store in self.stores:
            variants[f"fill_{store}"] = (partial(self.fill_setup, store), partial(self.fill, store))
            variants[f"stored_step_{store}"] = (self.fresh_probe, partial(self.train, stored[store]))
            variants[f"stored_eval_{store}"] = (self.fresh_probe, partial(self.stored_eval, stored[store]))
        for name, mode in (("rerun_step", "half"), ("lambda_step", "lambda"), ("trainable_step", "trainable"),
                           ("plain_step", "plain")):
            variants[name] = (partial(self.prepare, mode), getattr(self, name))
        return {name: (setup, go if name.startswith(("stored_step", "stored_eval")) else
                       partial(_under_autocast, self.setup.precision, self.setup.device, go))
                for name, (setup, go) in variants.items()}

    def time(self, warmup: int) -> dict[str, float]:
        """Median seconds of every variant in one timing call; every store closed after it."""
        # What each seed's probe reads: stored once, as a frozen head configuration's are (half replaced).
        self.heads("half")
        stored = {store: self.source(self.data, store) for store in self.stores}
        t = interleaved(self.variants(stored), self.setup.repeats, self.setup.device, warmup=warmup)
        self.heads("plain")
        for s in [*stored.values(), *self.opened.values()]:
            s.close()
        self.probe = None
        return t

    def row(self, label: str, t: dict[str, float]) -> dict:
        """The task's row of the JSON (module docstring) from the medians `t`."""
        cfg, steps, stores = self.model.config, self.setup.steps, self.stores
        forward_n, data_n = len(self.forward_data), len(self.data)
        row = {"model": label, "task": self.task, "n": self.n, "batch_size": self.bs, "steps": steps,
               "repeats": self.setup.repeats, "precision": self.setup.precision,
               "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "rows": self.origin,
               "read_per_example": float(self.read.mean()), "real_tokens_per_example":
                   float(self.pool.inputs["attention_mask"].sum(dim=1).float().mean()),
               "forward_batch": self.setup.forward_batch, "forward_examples": forward_n, "budget_bytes": self.budgets,
               "forward_seq_per_s": forward_n / t["forward"],
               "capture_seq_per_s": forward_n / t["capture"],
               "fill_seq_per_s": {s: forward_n / t[f"fill_{s}"] for s in stores},
               "stored_step_s": {s: t[f"stored_step_{s}"] / steps for s in stores},
               "stored_eval_seq_per_s": {s: data_n / t[f"stored_eval_{s}"] for s in stores}}
        for key in ("rerun_step", "lambda_step", "trainable_step", "plain_step"):
            row[f"{key}_s"] = t[key] / steps
        return row


def step_times(model_dir: Path, label: str, setup: PartB) -> list[dict]:
    """Part B: every task's rates and step times (module docstring), each task's variants in one timing call. With
    `setup.precision` bf16 the backbone's passes run under its autocast as the runner's do (`papa.method.precision`):
    the forward, capture, fill and training steps; a probe reading stored features runs in float32, as there."""
    model, tokenizer = papa.load_model(str(model_dir), device=setup.device)
    ctrl = papa.attach(model)
    rows = []
    for i, task in enumerate(setup.tasks):
        timer = TaskBench(model, tokenizer, ctrl, task, setup)
        t = timer.time(warmup=setup.repeats + 1 if i == 0 else 1)
        rows.append(timer.row(label, t))
        print(json.dumps(rows[-1]), flush=True)
    papa.detach(model)
    return rows


def _parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub", required=True, help="folder holding roberta-base/ and roberta-large/ configs")
    parser.add_argument("--data-dir", default=os.environ.get("PAPA_DATA_DIR"),
                        help="local data: SST-2 for part A, every task's real rows for part B")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=6, help="training steps per task and kind (part B)")
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds per task (part B)")
    parser.add_argument("--sample", type=int, default=1024,
                        help="training rows per task read for their lengths (part B)")
    parser.add_argument("--forward-batch", type=int, default=64,
                        help="batch of the forward, fill and capture passes (default 64, the runner's)")
    parser.add_argument("--forward-batches", type=int, default=2, help="batches per forward pass timed (part B)")
    parser.add_argument("--parts", default="AB", help="A, B or AB")
    parser.add_argument("--tasks", nargs="+", default=list(GRID_TASKS), help="part B's tasks")
    parser.add_argument("--sizes", nargs="+", default=["base", "large"], choices=("base", "large"))
    parser.add_argument("--limit", type=int, default=None,
                        help="smoke run only: cap every example count of part A")
    parser.add_argument("--train-examples", type=int, default=None,
                        help="part A's ranking and points see this many SST-2 training examples (default: all "
                             "67,349); the constants always see the whole set")
    parser.add_argument("--store", default=None,
                        help="PAPA_FEATURE_STORE for part A's points (default: the runner's choice)")
    parser.add_argument("--precision", default=DEFAULT_PRECISION, choices=[p for p in PRECISIONS if p != "tf32"],
                        help="how the backbone runs, as `papa probe --precision` (default float32; tf32 is not "
                             "timed here)")
    parser.add_argument("--tiny", action="store_true",
                        help="smoke run only: models shrunk to 2 layers of width 64 (bench.TINY), the same code paths")
    parser.add_argument("--json", default=None, help="write the measurements to this JSON file")
    return parser


def _one_epoch_profile(train_examples: int | None, limit: int | None) -> tuple[dict, int, int]:
    """Part A's profile (`ONE_EPOCH`, its training sets cut to `train_examples`, every set to `limit` in a smoke run),
    and the SST-2 training and evaluation examples it sees."""
    spec = dict(ONE_EPOCH)
    seen, evals = SST2_TRAIN, SST2_EVAL
    if train_examples:
        spec.update(name=f"full-one-epoch-{train_examples}", train_limit=train_examples)
        seen = min(train_examples, SST2_TRAIN)
    if limit:
        spec.update(name="full-one-epoch-smoke", train_limit=limit, eval_limit=limit, corpus_limit=limit)
        seen, evals = min(seen, limit), min(evals, limit)
    return spec, seen, evals


def _write(path: str | None, report: dict) -> None:
    """The measurements so far to `path` (``--json``), if given."""
    if path:
        Path(path).write_text(json.dumps(report, indent=1))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    report = {"format": FORMAT,
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
              "torch": torch.__version__, "threads": torch.get_num_threads(),
              "command": "python -m benchmarks.full_cost " + " ".join(sys.argv[1:] if argv is None else argv),
              "profile": ONE_EPOCH, "precision": args.precision, "tiny": args.tiny, "points": [], "steps": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        profile = tmp / "one_epoch.json"
        spec, seen, evals = _one_epoch_profile(args.train_examples, args.limit)
        report["profile"] = spec
        profile.write_text(json.dumps(spec))
        dirs = {size: random_model_dir(Path(args.hub) / f"roberta-{size}", tmp / f"roberta-{size}-random",
                                       tiny=args.tiny)
                for size in args.sizes}
        if "B" in args.parts:
            part_b = PartB(device, args.tasks, args.steps, args.repeats, args.forward_batch, args.forward_batches,
                           args.data_dir, args.sample, tmp / "features", args.precision)
            for size in args.sizes:
                report["steps"] += step_times(dirs[size], f"roberta-{size}", part_b)
                _write(args.json, report)
        if "A" in args.parts:
            part_a = PartA(device, args.data_dir, str(profile), seen, evals, args.store, args.precision)
            for size in args.sizes:
                point = real_points(dirs[size], f"roberta-{size}", tmp / f"out-{size}", part_a, points=size == "base")
                report["points"].append(point)
                print(json.dumps(point), flush=True)
                _write(args.json, report)
    _write(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
