"""A frozen probe point at the cost of its forward passes: the grid runner's point against its floor, and today's path.

    python -m benchmarks.feature_store --train 8192 --seeds 5 --json artifacts/timings/feature_store_cpu.json

One grid point (`papa.runs.experiment.run_grid`, fraction 1, SST-2 at Table 3's length 64 and 4 epochs, `--seeds`
seeds) on the offline model, with ``PAPA_FEATURE_CACHE_GB`` set below the padded features' size (half of it by
default, as a whole training set's padded features exceed memory everywhere), timed three ways in one process:

* ``floor``: one backbone forward over the point's training and evaluation examples (nothing kept) + the probes' own
  training steps and evaluation on a batch already in memory, × the number of steps and batches the point takes;
* ``stored``: the runner's point (the backbone runs once, the probes read the store: `papa.probing.feature_store`);
* ``backbone``: the path before features were stored whenever they exceeded the budget (``PAPA_FEATURE_STORE=
  backbone``): the backbone runs for every batch of every epoch and seed. Every epoch of every seed repeats the same
  work, so one epoch of one seed is timed and multiplied by seeds x epochs (the evaluation's forward, once per
  point, and each seed's probe evaluation are added); `--backbone-whole` times the whole point instead (about an
  hour at the defaults on 2 cores), `--skip-backbone` skips it.

It prints the wall times, stored / floor (the target: <= 1.3), backbone / stored (the speed-up), and the
largest score difference between the two paths (they must agree to float tolerance). Every ratio is taken from
timings of this one run. Model loading is excluded (warmed up first).

    python -m benchmarks.feature_store --paths --shapes grid --json artifacts/timings/store_paths_gpu.json
    python -m benchmarks.feature_store --smoke      # the same on tiny shapes, on the CPU, in seconds

``--paths`` times instead the step's fetch on each path a split can take (`papa.probing.feature_store.store_path`),
on synthetic random features (``--kept`` of the slots read, lengths drawn uniformly around it) at the grid's
shapes: BERT-base (L+1 = 13, d = 768) and RoBERTa-large (25 x 1024) on MNLI (Table 3: batch 8, length 256) and
RoBERTa-large on SST-2 (32, 64), ``--seeds`` seeds reading one epoch of ``--examples`` examples: the device store,
pinned host memory with every seed's next batch copied on a side stream (and, beside it, one `get` per seed and
step), a memory-mapped file read batch by batch, the file read in sequential chunks (batch order ``chunks``, each
seed indexing its batches in the chunk), and the same in bfloat16. A row is milliseconds per step (every seed's
batch) and GB/s of padded float32 features handed to the probes. On the CPU the device paths are host ones, and a
file just written is read from the page cache (a split beyond memory is read from the disk itself).
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
from papa.probing.feature_store import CACHE_BUDGET_ENV, STORE_ENV, FeatureStore, StorePlan, read_positions
from papa.probing.prefetch import stored_chunks, stored_steps
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
    rows = run_grid(GridConfig(task=TASK, profile=profile, fractions=("1",), out_dir=str(out), data_dir=data_dir),
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
    paths = parser.add_argument_group("the step's fetch on each store path (--paths, --smoke)")
    paths.add_argument("--paths", action="store_true", help="time each store path's fetch (module docstring)")
    paths.add_argument("--smoke", action="store_true", help="--paths on tiny shapes, on the CPU, in seconds")
    paths.add_argument("--shapes", choices=sorted(PATH_SHAPES), default="grid")
    paths.add_argument("--examples", type=int, default=None, help="examples per split (default: the shapes')")
    paths.add_argument("--kept", type=float, default=0.3, help="share of slots the probe reads (default 0.3)")
    paths.add_argument("--chunk-examples", type=int, default=None, help="examples per chunk (default: 8 batches)")
    paths.add_argument("--folder", default=None, help="where the disk stores go (default: the temporary folder)")
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
              "command": "python -m benchmarks.feature_store " + " ".join(argv or sys.argv[1:]),
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


@dataclass(frozen=True)
class PathShape:
    """One configuration's features, synthetic: hidden states (L+1) x width, Table 3's length and batch."""

    name: str
    layers: int
    hidden: int
    length: int
    batch: int
    examples: int


PATH_SHAPES = {"grid": (PathShape("bert-base mnli", 13, 768, 256, 8, 512),
                        PathShape("roberta-large mnli", 25, 1024, 256, 8, 256),
                        PathShape("roberta-large sst2", 25, 1024, 64, 32, 1024)),
               "smoke": (PathShape("tiny", 3, 32, 16, 4, 64),)}


def _synthetic_store(shape: PathShape, keep: torch.Tensor, placement: str, dtype: str, device: torch.device,
                     folder: Path) -> FeatureStore:
    """A store of `keep`'s positions filled with random features, as `plan_store` would place it."""
    kept = int(keep.sum())
    width = shape.layers * shape.hidden * (4 if dtype == "float32" else 2)
    plan = StorePlan(placement, shape.examples, kept, kept * width, keep.numel() * width, None, folder, dtype,
                     device.type == "cuda", "chunks" if placement == "disk" else "per_seed")
    store = FeatureStore(plan, keep, shape.layers, shape.hidden, device, desc=f"bench {shape.name}")
    generator = torch.Generator().manual_seed(0)
    for a in range(0, kept, 4096):  # in pieces: a whole split of random float32 would double the memory
        piece = torch.randn(min(4096, kept - a), shape.layers, shape.hidden, generator=generator)
        store.values[a:a + len(piece)] = piece.to(store.values.device, store.dtype)
    store.finish()
    return store


