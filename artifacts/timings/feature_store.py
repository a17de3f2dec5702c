"""A frozen probe point at the cost of its forward passes: the grid runner's point against its floor, and the path
before features were stored (the study behind feature_store_cpu.json, beside this script; docs/performance.md).

    python artifacts/timings/feature_store.py --train 8192 --seeds 5 --json artifacts/timings/feature_store_cpu.json

One grid point (fraction 1, SST-2 at Table 3's length and epochs, `--seeds` seeds) on the offline model, with
``PAPA_FEATURE_CACHE_GB`` below the padded features' size (half of it by default), timed three ways in one process:
``floor`` (one backbone forward over the point's examples, nothing kept, + the probes' own steps and evaluation on a
batch in memory, times the steps and batches the point takes); ``stored`` (the runner's point); ``backbone``
(``PAPA_FEATURE_STORE=backbone``: the backbone for every batch of every epoch and seed; one epoch of one seed timed
and multiplied, the evaluations added; `--backbone-whole` times the whole point, `--skip-backbone` skips it). It
prints the times, stored / floor (the target: <= 1.3), backbone / stored, and the largest score difference between
the two paths. Model loading is excluded (warmed up first).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from papa.core.artifacts import atomic_path
from papa.method.models import DEFAULT_MODEL
from papa.probing.feature_store import CACHE_BUDGET_ENV, STORE_ENV, read_positions
from papa.probing.features import EncodedTask, encode_task, hidden_features
from papa.probing.step_modes import eager_step, step_logits
from papa.probing.training import TrainSettings, make_probe
from papa.runs import session
from papa.runs.experiment import run_grid
from papa.runs.results import ResultsTable
from papa.runs.session import GridConfig
from papa.runs.profiles import PROFILES, get_profile
from papa.tasks.data import load_examples, resolve_data_dir
from papa.tasks.registry import TaskSpec, get_task

TASK = "sst2"


def _point(profile: str, out: Path, data_dir: str | None, store: str | None) -> tuple[float, list[float]]:
    """(wall seconds, each seed's score) of the runner's point with `store` forced (None: its own choice)."""
    if store is None:
        os.environ.pop(STORE_ENV, None)
    else:
        os.environ[STORE_ENV] = store
    start = time.perf_counter()
    rows = run_grid(GridConfig(task=TASK, profile=profile, fractions=("1",), folder=str(out), data_dir=data_dir),
                    progress=False)
    seconds = time.perf_counter() - start
    os.environ.pop(STORE_ENV, None)
    return seconds, rows.sort_values("seed")["value"].tolist()


@torch.no_grad()
def _forward_seconds(model, data, batch_size: int = 64) -> float:
    start = time.perf_counter()
    for begin in range(0, len(data), batch_size):
        hidden_features(model, data.batch(torch.arange(begin, min(begin + batch_size, len(data))))[0])
    return time.perf_counter() - start


def _probe_seconds(model, spec, data, settings: TrainSettings, seeds: int, eval_batches: int) -> tuple[float, int]:
    """Seconds of the probes' own work at the point (training steps and evaluation batches on one batch of
    features already in memory, each timed over repeated calls), and the number of training steps."""
    steps = seeds * settings.epochs * -(-len(data) // settings.batch_size)
    idx = torch.arange(settings.batch_size)
    with torch.no_grad():
        feats = hidden_features(model, data.batch(idx)[0])
    mask, labels = data.inputs["attention_mask"][idx], data.labels[idx]
    feats = torch.where(read_positions(spec.kind, mask, labels)[:, None, :, None], feats, torch.zeros(()))
    probe = make_probe(spec, model, mask.shape[1])
    optimizer = torch.optim.AdamW(probe.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    repeats = 200

    def step():
        eager_step(probe, optimizer, spec.kind, feats, mask, labels)  # the runner's own step

    step()  # the first call allocates the optimizer's state
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    per_step = (time.perf_counter() - start) / repeats
    _probe_seconds.last_training = per_step * steps
    big = torch.cat([feats] * 2)[:64], torch.cat([mask] * 2)[:64], torch.cat([labels] * 2)[:64]
    with torch.no_grad():
        start = time.perf_counter()
        for _ in range(repeats // 4):
            step_logits(probe, spec.kind, *big)
        per_eval = (time.perf_counter() - start) / (repeats // 4)
    return per_step * steps + per_eval * eval_batches * seeds, steps


def _one_backbone_epoch(model, spec, data, settings: TrainSettings) -> float:
    """Seconds of one epoch of one seed's probe training with the backbone run for every batch (the path before
    features were stored, when they exceeded the budget)."""
    from dataclasses import replace as with_epochs

    from papa.probing.features import FeatureSource
    from papa.probing.training import train_probe

    source = FeatureSource(model, data, trainable_backbone=False, progress=False, store="backbone")
    torch.manual_seed(0)
    probe = make_probe(spec, model, data.inputs["input_ids"].shape[1])
    start = time.perf_counter()
    train_probe(probe, spec.kind, source, with_epochs(settings, epochs=1), seed=0, progress=False)
    return time.perf_counter() - start


def _parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=8192, help="SST-2 training examples (default 8,192)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget-gib", type=float, default=None,
                        help=f"{CACHE_BUDGET_ENV} for the run (default: half the padded features' size)")
    parser.add_argument("--skip-backbone", action="store_true", help="do not time the backbone-every-batch path")
    parser.add_argument("--backbone-whole", action="store_true",
                        help="time the whole backbone-every-batch point, not one epoch of one seed x seeds x epochs")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", default=None, help="write the table and its metadata here")
    return parser


@dataclass(frozen=True)
class Point:
    """The point timed: the runner's profile for it (`seeds` seeds), its data encoded for the offline model (warm),
    the probe's settings, the padded training features' bytes and the cache budget set (GiB)."""

    profile: str
    seeds: int
    data_dir: str | None
    model: torch.nn.Module
    spec: TaskSpec
    train: EncodedTask
    evaluation: EncodedTask
    settings: TrainSettings
    padded: int
    budget: float


def _point_setup(args: argparse.Namespace) -> Point:
    """Register the point's profile, load the model and data, and set ``PAPA_FEATURE_CACHE_GB``."""
    spec = get_task(TASK)
    base = get_profile("full")
    profile = replace(base, name="bench-feature-store", train_limit=args.train, eval_limit=None, epochs=None,
                      seeds=tuple(range(args.seeds)), fractions=("1",), sample="first")
    PROFILES[profile.name] = profile
    data_dir = str(resolve_data_dir(args.data_dir)) if resolve_data_dir(args.data_dir) else None
    model, tokenizer = session._load_model(DEFAULT_MODEL, "cpu")  # warm: the runner reuses it
    n = spec.hparams.max_length
    root = resolve_data_dir(data_dir)
    train, evaluation = (encode_task(tokenizer, spec, load_examples(spec, split, root, limit=limit), max_length=n,
                                     model_type=model.config.model_type)
                         for split, limit in (("train", args.train), ("eval", None)))
    layers, d = model.config.num_hidden_layers + 1, model.config.hidden_size
    padded = len(train) * layers * n * d * 4
    budget = args.budget_gib if args.budget_gib is not None else padded / 2 / 2**30
    os.environ[CACHE_BUDGET_ENV] = str(budget)
    settings = TrainSettings.from_task(spec)
    print(f"MiniLM, SST-2: {len(train):,} train / {len(evaluation):,} eval examples, n = {n}, {args.seeds} seeds x "
          f"{settings.epochs} epochs; padded training features {padded / 2**30:.2f} GiB, "
          f"{CACHE_BUDGET_ENV}={budget:.2f}",
          flush=True)
    return Point(profile.name, args.seeds, data_dir, model, spec, train, evaluation, settings, padded, budget)


