"""Does λ learn a ranking within a profile's budget? A learning curve of λ from two seeds: the study behind this
folder's records (one JSON per measurement), which size the `cpu` profile's λ epochs.

    python artifacts/lambda_curve/lambda_curve.py --task sst2 --steps 256 --lrs paper 1e-2
    python artifacts/lambda_curve/lambda_curve.py --task cola --steps 378 --every 63 --lrs paper 1e-3 1e-2
    python artifacts/lambda_curve/lambda_curve.py --task sst2 --steps 8 --every 4 --profile quick --out /tmp/x.json

For one task, on the λ data a grid of the profile (default ``cpu``) learns its ranking from (its `rank_limit`
examples, picked from its training subset as `papa.runs.lambda_ranking.head_ranking` picks them) with the task's average
constants and the offline default model, λ learns as the grid learns it (`papa.probing.ranking.learn_lambdas`: a
probe at Table 3's learning rate and batch size, every head mixed) for each λ learning rate of `--lrs` (``paper`` =
the probe's own rate, the paper's protocol) and each seed of `--seeds`, for `--steps` optimizer steps (rounded up to
whole epochs over the λ data, reported up to `--steps`: pick a multiple of an epoch's steps). Every `--every` steps
it records λ and reports, per rate:

* steps, examples seen, the spread of λ and of its logits θ (mean over the seeds);
* Spearman's ρ of λ between the first two seeds, and the share of common heads in the sets the grid replaces
  at 1/2 and keeps input-dependent at 1/8 (`papa.probing.convergence`: chance is 0.5 and 0.125);
* seconds since training began (mean over the seeds; λ training only, without loading or encoding).

Then, per seed, ρ between the final λ of each rate and the paper rate's. It prints markdown tables and writes a JSON
record (`--out`, default artifacts/lambda_curve/<task>.json; rewritten atomically after every run, so an interrupted
measurement keeps its finished runs) with the command, the machine, the torch version, the date, the settings,
every row and every recorded λ.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import mean

import torch

import papa
from papa.core.artifacts import write_json_atomic
from papa.method.layout import layout_for
from papa.method.models import is_causal_model
from papa.probing.convergence import learning_curve, spearman
from papa.probing.features import EncodedTask, encode_task
from papa.probing.ranking import LambdaTrace, learn_lambdas
from papa.probing.training import TrainSettings
from papa.runs.session import GridConfig, task_constants
from papa.runs.profiles import get_profile
from papa.tasks.data import load_examples, resolve_data_dir, subset_indices
from papa.tasks.registry import TaskSpec, get_task
from papa.reproduce.timings import cpu_model

REPO = Path(__file__).resolve().parents[2]
FRACTIONS = ("1/2", "1/8")


def rank_data(tokenizer, model, task: str, profile, layout: str, data_dir):
    """The examples a grid of `profile` learns `task`'s λ from: its training subset, then `rank_limit` of it."""
    spec = get_task(task)
    examples = load_examples(spec, "train", data_dir, limit=profile.train_limit, sample=profile.sample)
    data = encode_task(tokenizer, spec, examples, max_length=spec.hparams.max_length,
                       model_type=model.config.model_type, layout=layout)
    # as papa.runs.session.subset picks them from the encoded training subset
    keep = subset_indices(len(data), profile.rank_limit, profile.sample)
    if len(keep) == len(data):
        return data
    inputs, labels = data.batch(torch.tensor(keep))
    return replace(data, inputs=inputs, labels=labels)


def _rate(text: str) -> str | float:
    if text == "paper":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a λ learning rate is 'paper' or a positive number, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"a λ learning rate must be positive, got {text!r}")
    return value


def _label(lr: str | float, paper: float) -> str:
    return f"{paper:g} (paper)" if lr == "paper" else f"{lr:g}"


