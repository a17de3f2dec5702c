"""What the `full` profile costs on one accelerator: real points on the whole SST-2 training set, and step times.

    python benchmarks/full_cost.py --hub DIR --device cuda --json cost.json

DIR holds the paper's model folders (config.json and tokenizer files, e.g. ``roberta-base/``, ``roberta-large/``);
the models are built from their configs with seeded random weights (time does not depend on the weights' values).

Part A, the grid runner itself (`papa.runs.experiment`) on the whole SST-2 training set (67,349 sentences, n = 64):

* BASE (roberta-base): average constants over the whole training set; the λ ranking; one λ-ranked point
  (fraction 1/2, the features re-computed every batch, as they are whenever they exceed the cache budget); one
  trained-constants point (``trainable_average``, every head replaced). Each is run for one epoch and one seed of a
  profile that is ``full`` otherwise (`ONE_EPOCH`); Table 3's epochs and the three seeds repeat the same epoch, so
  the full point's time is that epoch's time × epochs × seeds (printed beside it).
* LARGE (roberta-large): the constants and one epoch of the λ ranking.

Part B, per task of the full grid (Table 3's batch size and length; synthetic token ids, since only the shapes
matter for time): seconds per training step of the three kinds of run, for `grid_estimate.py`:
``probe`` (frozen backbone forward with half the heads replaced + probe step), ``lambda`` (every head mixed,
backward through the backbone), ``trainable`` (every head replaced by trainable constants, backward through the
backbone), and the capture rate of constant extraction (sequences/s).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import torch

import papa
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import data_free_constants
from papa.method.selection import heads_to_replace, replacement_order
from papa.probing.features import EncodedTask, FeatureSource
from papa.probing.training import TrainSettings, make_probe, train_probe
from papa.runs.experiment import GridConfig, learn_ranking, run_grid, task_constants
from papa.tasks.registry import get_task

#: A profile that is `full` in everything but epochs and seeds: one epoch of one seed of every run.
ONE_EPOCH = {"name": "full-one-epoch", "base": "full", "epochs": 1, "rank_epochs": 1, "seeds": [0]}
GRID_TASKS = ("cola", "sst2", "mrpc", "mnli", "ner", "pos", "mlm")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def random_model_dir(config_dir: Path, out: Path, seed: int = 0) -> Path:
    """Save a model built from `config_dir`'s config with seeded random weights, beside its tokenizer files."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(config_dir)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(config_dir).save_pretrained(out)
    return out


def timed(fn, device: torch.device) -> tuple[float, object]:
    _sync(device)
    start = time.perf_counter()
    value = fn()
    _sync(device)
    return time.perf_counter() - start, value


# ---- part A ------------------------------------------------------------------------------------------------------

def real_points(model_dir: Path, label: str, device: torch.device, data_dir: str, out: Path, profile: str,
                points: bool, scale: float) -> dict:
    """Constants, ranking and (with `points`) the two probe points of part A, timed. The constants always see the
    whole training set; ranking and points see the profile's `train_limit` and are scaled by `scale` (whole set /
    examples seen) to one epoch of the whole set, then by epochs and seeds."""
    common = dict(task="sst2", model=str(model_dir), profile=profile, data_dir=data_dir, out_dir=str(out),
                  device=str(device))
    spec = get_task("sst2")
    settings = TrainSettings.from_task(spec)
    seeds = 3
    result = {"model": label}
    t, (constants, _, _) = timed(lambda: task_constants("sst2", model=str(model_dir), profile=profile,
                                                        out_dir=str(out), data_dir=data_dir, device=str(device),
                                                        progress=False), device)
    result["constants_s"] = t
    result["constants_examples"] = constants.metadata.num_examples
    result["scale"] = scale
    print(json.dumps(result), flush=True)
    t, _ = timed(lambda: learn_ranking(GridConfig(**common), progress=False), device)
    result["ranking_measured_s"] = t
    result["ranking_epoch_s"] = t * scale
    result["ranking_full_s"] = t * scale * settings.epochs
    print(json.dumps(result), flush=True)
    if points:
        os.environ["PAPA_FEATURE_CACHE_GB"] = "0"  # the full training set's features never fit: re-run the backbone
        rows = run_grid(GridConfig(**common, fractions=("1/2",), seeds=(0,)), progress=False)
        result["lambda_point_measured_s"] = float(rows["runtime_s"].iloc[0])
        result["lambda_point_epoch_s"] = result["lambda_point_measured_s"] * scale
        result["lambda_point_full_s"] = result["lambda_point_epoch_s"] * settings.epochs * seeds
        rows = run_grid(GridConfig(**common, constants=("trainable_average",), fractions=("0",), seeds=(0,)),
                        progress=False)
        print(json.dumps(result), flush=True)
        result["trainable_point_measured_s"] = float(rows["runtime_s"].iloc[0])
        result["trainable_point_epoch_s"] = result["trainable_point_measured_s"] * scale
        result["trainable_point_full_s"] = result["trainable_point_epoch_s"] * settings.epochs * seeds
        os.environ.pop("PAPA_FEATURE_CACHE_GB", None)
    result["epochs"], result["seeds"] = settings.epochs, seeds
    return result


# ---- part B ------------------------------------------------------------------------------------------------------

