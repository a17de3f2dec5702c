"""One task's probing grid: constants kinds x selection methods x fractions x seeds, cached and resumable.

For each point `run_grid` replaces the heads its fraction and selection name with its constants (average ones
extracted once, λ rankings learned once) and trains and evaluates a probe per seed; a frozen point runs the backbone
once and its seeds train together on the stored features. Every run is one row of ``results.csv``, identified by a
hash of its configuration, so a grid resumes where it stopped (``force`` recomputes).
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from papa.core import distributed
from papa.core.phases import phase, timed_into
from papa.core.progress import tqdm
from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DEFAULT_STEP_MODE, PAPER_PROBE_INPUTS, RANKED
from papa.method.attention_free import query_key_dropped_while
from papa.method.precision import backbone_autocast, compiled_backbone, feature_dtype, matmul_precision
from papa.method.selection import num_input_dependent, parse_selection, replaced_heads, replacement_order
from papa.probing.feature_store import STORED, block_examples
from papa.probing.features import EncodedTask, FeatureSource, feature_layers
from papa.probing.standardize import InputStatistics, input_statistics, save_input_statistics
from papa.probing.training import (TrainSettings, evaluate_probe, make_probe, train_probe, train_probes,
                                   train_probes_in_blocks, train_probes_in_chunks)
from papa.runs.keys import PointKey, point_key, run_config, trains_constants
from papa.runs.lambda_ranking import check_saved_rankings, head_ranking
from papa.runs.predictions_store import save_run_predictions
from papa.runs.results import ResultRow, run_id
from papa.runs.session import GridConfig, Session, open_session, recorded_corpus, session_constants, subset


def run_grid(cfg: GridConfig, *, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) the grid; returns its rows from the results table."""
    progress = progress and distributed.is_main()
    s = open_session(cfg, progress)
    cfg = s.cfg
    try:
        with timed_into(s.out, ran=lambda: s.recorded > 0):
            total_heads = s.controller.num_layers * s.controller.num_heads
            for label in cfg.fractions:  # a fraction that is no whole number of heads fails before the first run
                num_input_dependent(label, total_heads, cfg.rounding)
            check_saved_rankings(s)
            ids = []
            total = len(cfg.fractions) * len(cfg.seeds) * len(cfg.constants) * len(cfg.selections)
            bar = tqdm(total=total, desc=f"{cfg.task} grid", unit="run", disable=not progress)
            with matmul_precision(cfg.precision), compiled_backbone(s.model, cfg.compile):
                for kind in cfg.constants:
                    for method in cfg.selections:
                        for label in cfg.fractions:
                            ids += _run_point(s, kind, method, label, progress, bar)
            bar.close()
    finally:
        s.controller.detach()
    distributed.barrier()  # the main process has written every row
    df = s.table.read()
    return df[df["run_id"].isin(ids)].reset_index(drop=True)


def _order(s: Session, kind: str, method: str, progress: bool) -> list[tuple[int, int]]:
    selection = parse_selection(method)
    if selection.method in RANKED:
        return head_ranking(s, kind, progress, selection.seed, part=selection.part,
                            profile=selection.profile).order_for(selection.method)
    # random: permutation 0 unless a variant
    return replacement_order(selection.method, s.controller.num_layers, s.controller.num_heads, seed=selection.seed)


@dataclass(frozen=True)
class _Point:
    """One grid point: its key, its run configuration without the seed, and what its probes train on."""

    key: PointKey
    kind: str                     # the constants kind the point runs (``trainable_*`` included)
    method: str
    label: str
    config: dict
    train: EncodedTask
    trainable: bool               # its constants train with the probe


def _run_point(s: Session, kind: str, method: str, label: str, progress: bool, bar) -> list[str]:
    """The runs of one grid point (every seed not yet in the table); returns the run ids of all its seeds."""
    point = _point(s, kind, method, label)
    ids = {seed: run_id(**point.config, seed=seed) for seed in s.cfg.seeds}
    todo = distributed.main_decides([seed for seed in s.cfg.seeds if s.cfg.force or not s.table.has(ids[seed])])
    bar.update(len(s.cfg.seeds) - len(todo))
    if todo:
        _set_heads(s, point, progress)
        try:
            _run_seeds(s, point, todo, ids, progress, bar)
        finally:
            if point.trainable:
                s.controller.set_constants(session_constants(s, kind, progress))  # back to the untrained ones
    return list(ids.values())


def _point(s: Session, kind: str, method: str, label: str) -> _Point:
    """Point (`kind`, `method`, `label`) of the session's grid, keyed as the job lister keys it."""
    cfg, ctrl, prof = s.cfg, s.controller, s.profile
    key = point_key(kind, method, cfg.constants_corpus, label, total_heads=ctrl.num_layers * ctrl.num_heads,
                    rounding=cfg.rounding)
    config = run_config(cfg, prof, key, model=ctrl.signature.model_name, kind=kind, fraction=label,
                        constants_corpus=recorded_corpus(s, key.constants_corpus), trains_probe=s.spec.trains_probe)
    trainable = trains_constants(kind, key)
    # Trained constants run the backbone every step, so a profile may size them apart (run_config records it).
    train = subset(s.train, prof.trainable_limit, prof.sample) if trainable and prof.trainable_limit else s.train
    return _Point(key, kind, method, label, config, train, trainable)