def summarise(runs: dict, seeds: list[int]) -> list[dict]:
    """Rows of the learning curve: per rate and recorded step, movement (mean over seeds) and agreement of the
    first two seeds."""
    rows = []
    for label, traces in runs.items():
        if not all(s in traces for s in seeds[:2]):
            continue
        a, b = traces[seeds[0]], traces[seeds[1]]
        seconds = {s: dict(zip(t.steps, t.seconds)) for s, t in traces.items()}
        for row in learning_curve(a, b, fractions=FRACTIONS):
            step = row["step"]
            rows.append({"lambda_lr": label, "step": step, "examples": a.examples_seen(step),
                         "lambda_spread": mean([row["lambda_spread_a"], row["lambda_spread_b"]]),
                         "logit_spread": mean([row["logit_spread_a"], row["logit_spread_b"]]),
                         **{k: v for k, v in row.items() if k.startswith(("spearman", "overlap"))},
                         "seconds": mean([seconds[s][step] for s in traces if step in seconds[s]])})
    return rows


def print_tables(rows: list[dict], runs: dict, paper_label: str) -> None:
    print("| λ lr | steps | examples seen | λ spread | logit spread | ρ seeds | overlap 1/2 | kept 1/8 | "
          "replaced 1/8 | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['lambda_lr']} | {r['step']} | {r['examples']} | {r['lambda_spread']:.4f} | "
              f"{r['logit_spread']:.3f} | {r['spearman']:.3f} | {r['overlap_replaced_1/2']:.3f} | "
              f"{r['overlap_kept_1/8']:.3f} | {r['overlap_replaced_1/8']:.3f} | {r['seconds']:.0f} |")
    if paper_label in runs and len(runs) > 1:
        print(f"\nρ between each rate's final λ and the paper rate's ({paper_label}), same seed:\n")
        print("| λ lr | seed | steps | ρ vs paper rate |\n|---|---|---|---|")
        for label, traces in runs.items():
            if label == paper_label:
                continue
            for seed, trace in traces.items():
                ref = runs[paper_label].get(seed)
                if ref is not None and ref.total_steps == trace.total_steps:
                    print(f"| {label} | {seed} | {trace.total_steps} | "
                          f"{spearman(trace.lambdas[-1], ref.lambdas[-1]):.3f} |")


class _Trace(LambdaTrace):
    """A trace that also knows how many examples a step count has seen (the last batch of an epoch is short)."""

    def __init__(self, every: int, n: int, batch_size: int):
        super().__init__(every=every)
        self.n, self.batch_size = n, batch_size

    def examples_seen(self, step: int) -> int:
        per_epoch = math.ceil(self.n / self.batch_size)
        epochs, rest = divmod(step, per_epoch)
        return epochs * self.n + min(rest * self.batch_size, self.n)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (module docstring), checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--profile", default="cpu", help="whose λ data (rank_limit, sample, layout)")
    parser.add_argument("--model", default=papa.DEFAULT_MODEL)
    parser.add_argument("--steps", type=int, default=256, help="optimizer steps per seed and rate")
    parser.add_argument("--every", type=int, default=None, help="record λ every this many steps (default: an epoch)")
    parser.add_argument("--lrs", nargs="+", type=_rate, default=["paper", 1e-2],
                        help="λ learning rates: 'paper' (the probe's Table 3 rate) or numbers")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--data-dir", default=None, help="default: $PAPA_DATA_DIR")
    parser.add_argument("--cache", default="artifacts/cache/lambda_curve", help="where average constants are kept")
    parser.add_argument("--out", type=Path, default=None, help="default: artifacts/lambda_curve/<task>.json")
    args = parser.parse_args(argv)
    if len(args.seeds) < 2:
        parser.error("the curve compares two seeds: give at least two --seeds")
    if args.steps < 1 or (args.every is not None and args.every < 1):
        parser.error("--steps and --every must be positive")
    return args


