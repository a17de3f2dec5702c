"""What the `full` profile costs on one accelerator: per-task step times and rates, and real points on SST-2.

    python benchmarks/full_cost.py --hub DIR --device cuda --json cost.json

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
* ``rerun_step_s``: ``PAPA_FEATURE_STORE=backbone``, the path before issue 39 for features over the cache budget: the
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
from pathlib import Path

import torch

import papa
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
from papa.runs.experiment import GridConfig, learn_ranking, run_grid, task_constants
from papa.tasks.data import load_examples
from papa.tasks.registry import get_task

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the suite's timing call (round-robin medians, warm-up discarded) and machine name
from bench import _cpu_name, interleaved, random_model_dir  # noqa: E402

#: Version of the JSON this script writes; `grid_estimate.py` refuses files without this format's fields.
FORMAT = 2
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

def real_points(model_dir: Path, label: str, device: torch.device, data_dir: str, out: Path, profile: str,
                points: bool, train_examples: int, eval_examples: int, store: str | None,
                precision: str = DEFAULT_PRECISION) -> dict:
    """Constants, one epoch of the λ ranking and (with `points`) the two probe points of part A, each timed as run
    (wall clock around the runner's call, its set-up included: encoding the data, loading cached constants and the
    ranking), with the examples it saw and where the runner kept the features."""
    common = dict(task="sst2", model=str(model_dir), profile=profile, data_dir=data_dir, out_dir=str(out),
                  device=str(device), precision=precision)
    result = {"model": label, "train_examples": train_examples, "eval_examples": eval_examples, "epochs": 1,
              "seeds": 1, "precision": precision}
    t, (constants, _, _) = timed(lambda: task_constants("sst2", model=str(model_dir), profile=profile,
                                                        out_dir=str(out), data_dir=data_dir, device=str(device),
                                                        progress=False), device)
    result["constants_s"], result["constants_examples"] = t, constants.metadata.num_examples
    print(json.dumps(result), flush=True)
    result["ranking_s"], _ = timed(lambda: learn_ranking(GridConfig(**common), progress=False), device)
    print(json.dumps(result), flush=True)
    if not points:
        return result
    saved = os.environ.get(STORE_ENV)
    if store:
        os.environ[STORE_ENV] = store
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


def step_times(model_dir: Path, label: str, device: torch.device, tasks, steps: int, repeats: int,
               forward_batch: int, forward_batches: int, data_dir: str | None, sample: int, folder: Path,
               precision: str = DEFAULT_PRECISION) -> list[dict]:
    """Part B: every task's rates and step times (module docstring), each task's variants in one timing call. With
    `precision` bf16 the backbone's passes run under its autocast as the runner's do (`papa.method.precision`): the
    forward, capture, fill and training steps; a probe reading stored features runs in float32, as there."""
    model, tokenizer = papa.load_model(str(model_dir), device=device)
    ctrl = papa.attach(model)
    vocab, cfg = len(tokenizer), model.config
    stores = tuple(store for store in STORED if store != "device" or device.type == "cuda")

    def autocast(fn):
        def run() -> None:
            with backbone_autocast(precision, device):
                fn()
        return run
    rows = []
    for i, task in enumerate(tasks):
        spec = get_task(task)
        n, bs = spec.hparams.max_length, spec.hparams.batch_size
        pool, origin = task_rows(task, tokenizer, cfg.model_type, vocab, data_dir, sample)
        read = read_positions(pool.kind, pool.inputs["attention_mask"], pool.labels).sum(dim=1).float()
        data = _take(pool, bs * steps)
        forward_data = _take(pool, forward_batch * forward_batches)
        batches = [{k: v[j:j + forward_batch].to(device) for k, v in forward_data.inputs.items()}
                   for j in range(0, len(forward_data), forward_batch)]
        fixed = data_free_constants("toeplitz", ctrl.signature, n, LAYOUT)
        order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
        half = heads_to_replace(order, "1/2", ctrl.num_layers, ctrl.num_heads, "down")
        settings = TrainSettings(spec.hparams.learning_rate, bs, 1)
        budgets = {"device": device_budget_bytes(device), "host": cache_budget_bytes(),
                   "disk": disk_budget_bytes(folder)}

        def heads(mode: str) -> None:
            """Put the heads in `mode`: Q/K restored first, then dropped where the runner drops them."""
            restore_query_key(ctrl)
            ctrl.set_constants(fixed, trainable=mode == "trainable")
            ctrl.keep_all()
            if mode == "half":
                ctrl.replace(half)
            elif mode == "trainable":
                ctrl.replace()
            elif mode == "lambda":
                ctrl.mix()
            if mode in ("half", "trainable") and ctrl.info.adapter.can_drop_query_key(ctrl.info):
                drop_query_key(ctrl)

        probe: list[torch.nn.Module] = []
        opened: dict[str, FeatureSource] = {}

        def fresh_probe() -> None:
            probe[:] = [make_probe(spec, model, n, vocab).to(device)]

        def train(source, extra=()) -> None:
            train_probe(probe[0], spec.kind, source, settings, seed=0, extra_parameters=list(extra), progress=False)

        def source(d: EncodedTask, store: str, trainable: bool = False) -> FeatureSource:
            return FeatureSource(model, d, trainable_backbone=trainable, progress=False, folder=folder, store=store)

        def fill(store: str):
            def setup() -> None:
                heads("half")
                if store in opened:
                    opened.pop(store).close()

            def go() -> None:
                opened[store] = source(forward_data, store)
            return setup, go

        def forward() -> None:
            with torch.no_grad():
                for b in batches:
                    hidden_features(model, b)

        def capture() -> None:
            with ctrl.capturing(n), torch.no_grad():
                for b in batches:
                    model(**b)

        # What each seed's probe reads: stored once, as a frozen head configuration's are (half replaced).
        heads("half")
        stored = {store: source(data, store) for store in stores}
        variants = {"forward": (lambda: heads("plain"), forward), "capture": (lambda: heads("plain"), capture)}
        for store in stores:
            variants[f"fill_{store}"] = fill(store)
            variants[f"stored_step_{store}"] = (fresh_probe, lambda s=stored[store]: train(s))
            variants[f"stored_eval_{store}"] = (fresh_probe, lambda s=stored[store]: evaluate_probe(probe[0], spec, s))
        variants.update({
            "rerun_step": (lambda: (heads("half"), fresh_probe()), lambda: train(source(data, "backbone"))),
            "lambda_step": (lambda: (heads("lambda"), fresh_probe()),
                            lambda: train(source(data, "backbone", trainable=True), [ctrl.theta])),
            "trainable_step": (lambda: (heads("trainable"), fresh_probe()),
                               lambda: train(source(data, "backbone", trainable=True), [ctrl.constants])),
            "plain_step": (lambda: (heads("plain"), fresh_probe()), lambda: train(ThroughActivations(model, data))),
        })
        variants = {name: (setup, go if name.startswith(("stored_step", "stored_eval")) else autocast(go))
                    for name, (setup, go) in variants.items()}
        t = interleaved(variants, repeats, device, warmup=repeats + 1 if i == 0 else 1)
        heads("plain")
        for s in [*stored.values(), *opened.values()]:
            s.close()
        probe.clear()
        row = {"model": label, "task": task, "n": n, "batch_size": bs, "steps": steps, "repeats": repeats,
               "precision": precision,
               "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "rows": origin,
               "read_per_example": float(read.mean()), "real_tokens_per_example":
                   float(pool.inputs["attention_mask"].sum(dim=1).float().mean()),
               "forward_batch": forward_batch, "forward_examples": len(forward_data), "budget_bytes": budgets,
               "forward_seq_per_s": len(forward_data) / t["forward"],
               "capture_seq_per_s": len(forward_data) / t["capture"],
               "fill_seq_per_s": {s: len(forward_data) / t[f"fill_{s}"] for s in stores},
               "stored_step_s": {s: t[f"stored_step_{s}"] / steps for s in stores},
               "stored_eval_seq_per_s": {s: len(data) / t[f"stored_eval_{s}"] for s in stores}}
        for key in ("rerun_step", "lambda_step", "trainable_step", "plain_step"):
            row[f"{key}_s"] = t[key] / steps
        rows.append(row)
        print(json.dumps(row), flush=True)
    papa.detach(model)
    return rows


def main(argv: list[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    report = {"format": FORMAT,
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name(),
              "torch": torch.__version__, "threads": torch.get_num_threads(),
              "command": "python benchmarks/full_cost.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "profile": ONE_EPOCH, "precision": args.precision, "tiny": args.tiny, "points": [], "steps": []}

    def write() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        profile = tmp / "one_epoch.json"
        spec = dict(ONE_EPOCH)
        seen, evals = SST2_TRAIN, SST2_EVAL
        if args.train_examples:
            spec.update(name=f"full-one-epoch-{args.train_examples}", train_limit=args.train_examples)
            seen = min(args.train_examples, SST2_TRAIN)
        if args.limit:
            spec.update(name="full-one-epoch-smoke", train_limit=args.limit, eval_limit=args.limit,
                        corpus_limit=args.limit)
            seen, evals = min(seen, args.limit), min(evals, args.limit)
        report["profile"] = spec
        profile.write_text(json.dumps(spec))
        dirs = {size: random_model_dir(Path(args.hub) / f"roberta-{size}", tmp / f"roberta-{size}-random",
                                       tiny=args.tiny)
                for size in args.sizes}
        if "B" in args.parts:
            for size in args.sizes:
                report["steps"] += step_times(dirs[size], f"roberta-{size}", device, args.tasks, args.steps,
                                              args.repeats, args.forward_batch, args.forward_batches, args.data_dir,
                                              args.sample, tmp / "features", args.precision)
                write()
        if "A" in args.parts:
            for size in args.sizes:
                point = real_points(dirs[size], f"roberta-{size}", device, args.data_dir, tmp / f"out-{size}",
                                    str(profile), points=size == "base", train_examples=seen, eval_examples=evals,
                                    store=args.store, precision=args.precision)
                report["points"].append(point)
                print(json.dumps(point), flush=True)
                write()
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