def _set_heads(s: Session, point: _Point, progress: bool) -> None:
    """Replace the point's heads: none at fraction 1; else its constants, in every head (fraction 0) or in the
    first heads of its method's order."""
    ctrl, key = s.controller, point.key
    ctrl.keep_all()
    if key.keeps_all:
        return
    ctrl.set_constants(session_constants(s, point.kind, progress), trainable=point.trainable)
    if key.replaces_all:
        ctrl.replace(None)
        return
    order = _order(s, point.kind, point.method, progress)
    ctrl.replace(replaced_heads(order, ctrl.num_layers * ctrl.num_heads - key.n_input_dependent, ctrl.num_layers,
                                ctrl.num_heads))


def _run_seeds(s: Session, point: _Point, seeds: list[int], ids: dict[int, str], progress: bool, bar) -> None:
    """Train, evaluate and record the point's probe with each of `seeds`."""
    # Replaced heads skip their Q/K projections (paper 3.4); the outputs are the same, bit for bit on the CPU.
    with nullcontext() if point.key.keeps_all else query_key_dropped_while(s.controller, where_possible=True):
        (_run_trained if point.trainable else _run_frozen)(s, point, seeds, ids, progress, bar)


def _run_frozen(s: Session, point: _Point, seeds: list[int], ids: dict[int, str], progress: bool, bar) -> None:
    """Every seed of a frozen point: one stored backbone pass over its examples, the seeds' probes trained together."""
    cfg = s.cfg
    settings = TrainSettings.from_task(s.spec, epochs=point.config["epochs"], step_mode=cfg.steps)
    training = s.spec.trains_probe  # LM with the model's own head trains nothing: no training features
    order = point.config["batch_order"] if training else None
    blocks = order == "blocks"
    standardize = cfg.probe_inputs != PAPER_PROBE_INPUTS
    folder, dtype = s.out.features, feature_dtype(cfg.precision)
    train_src = eval_src = None
    try:
        with _autocast(s), phase("features"):
            if training and (standardize or not blocks):  # in blocks, only the statistics read it: streamed
                train_src = FeatureSource(s.model, point.train, trainable_backbone=False, progress=progress,
                                          desc=f"features {point.label}", folder=folder,
                                          store="backbone" if blocks else None, dtype=dtype, batch_order=order)
            eval_src = FeatureSource(s.model, s.eval, trainable_backbone=False, progress=progress,
                                     desc="eval features", folder=folder, dtype=dtype)
        start = time.perf_counter()
        with phase("probe training"):
            probes = [_fresh_probe(s, seed) for seed in seeds]
            if standardize:
                statistics = _point_statistics(s, probes[0], train_src, point.config)
                for probe in probes:
                    probe.set_input_statistics(statistics)
            if training:
                _train_frozen(s, point, probes, train_src, settings, seeds, progress)
        with phase("evaluation"):
            # nothing trains (LM with the model's own head): every seed scores the same model
            scored = probes if training else probes[:1]
            outcomes = [evaluate_probe(probe, s.spec, eval_src, return_predictions=True) for probe in scored]
            outcomes = outcomes if training else outcomes * len(seeds)
        seconds = (time.perf_counter() - start) / len(seeds)  # the seeds ran together: each gets an equal share
        for seed, (value, predictions) in zip(seeds, outcomes):
            if distributed.is_main():  # every process trained the same probes; one writes them down
                source = train_src or eval_src
                _record(s, point, seed, ids[seed], value, predictions, seconds=seconds, epochs=settings.epochs,
                        store="blocks" if blocks else source.placement, path="blocks" if blocks else source.path)
            bar.update(1)
    finally:
        for source in (train_src, eval_src):
            if source is not None:
                source.close()


def _train_frozen(s: Session, point: _Point, probes: list, train_src: FeatureSource | None, settings: TrainSettings,
                  seeds: list[int], progress: bool) -> None:
    """The seeds' probes of a frozen point trained together, in the point's batch order."""
    key, order, kind = point.key, point.config["batch_order"], s.spec.kind
    desc = f"{s.cfg.task} {key.constants}/{key.selection} {point.label} seeds {','.join(map(str, seeds))}"
    if order == "blocks":
        with _autocast(s):  # the backbone runs here, block by block
            train_probes_in_blocks(probes, kind, s.model, point.train, settings, seeds=seeds,
                                   block_examples=_block_examples(s, point, settings), progress=progress, desc=desc)
    elif order == "chunks":
        train_probes_in_chunks(probes, kind, train_src, settings, seeds=seeds,
                               chunk_examples=_block_examples(s, point, settings), progress=progress, desc=desc)
    else:
        train_probes(probes, kind, train_src, settings, seeds=seeds, progress=progress, desc=desc)