def _fetch_seconds(store: FeatureStore, shape: PathShape, how: str, device: torch.device, seeds: int,
                   chunk: int) -> tuple[float, int]:
    """(seconds, steps) of one epoch's fetch of every seed's batches: `how` = "prefetch" (`stored_steps`), "get"
    (one `get` per seed and step) or "chunks" (`stored_chunks`, each seed indexing its batches within a chunk)."""
    n, batch = shape.examples, shape.batch
    orders = [torch.randperm(n, generator=torch.Generator().manual_seed(s)) for s in range(seeds)]
    mask = torch.ones(n, shape.length, dtype=torch.long, device=device)
    labels = torch.zeros(n, dtype=torch.long, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start, steps = time.perf_counter(), 0
    if how == "prefetch":
        for batches in stored_steps(store, orders, 0, batch, device, mask, labels):
            steps += 1
    elif how == "get":
        for a in range(0, n, batch):
            for order in orders:
                store.get(order[a:a + batch], device)
            steps += 1
    else:
        spans = [(a, min(a + chunk, n)) for a in range(0, n, chunk)]
        for feats, _, _ in stored_chunks(store, spans, device, mask, labels):
            for s in range(seeds):
                order = torch.randperm(len(feats), generator=torch.Generator().manual_seed(s)).to(device)
                for a in range(0, len(feats), batch):
                    feats[order[a:a + batch]]
            steps += -(-len(feats) // batch)
    sync()
    return time.perf_counter() - start, steps


#: (row name, placement, dtype, how) of each path timed; on the CPU the device's rows are left out.
PATH_ROWS = (("device", "device", "float32", "prefetch"), ("device_bf16", "device", "bfloat16", "prefetch"),
             ("pinned_host: all seeds in one gather", "host", "float32", "prefetch"),
             ("pinned_host: one get per seed", "host", "float32", "get"),
             ("pinned_host_bf16: prefetch", "host", "bfloat16", "prefetch"),
             ("disk: batch by batch", "disk", "float32", "prefetch"),
             ("disk_streamed: chunks", "disk", "float32", "chunks"),
             ("disk_streamed_bf16: chunks", "disk", "bfloat16", "chunks"))


def path_rows(args: argparse.Namespace) -> list[dict]:
    """Every path's fetch timed at every shape of `args.shapes` (module docstring), as table rows."""
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    folder = Path(args.folder or tempfile.gettempdir())
    rows = []
    for shape in PATH_SHAPES["smoke" if args.smoke else args.shapes]:
        shape = replace(shape, examples=args.examples or shape.examples)
        lengths = torch.randint(max(1, int(shape.length * args.kept / 2)),
                                max(2, int(shape.length * args.kept * 1.5)) + 1, (shape.examples,),
                                generator=torch.Generator().manual_seed(0)).clamp(max=shape.length)
        keep = torch.arange(shape.length)[None, :] < lengths[:, None]
        padded = shape.batch * args.seeds * shape.layers * shape.length * shape.hidden * 4
        for name, placement, dtype, how in PATH_ROWS:
            if placement == "device" and device.type != "cuda":
                continue
            name = name.replace("pinned_host", "host") if device.type != "cuda" else name
            store = _synthetic_store(shape, keep, placement, dtype, device, folder)
            try:
                _fetch_seconds(store, shape, how, device, args.seeds, args.chunk_examples or 8 * shape.batch)
                seconds, steps = _fetch_seconds(store, shape, how, device, args.seeds,
                                                args.chunk_examples or 8 * shape.batch)  # the second: warm
            finally:
                store.close()
            rows.append({"shape": shape.name, "path": name, "ms_per_step": 1e3 * seconds / steps,
                         "gb_per_s": padded * steps / seconds / 1e9, "steps": steps, "device": device.type,
                         "kept_gib": store.plan.kept_bytes / 2**30})
    return rows


def _check_path_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what the path timings cannot use, before any work."""
    if args.examples is not None and args.examples < 1:
        parser.error(f"--examples {args.examples}: give at least 1")
    if not 0 < args.kept <= 1:
        parser.error(f"--kept {args.kept}: give the share of slots read, in (0, 1]")
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: give at least 1")
    if args.chunk_examples is not None and args.chunk_examples < 1:
        parser.error(f"--chunk-examples {args.chunk_examples}: give at least 1")
    if args.folder is not None and not Path(args.folder).is_dir():
        parser.error(f"--folder {args.folder}: no such folder")


def paths_main(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str] | None) -> list[dict]:
    """`--paths` / `--smoke`: the table printed (and written to `--json`)."""
    _check_path_args(parser, args)
    rows = path_rows(args)
    width = max(len(r["path"]) for r in rows)
    print(f"{'shape':<20} {'path':<{width}} {'ms/step':>9} {'GB/s':>7}  ({args.seeds} seeds' batches a step)")
    for r in rows:
        print(f"{r['shape']:<20} {r['path']:<{width}} {r['ms_per_step']:9.3f} {r['gb_per_s']:7.2f}")
    if args.json:
        record = {"command": "python -m benchmarks.feature_store " + " ".join(argv or sys.argv[1:]),
                  "machine": {"cpus": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                              "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None},
                  "seeds": args.seeds, "kept": args.kept, "rows": rows}
        with atomic_path(Path(args.json)) as tmp:
            tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.paths or args.smoke:
        paths_main(parser, args, argv)
        return
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
