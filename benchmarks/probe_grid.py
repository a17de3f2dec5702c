"""Part 4 of the suite: the probing grid of CoLA with the features stored as the runner stores them vs re-running the
backbone for every batch."""
from __future__ import annotations

import copy
import os

import torch

import papa
from benchmarks import timing
from benchmarks.report import Report
from papa.method.selection import heads_to_replace, replacement_order


class ProbeGrid:
    """Part 4's probing grid of CoLA (`fractions` x `seeds`, Table 3's epochs) on a copy of a model with average
    constants from the training inputs."""

    fractions, seeds = ("1", "1/2", "1/8", "1/16", "0"), (0, 1, 2)

    def __init__(self, model, tokenizer, train_size: int, eval_size: int, data_dir):
        from papa.probing.features import encode_task
        from papa.probing.training import TrainSettings
        from papa.tasks.data import load_examples
        from papa.tasks.registry import get_task

        self.spec = spec = get_task("cola")
        self.n = n = spec.hparams.max_length
        self.train_size, self.eval_size = train_size, eval_size
        train_examples = load_examples(spec, "train", data_dir, limit=train_size)
        self.train = encode_task(tokenizer, spec, train_examples, max_length=n, model_type="bert", layout="sep_last")
        self.dev = encode_task(tokenizer, spec, load_examples(spec, "eval", data_dir, limit=eval_size), max_length=n,
                               model_type="bert", layout="sep_last")
        self.work = copy.deepcopy(model)
        # Average constants from the training inputs (paper 3.1); not timed, both variants share them.
        self.ctrl = papa.attach(self.work, papa.extract_constants(
            self.work, tokenizer, [e.text for e in train_examples], max_length=n, layout="sep_last", progress=False))
        self.order = replacement_order("random", self.ctrl.num_layers, self.ctrl.num_heads, seed=0)
        self.settings = TrainSettings.from_task(spec)

    def run(self, store: str | None, autocast) -> tuple[float, list[float], list[list[float]]]:
        """(seconds, scores, losses) of the whole grid with ``PAPA_FEATURE_STORE`` = `store`."""
        from papa.probing.feature_store import STORE_ENV
        from papa.probing.features import FeatureSource
        from papa.probing.training import evaluate_probe, make_probe, train_probe

        # The re-run path is forced (PAPA_FEATURE_STORE=backbone): a zero cache budget only sends the
        # features to the next store (disk). None: the store the runner picks.
        if store is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = store
        ctrl, spec, work = self.ctrl, self.spec, self.work
        start = timing.clock()
        scores, losses = [], []
        for fraction in self.fractions:
            ctrl.keep_all()
            if fraction != "1":
                ctrl.replace(heads_to_replace(self.order, fraction, ctrl.num_layers, ctrl.num_heads, "down"))
            with autocast():
                sources = [FeatureSource(work, d, trainable_backbone=False, progress=False)
                           for d in (self.train, self.dev)]
            for seed in self.seeds:
                torch.manual_seed(seed)
                probe = make_probe(spec, work, self.n).to(next(work.parameters()).device)
                with autocast():
                    losses.append(train_probe(probe, spec.kind, sources[0], self.settings, seed=seed,
                                              progress=False))
                    scores.append(evaluate_probe(probe, spec, sources[1]))
            for source in sources:
                source.close()
        return timing.clock() - start, scores, losses

    def add_rows(self, report: Report, cached: tuple, fresh: tuple) -> None:
        """The rows of the grid timed with stored features (`cached`) and re-running the backbone (`fresh`)."""
        (cached_s, cached_scores, cached_losses), (fresh_s, fresh_scores, fresh_losses) = cached, fresh
        identical = cached_scores == fresh_scores and cached_losses == fresh_losses
        loss_diff = max(abs(a - b) for x, y in zip(cached_losses, fresh_losses) for a, b in zip(x, y))
        runs = len(self.fractions) * len(self.seeds)
        what = (f"CoLA grid, {runs} runs × {self.settings.epochs} epochs, {self.train_size} train / {self.eval_size} "
                "eval")
        report.add("MiniLM-L6", self.n, f"{what}: backbone re-run per batch", runs / fresh_s, note="runs/s")
        r = fresh_s / cached_s
        report.add("MiniLM-L6", self.n, f"{what}: stored features", runs / cached_s, r, "faster", None,
                   "≥ 10×, identical results", r >= 10 and identical,
                   f"{cached_s:.0f} s vs {fresh_s:.0f} s; results {'identical' if identical else 'differ'} "
                   f"(max loss difference {loss_diff:.1e})")


def bench_grid(model, tokenizer, train_size: int, eval_size: int, autocast, report: Report, data_dir) -> None:
    """Part 4: the CoLA grid (`ProbeGrid`) with the features stored as the runner stores them vs re-running the
    backbone for every batch; ``PAPA_FEATURE_STORE`` is put back as it was."""
    from papa.probing.feature_store import STORE_ENV

    grid = ProbeGrid(model, tokenizer, train_size, eval_size, data_dir)
    saved = os.environ.get(STORE_ENV)
    try:
        cached = grid.run(None, autocast)
        fresh = grid.run("backbone", autocast)
    finally:
        if saved is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = saved
    papa.detach(grid.work)
    grid.add_rows(report, cached, fresh)