@dataclass(frozen=True)
class RunnerTimes:
    """The runner's point with stored features (seconds, scores, where the store went), and the backbone path
    (seconds, nan when not timed; scores when timed whole; how it was timed)."""

    stored: float
    stored_scores: list[float]
    placement: str
    old: float
    old_scores: list[float]
    how: str


def _runner_times(args: argparse.Namespace, point: Point, forward_eval: float, probes: float) -> RunnerTimes:
    """The `stored` and `backbone` ways (module docstring); `forward_eval` and `probes` complete one backbone epoch
    into the whole point."""
    with tempfile.TemporaryDirectory() as tmp:
        stored, stored_scores = _point(point.profile, Path(tmp) / "stored", point.data_dir, None)
        placement = json.loads(ResultsTable(Path(tmp) / "stored" / "results.csv").read()
                               ["extra"].iloc[0])["feature_store"]
        old_scores, how = [], "not timed"
        if args.skip_backbone:
            old = float("nan")
        elif args.backbone_whole:
            old, old_scores = _point(point.profile, Path(tmp) / "backbone", point.data_dir, "backbone")
            how = "timed whole"
        else:
            epoch = _one_backbone_epoch(point.model, point.spec, point.train, point.settings)
            evaluate = probes - _probe_seconds.last_training  # the seeds' probe evaluations
            old = args.seeds * point.settings.epochs * epoch + forward_eval + evaluate
            how = f"one epoch of one seed, {epoch:.1f} s, x {args.seeds * point.settings.epochs}"
    return RunnerTimes(stored, stored_scores, placement, old, old_scores, how)