def _block_examples(s: Session, point: _Point, settings: TrainSettings) -> int:
    """Examples per block (or chunk): as many whole batches as the memory budget holds."""
    layers = feature_layers(s.model, point.train.last_layer_only)
    return block_examples(layers, s.max_length, s.model.config.hidden_size, s.controller.theta.device,
                          batch_size=settings.batch_size, total=len(point.train))


def _run_trained(s: Session, point: _Point, seeds: list[int], ids: dict[int, str], progress: bool, bar) -> None:
    """Every seed of a point whose constants train with the probe: the backbone runs every step, so each seed runs
    alone, from the initial constants."""
    cfg, ctrl, key = s.cfg, s.controller, point.key
    initial = ctrl.constants.detach().clone()
    settings = TrainSettings.from_task(s.spec, epochs=point.config["epochs"], step_mode=cfg.steps)
    statistics = None  # of the features at the initial constants, once per point (papa.probing.standardize)
    for seed in seeds:
        start = time.perf_counter()
        with torch.no_grad():
            ctrl.constants.copy_(initial)
        train_src = FeatureSource(s.model, point.train, trainable_backbone=True, progress=False)
        with _autocast(s), phase("trained constants"):  # the probe runs under the backbone's autocast here
            probe = _fresh_probe(s, seed)
            if cfg.probe_inputs != PAPER_PROBE_INPUTS:
                if statistics is None:  # the source streams, and the statistics take no gradient
                    statistics = _point_statistics(s, probe, train_src, point.config)
                probe.set_input_statistics(statistics)
            train_probe(probe, s.spec.kind, train_src, settings, seed=seed, extra_parameters=[ctrl.constants],
                        progress=progress, desc=f"{cfg.task} {key.constants}/{key.selection} {point.label} seed {seed}")
        with _autocast(s), phase("features"):
            # evaluated with the constants as trained: the evaluation features are computed only now
            eval_src = FeatureSource(s.model, s.eval, trainable_backbone=False, progress=False,
                                     folder=s.out.features)
        try:
            with phase("evaluation"):
                value, predictions = evaluate_probe(probe, s.spec, eval_src, return_predictions=True)
        finally:
            eval_src.close()
        if distributed.is_main():
            _record(s, point, seed, ids[seed], value, predictions, seconds=time.perf_counter() - start,
                    epochs=settings.epochs, store="backbone", path="backbone")
        bar.update(1)


def _autocast(s: Session):
    """The autocast context the session's backbone runs its forward passes in."""
    return backbone_autocast(s.cfg.precision, s.controller.theta.device)


def _fresh_probe(s: Session, seed: int):
    """The probe `seed` starts from (its initial weights), on the model's device."""
    torch.manual_seed(seed)
    return make_probe(s.spec, s.model, s.max_length, len(s.tokenizer)).to(s.controller.theta.device)


#: What a run's predictions and row record of its configuration.
_RECORDED = ("model", "task", "constants", "constants_corpus", "selection", "fraction", "profile", "layout", "dtype",
             "probe_inputs", "precision", "execution", "batch_order")


def _record(s: Session, point: _Point, seed: int, run: str, value: float, predictions, *, seconds: float,
            epochs: int, store: str, path: str) -> None:
    """One run's predictions file, then its row (so that a row always has its predictions); `store` and `path` say
    where the features were kept."""
    recorded = {**{name: point.config[name] for name in _RECORDED}, "seed": seed}
    save_run_predictions(s.out, run, predictions, metric=s.spec.metric, value=value, **recorded)
    s.recorded += 1
    # The step mode, unless eager, is recorded in `extra` but not hashed (it changes rounding at most).
    steps = {} if s.cfg.steps == DEFAULT_STEP_MODE else {"steps": s.cfg.steps}
    s.table.append([ResultRow(
        **recorded, n_input_dependent=point.key.n_input_dependent, metric=s.spec.metric, value=value,
        runtime_s=seconds, run_id=run, extra={"train_examples": len(point.train), "eval_examples": len(s.eval),
                                              "epochs": epochs, "features_cached": store in STORED,
                                              "feature_store": store, "store_path": path, **steps})])


def statistics_path(folder: RunFolder, point_id: str) -> Path:
    """Where a grid point's standardisation statistics are stored (``probe_inputs/<point id>.safetensors``)."""
    return folder.probe_inputs / f"{point_id}.safetensors"


def _point_statistics(s: Session, probe, source: FeatureSource, point: dict) -> InputStatistics:
    """The statistics that standardise every seed's probe inputs at one grid point, from its training features,
    stored with its runs."""
    statistics = input_statistics(probe, source)
    if distributed.is_main():
        point_id = run_id(**point)
        save_input_statistics(statistics_path(s.out, point_id), statistics,
                              {"point_id": point_id, "point": point, "train_examples": len(source.data)})
    return statistics