@dataclass(frozen=True)
class Curve:
    """What every run of the curve shares: the controller (average constants set), the task, its λ data, the probe's
    settings, how often λ is recorded, and the steps reported."""

    ctrl: object
    spec: TaskSpec
    data: EncodedTask
    settings: TrainSettings
    every: int
    steps: int

    def learn(self, rate: str | float, seed: int) -> _Trace:
        """λ learnt at `rate` (``paper``: the probe's own) from `seed`, recorded up to `steps`."""
        trace = _Trace(self.every, len(self.data), self.settings.batch_size)
        learn_lambdas(self.ctrl, self.spec, self.data, self.settings, seed=seed,
                      lambda_lr=None if rate == "paper" else rate, progress=False, trace=trace)
        # training runs whole epochs: what it records past --steps is left out
        keep = [i for i, s in enumerate(trace.steps) if s <= self.steps]
        trace.steps = [trace.steps[i] for i in keep]
        trace.lambdas = [trace.lambdas[i] for i in keep]
        trace.seconds = [trace.seconds[i] for i in keep]
        return trace


def _run_curve(curve: Curve, args: argparse.Namespace, record: dict, out: Path) -> tuple[dict, float]:
    """Every rate and seed of `args` (``runs[label][seed]``), `record` rewritten to `out` after each; and the clock
    reading they started at. Detaches the controller."""
    paper = curve.settings.learning_rate
    runs: dict[str, dict[int, _Trace]] = {}
    lambdas: list[dict] = []
    start = time.perf_counter()
    try:
        for rate in args.lrs:
            label = _label(rate, paper)
            for seed in args.seeds:
                trace = curve.learn(rate, seed)
                runs.setdefault(label, {})[seed] = trace
                lambdas.append({"lambda_lr": label, "seed": seed, "steps": trace.steps, "seconds": trace.seconds,
                                "lambdas": [lam.tolist() for lam in trace.lambdas]})
                print(f"  λ lr {label}, seed {seed}: {trace.total_steps} steps, {trace.seconds[-1]:.0f} s",
                      flush=True)
                rows = summarise(runs, args.seeds)
                write_json_atomic(out, {**record, "seconds": round(time.perf_counter() - start), "rows": rows,
                                        "runs": lambdas})
    finally:
        curve.ctrl.detach()
    return runs, start


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    out = args.out or REPO / "artifacts" / "lambda_curve" / f"{args.task}.json"
    spec = get_task(args.task)
    prof = get_profile(args.profile).for_task(args.task)
    layout = layout_for(bool(is_causal_model(args.model)), None, prof.layout)
    data_dir = resolve_data_dir(args.data_dir)
    grid = GridConfig(args.task, model=args.model, profile=args.profile, folder=args.cache, data_dir=args.data_dir,
                      layout=layout)
    constants, model, tokenizer = task_constants(grid, progress=False)
    data = rank_data(tokenizer, model, args.task, prof, layout, data_dir)
    lr, bs = spec.hparams.learning_rate, spec.hparams.batch_size
    per_epoch = math.ceil(len(data) / bs)
    every = args.every or per_epoch
    settings = TrainSettings(lr, bs, math.ceil(args.steps / per_epoch))
    ctrl = papa.attach(model)
    ctrl.set_constants(constants)
    paper_label = _label("paper", lr)
    print(f"# λ learning curve: {args.task}, {len(data)} examples ({args.profile} profile's λ data), batch {bs}, "
          f"probe lr {lr:g}, {args.model}, layout {layout}, {args.steps} steps, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads\n", flush=True)
    given = argv if argv is not None else sys.argv[1:]
    record = dict(command="python artifacts/lambda_curve/lambda_curve.py " + " ".join(given),
                  cpu=cpu_model(), torch=torch.__version__, threads=torch.get_num_threads(),
                  load_average=os.getloadavg()[0],  # a shared machine's other jobs slow the seconds down
                  date=time.strftime("%Y-%m-%d"), task=args.task, profile=args.profile, model=args.model,
                  layout=layout, examples=len(data), batch_size=bs, probe_lr=lr, steps=args.steps, every=every,
                  seeds=args.seeds, fractions=list(FRACTIONS))
    runs, start = _run_curve(Curve(ctrl, spec, data, settings, every, args.steps), args, record, out)
    print()
    print_tables(summarise(runs, args.seeds), runs, paper_label)
    print(f"\n{round(time.perf_counter() - start)} s of λ training in all; record in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