def synthetic_task(spec, tokenizer, count: int, n: int, vocab: int, seed: int = 0) -> EncodedTask:
    """`count` examples of `spec`'s shape: random ids at every slot but the last few (padding), as layouts pad."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, vocab, (count, n), generator=g)
    mask = torch.ones(count, n, dtype=torch.long)
    mask[:, n * 3 // 4: n - 1] = 0  # a quarter padding before the final separator
    ids[mask == 0] = tokenizer.pad_token_id
    inputs = {"input_ids": ids, "attention_mask": mask}
    if spec.kind in ("token", "mlm"):
        high = vocab if spec.kind == "mlm" else spec.num_labels
        labels = torch.randint(high, (count, n), generator=g)
        labels[mask == 0] = -100
    else:
        labels = torch.randint(spec.num_labels, (count,), generator=g)
    return EncodedTask(kind=spec.kind, inputs=inputs, labels=labels)


def step_times(model_dir: Path, label: str, device: torch.device, tasks, steps: int) -> list[dict]:
    """Seconds per training step of each run kind, and the capture rate, for every task's Table 3 shape."""
    model, tokenizer = papa.load_model(str(model_dir), device=device)
    ctrl = papa.attach(model)
    vocab = len(tokenizer)
    rows = []
    for task in tasks:
        spec = get_task(task)
        n, bs = spec.hparams.max_length, spec.hparams.batch_size
        data = synthetic_task(spec, tokenizer, bs * steps, n, vocab)
        warm = synthetic_task(spec, tokenizer, bs * 2, n, vocab, seed=1)
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n))
        order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
        settings = TrainSettings(spec.hparams.learning_rate, bs, 1)
        row = {"model": label, "task": task, "n": n, "batch_size": bs, "steps": steps}

        def run(kind: str, d: EncodedTask) -> None:
            ctrl.keep_all()
            extra = []
            if kind == "trainable":
                ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n), trainable=True)
                ctrl.replace()
                extra = [ctrl.constants]
            elif kind == "lambda":
                ctrl.mix()
                extra = [ctrl.theta]
            else:
                ctrl.replace(heads_to_replace(order, "1/2", ctrl.num_layers, ctrl.num_heads, "down"))
            probe = make_probe(spec, model, n, vocab).to(device)
            with query_key_dropped_while(ctrl) if kind == "probe" else nullcontext():
                source = FeatureSource(model, d, trainable_backbone=kind != "probe", progress=False)
                train_probe(probe, spec.kind, source, settings, seed=0, extra_parameters=extra, progress=False)
            if kind == "trainable":
                ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n))

        for kind in ("probe", "lambda", "trainable"):
            run(kind, warm)
            t, _ = timed(lambda: run(kind, data), device)
            row[f"{kind}_step_s"] = t / steps
        ctrl.keep_all()
        batch = {k: v[:64].to(device) for k, v in synthetic_task(spec, tokenizer, 64, n, vocab).inputs.items()}

        def capture() -> None:
            with ctrl.capturing(n), torch.no_grad():
                for _ in range(4):
                    model(**batch)
        capture()
        t, _ = timed(capture, device)
        row["capture_seq_per_s"] = 4 * 64 / t
        rows.append(row)
        print(json.dumps(row), flush=True)
    papa.detach(model)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hub", required=True, help="folder holding roberta-base/ and roberta-large/ configs")
    parser.add_argument("--data-dir", default=os.environ.get("PAPA_DATA_DIR"), help="local data (SST-2)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=12, help="timed training steps per task and kind (part B)")
    parser.add_argument("--parts", default="AB", help="A, B or AB")
    parser.add_argument("--tasks", nargs="+", default=list(GRID_TASKS), help="part B's tasks")
    parser.add_argument("--sizes", nargs="+", default=["base", "large"], choices=("base", "large"))
    parser.add_argument("--limit", type=int, default=None,
                        help="smoke run only: cap every example count of part A")
    parser.add_argument("--train-examples", type=int, default=None,
                        help="part A's ranking and points see this many SST-2 training examples (default: all "
                             "67,349) and are scaled to the whole set; the constants always see the whole set")
    parser.add_argument("--json", default=None, help="write the measurements to this JSON file")
    args = parser.parse_args(argv)
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
              "torch": torch.__version__, "command": "python benchmarks/full_cost.py " + " ".join(argv or sys.argv[1:]),
              "profile": ONE_EPOCH, "points": [], "steps": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        profile = tmp / "one_epoch.json"
        spec = dict(ONE_EPOCH)
        whole = 67349  # SST-2's training set (GLUE)
        scale = 1.0
        if args.train_examples:
            spec.update(name=f"full-one-epoch-{args.train_examples}", train_limit=args.train_examples)
            scale = whole / args.train_examples
        if args.limit:
            spec.update(name="full-one-epoch-smoke", train_limit=args.limit, eval_limit=args.limit,
                        corpus_limit=args.limit)
        report["profile"] = spec
        profile.write_text(json.dumps(spec))
        dirs = {size: random_model_dir(Path(args.hub) / f"roberta-{size}", tmp / f"roberta-{size}-random")
                for size in args.sizes}
        if "B" in args.parts:
            for size in args.sizes:
                report["steps"] += step_times(dirs[size], f"roberta-{size}", device, args.tasks, args.steps)
            if args.json:
                Path(args.json).write_text(json.dumps(report, indent=1))
        if "A" in args.parts:
            for size in args.sizes:
                point = real_points(dirs[size], f"roberta-{size}", device, args.data_dir, tmp / f"out-{size}",
                                    str(profile), points=size == "base", scale=scale)
                report["points"].append(point)
                print(json.dumps(point), flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
