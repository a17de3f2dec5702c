"""What a profile's reproduction costs on this machine: rates measured per task, multiplied by the profile's grid.

    python -m benchmarks.cpu_estimate --profile cpu                                  # notebooks 01-07, MiniLM
    python -m benchmarks.cpu_estimate --profile cpu --notebooks 08_decoders --model smollm2

For each task the notebooks run on the model, measured on the task's real training data (`--data-dir`), in the
profile's layout, at Table 3's length and batch size:

* features: examples/s of one head configuration (half the heads replaced, their Q/K dropped: what a grid point
  computes once and caches for every epoch and seed);
* probe: seconds per example and epoch of probe training on those cached features;
* λ: seconds per example of λ learning (every head mixed, backward through the backbone);
* trainable: seconds per example of a trained-constants step (every head replaced, backward through the backbone);
* capture: examples/s of extracting the average constants.

Notebooks that measure their λ rankings' stability (`papa.paper.sections.ranking_stability`) learn each of their λ
rankings again with every other seed of `STABILITY_SEEDS`: the part ``stability``.

The grid comes from the notebooks themselves (`papa.reproduce.jobs.notebook_jobs`), grouped as the runner groups
it: per (task, constants corpus) one extraction; per (task, constants kind) one λ ranking; per head configuration
one feature pass over the training and evaluation sets, then seeds x epochs of probe training; trained constants
run the backbone for every step of every seed. Sizes are the profile's for each task (`Profile.for_task`), capped
by what the data holds. It prints the measured rates and the expected minutes per task and in all.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

import papa
from papa.core.settings import Resources
from papa.core.vocabulary import PAPER_NOTEBOOKS
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import data_free_constants
from papa.method.extract import extract_constants
from papa.method.layout import layout_for
from papa.method.models import canonical_model_name, is_causal_model
from papa.method.selection import heads_to_replace, replacement_order
from papa.probing.features import FeatureSource, encode_task
from papa.probing.training import TrainSettings, make_probe, train_probe
from papa.paper.sections import STABILITY_SEEDS
from papa.reproduce.jobs import notebook_jobs
from papa.reproduce.notebooks import NOTEBOOK_DIR, code_cells
from papa.runs.profiles import get_profile
from papa.tasks.corpus import task_corpus
from papa.tasks.data import load_examples, resolve_data_dir
from papa.tasks.registry import get_task


def measure(model, tokenizer, task: str, layout: str, data_dir, sample: int) -> dict:
    """Rates of the four kinds of work on `sample` real training examples of `task` (fewer for backward passes)."""
    spec = get_task(task)
    n, bs = spec.hparams.max_length, spec.hparams.batch_size
    examples = load_examples(spec, "train", data_dir, limit=sample, sample="random")
    data = encode_task(tokenizer, spec, examples, max_length=n, model_type=model.config.model_type, layout=layout)
    small = encode_task(tokenizer, spec, examples[: max(2 * bs, sample // 8)], max_length=n,
                        model_type=model.config.model_type, layout=layout)
    ctrl = papa.controller_of(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n, layout))
    order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
    settings = TrainSettings(spec.hparams.learning_rate, bs, 1)
    row = {"task": task, "n": n, "batch_size": bs}

    ctrl.keep_all()
    ctrl.replace(heads_to_replace(order, "1/2", ctrl.num_layers, ctrl.num_heads, "down"))
    with query_key_dropped_while(ctrl):
        start = time.perf_counter()
        source = FeatureSource(model, data, trainable_backbone=False, progress=False)
        row["features_per_s"] = len(data) / (time.perf_counter() - start)
    if spec.trains_probe:
        probe = make_probe(spec, model, n, len(tokenizer))
        start = time.perf_counter()
        train_probe(probe, spec.kind, source, settings, seed=0, progress=False)
        row["probe_s"] = (time.perf_counter() - start) / len(data)
    del source

    for kind in ("lambda", "trainable"):
        ctrl.keep_all()
        if kind == "lambda":
            ctrl.mix()
            extra = [ctrl.theta]
        else:
            ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n, layout), trainable=True)
            ctrl.replace()
            extra = [ctrl.constants]
        probe = make_probe(spec, model, n, len(tokenizer))
        start = time.perf_counter()
        train_probe(probe, spec.kind, FeatureSource(model, small, trainable_backbone=True, progress=False),
                    settings, seed=0, extra_parameters=extra, progress=False)
        row[f"{kind}_s"] = (time.perf_counter() - start) / len(small)
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, n, layout))
    ctrl.keep_all()

    corpus = task_corpus(task, "train", data_dir=data_dir, limit=sample // 2, sample="random")
    ctrl.detach()  # extraction attaches its own
    start = time.perf_counter()
    extract_constants(model, tokenizer, corpus, max_length=n, layout=layout, token_task=spec.token_level,
                      progress=False)
    row["capture_per_s"] = len(corpus.texts) / (time.perf_counter() - start)
    papa.attach(model)
    return row


@functools.lru_cache(maxsize=None)  # every head configuration of a task asks again: read each file once
def split_size(task: str, split: str, limit, data_dir) -> int:
    return len(load_examples(get_task(task), split, data_dir, limit=limit, sample="random"))


def measures_stability(notebook: str) -> bool:
    """Whether `notebook` compares its λ rankings across seeds (calls `sections.ranking_stability`)."""
    return any("sections.ranking_stability(" in source for _, source in code_cells(NOTEBOOK_DIR / f"{notebook}.ipynb"))


def estimate(profile: str, notebooks, model: str, rates: dict, data_dir) -> dict:
    """Expected seconds per task of `notebooks`' grid on `model`, from `rates` (task -> `measure` row)."""
    def ours(jobs):
        return [j for j in jobs if canonical_model_name(j.model) == canonical_model_name(model)]

    jobs = ours(notebook_jobs(profile, notebooks, resources=Resources(data_dir)))
    # (profile, task) of every λ ranking a notebook learns again with other seeds
    restudied = {(j.profile, j.task) for nb in notebooks if measures_stability(nb)
                 for j in ours(notebook_jobs(profile, [nb], resources=Resources(data_dir)))
                 if j.selection in ("lambda", "reversed_lambda")}
    points = defaultdict(list)
    for j in jobs:  # one head configuration serves every seed; learning-curve points have profiles of their own
        points[(j.profile, j.task, j.constants, j.constants_corpus, j.selection, j.fraction)].append(j.seed)
    cost: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    prep = set()
    for (name, task, kind, corpus, selection, fraction), seeds in points.items():
        p, r, spec = get_profile(name).for_task(task), rates[task], get_task(task)
        train = split_size(task, "train", p.train_limit, data_dir)
        evals = split_size(task, "eval", p.eval_limit, data_dir)
        epochs = p.epochs or spec.hparams.epochs
        c = cost[task]
        if kind in ("average", "trainable_average") and ("constants", task, corpus, p.corpus_limit) not in prep:
            prep.add(("constants", task, corpus, p.corpus_limit))
            source = task if corpus in ("task", "none") else corpus
            c["constants"] += split_size(source, "train", p.corpus_limit, data_dir) / r["capture_per_s"]
        if selection in ("lambda", "reversed_lambda") and ("rank", name, task, kind) not in prep:
            prep.add(("rank", name, task, kind))
            rank_epochs = p.rank_epochs or spec.hparams.epochs
            c["ranking"] += min(train, p.rank_limit or train) * rank_epochs * r["lambda_s"]
            if kind == "average" and (name, task) in restudied:  # the stability table compares average's rankings
                c["stability"] += (len(STABILITY_SEEDS) - 1) * min(train, p.rank_limit or train) * rank_epochs \
                    * r["lambda_s"]
        c["eval"] += evals / r["features_per_s"]
        if kind.startswith("trainable_") and fraction != "1":
            t_train = min(train, p.trainable_limit or train)
            t_epochs = p.trainable_epochs or epochs
            c["trainable"] += len(seeds) * t_epochs * t_train * r["trainable_s"]
        elif spec.trains_probe:
            c["features"] += train / r["features_per_s"]
            c["probe"] += len(seeds) * epochs * train * r["probe_s"]
        c["configs"] += 1
    return cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--notebooks", nargs="+", default=list(PAPER_NOTEBOOKS))
    parser.add_argument("--model", default=papa.DEFAULT_MODEL)
    parser.add_argument("--data-dir", default=None, help="default: $PAPA_DATA_DIR")
    parser.add_argument("--sample", type=int, default=512, help="training examples timed per task")
    parser.add_argument("--rates", default=None,
                        help="JSON file of rates: read from it if it exists (nothing is measured), else written to it")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    data_dir = resolve_data_dir(args.data_dir)
    prof = get_profile(args.profile)
    layout = layout_for(bool(is_causal_model(args.model)), None, prof.layout)
    listed = notebook_jobs(args.profile, args.notebooks, resources=Resources(args.data_dir))
    tasks = sorted({j.task for j in listed if canonical_model_name(j.model) == canonical_model_name(args.model)})
    saved = Path(args.rates) if args.rates else None
    rates = json.loads(saved.read_text()) if saved and saved.is_file() else {}
    if any(task not in rates for task in tasks):
        model, tokenizer = papa.load_model(args.model)
        papa.attach(model)
    print(f"# {args.profile} profile, notebooks {' '.join(args.notebooks)}, {args.model}, layout {layout}, "
          f"torch threads {torch.get_num_threads()}" + (f", rates from {saved}" if saved and rates else "") + "\n")
    print("| task | n | features/s | probe ms/example/epoch | λ ms/example | trainable ms/example | capture/s |")
    print("|---|---|---|---|---|---|---|")
    for task in tasks:
        if task not in rates:
            rates[task] = measure(model, tokenizer, task, layout, data_dir, args.sample)
            if saved:
                saved.write_text(json.dumps(rates, indent=1))
        r = rates[task]
        probe = f"{1e3 * r['probe_s']:.2f}" if "probe_s" in r else "–"
        print(f"| {task} | {r['n']} | {r['features_per_s']:.0f} | {probe} | {1e3 * r['lambda_s']:.1f} | "
              f"{1e3 * r['trainable_s']:.1f} | {r['capture_per_s']:.0f} |", flush=True)
    cost = estimate(args.profile, args.notebooks, args.model, rates, data_dir)
    parts = ("constants", "ranking", "stability", "features", "probe", "eval", "trainable")
    print(f"\n| task | head configs | {' | '.join(parts)} | minutes |\n|---|---|{'---|' * len(parts)}---|")
    total = 0.0
    for task, c in sorted(cost.items()):
        minutes = sum(c[p] for p in parts) / 60
        total += minutes
        print(f"| {task} | {c['configs']:.0f} | {' | '.join(f'{c[p] / 60:.1f}' for p in parts)} | {minutes:.1f} |")
    print(f"\nexpected: {total:.0f} minutes of grid work (seconds per part, in minutes above; notebooks' own "
          f"figures and tables add little)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