def _write_record(path: Path, argv: list[str] | None, point: Point, runner: RunnerTimes, rows: list[tuple[str, float]],
                  floor: float, diff: float) -> None:
    """The table (`rows`), its ratios and scores, and the machine and settings, to `path` (atomically)."""
    stored, old = runner.stored, runner.old
    record = {"backbone_path": runner.how,
              "command": "python artifacts/timings/feature_store.py " + " ".join(argv or sys.argv[1:]),
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                          "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "load_average_at_end": os.getloadavg()},
              "train_examples": len(point.train), "eval_examples": len(point.evaluation),
              "seeds": point.seeds, "epochs": point.settings.epochs,
              "padded_gib": point.padded / 2**30, "budget_gib": point.budget,
              "placement": runner.placement, "seconds": {name: seconds for name, seconds in rows},
              "stored_over_floor": stored / floor,
              "backbone_over_stored": None if old != old else old / stored,
              "scores_stored": runner.stored_scores, "scores_backbone": runner.old_scores,
              "largest_score_difference": diff if runner.old_scores else None}
    with atomic_path(path) as tmp_path:
        tmp_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    point = _point_setup(args)
    forward_eval = _forward_seconds(point.model, point.evaluation)
    forward = _forward_seconds(point.model, point.train) + forward_eval
    probes, steps = _probe_seconds(point.model, point.spec, point.train, point.settings, args.seeds,
                                   -(-len(point.evaluation) // 64))
    floor = forward + probes
    runner = _runner_times(args, point, forward_eval, probes)
    stored, old = runner.stored, runner.old
    rows = [("floor: one forward over train + eval", forward),
            (f"floor: the probes' own work ({steps:,} steps)", probes), ("floor", floor),
            (f"stored ({runner.placement}): the runner's point", stored),
            (f"backbone every batch (before; {runner.how})", old)]
    width = max(len(r[0]) for r in rows)
    print("\n".join(f"{name:<{width}}  {seconds:9.1f} s" for name, seconds in rows))
    print(f"stored / floor = {stored / floor:.2f} (target <= 1.3); backbone / stored = {old / stored:.2f}x")
    diff = max((abs(a - b) for a, b in zip(runner.stored_scores, runner.old_scores)), default=float("nan"))
    print(f"scores, stored: {runner.stored_scores}" +
          (f"; largest |stored - backbone| = {diff:.2e}" if runner.old_scores else ""))
    if args.json:
        _write_record(Path(args.json), argv, point, runner, rows, floor, diff)


if __name__ == "__main__":
    main()
