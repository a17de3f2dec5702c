"""One task's probing grid: constants kinds x selection methods x fractions x seeds, cached and resumable.

`run_grid` does, for one model and one task:

1. encode the task's train/eval subsets (the profile's sizes) in the grid's input layout (the profile's, by default
   the released code's: `papa.method.layout`) at Table 3's length;
2. get each constants kind: average constants are extracted from the task's training inputs (or another corpus,
   paper 5.3) once and saved under ``<out>/constants/``; data-free kinds are built; ``trainable_*`` kinds start from
   Toeplitz or average constants and train with the probe (Table 1's "labeled data" rows);
3. get the replacement order of each selection method; the λ ranking is learned once (paper 3.2) and saved under
   ``<out>/rankings/``;
4. for each fraction of input-dependent heads, replace the rest and, per seed, train and evaluate a probe. The
   backbone's features are computed once per head configuration and reused by every seed.

Every finished run is one row of ``<out>/results.csv`` (written atomically at once), identified by a hash of its
configuration, so an interrupted grid resumes where it stopped and a finished one is not recomputed (``force``
recomputes). The layout is part of that configuration and of every artifact's name and metadata, so runs in
different layouts never mix and artifacts of one layout are refused in another. Fraction 1 (nothing replaced) is the same for every kind and method: it is run once and recorded with
constants and selection ``none``. Fraction 0 (every head replaced) is the same for every method: it is run once per
constants kind and recorded with selection ``none``.
"""
from __future__ import annotations

import functools
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from papa.core import distributed
from papa.core.artifacts import check_output_dir
from papa.core.errors import Arg, InputError
from papa.core.vocabulary import CONSTANTS_KINDS, DEFAULT_DTYPE, NONE, PAPER_PROBE_INPUTS, RANKED
from papa.method.architectures import is_causal, model_signature
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import ConstantMatrices, data_free_constants, load_constants
from papa.method.controller import PapaController, attach
from papa.method.extract import extract_constants
from papa.method.layout import UNRECORDED_LAYOUT, layout_for
from papa.method.models import (DEFAULT_MODEL, canonical_model_name, dtype_name, is_causal_model, load_model,
                                resolve_device, resolve_dtype)
from papa.probing.convergence import lambda_movement
from papa.probing.features import EncodedTask, FeatureSource, encode_task
from papa.probing.ranking import LambdaTrace, learn_lambdas
from papa.probing.standardize import InputStatistics, input_statistics, probe_inputs_for, save_input_statistics
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.runs.keys import point_key
from papa.runs.names import constants_filenames, existing_file, ranking_filenames
from papa.runs.predictions_store import save_run_predictions
from papa.runs.profiles import Profile, get_profile
from papa.runs.results import ResultRow, ResultsTable, run_id
from papa.tasks.corpus import corpus_name, task_corpus
from papa.tasks.data import load_examples, resolve_data_dir, subset_indices
from papa.method.selection import (ROUNDINGS, SELECTION_METHODS, HeadRanking, fraction_label, heads_to_replace,
                        load_ranking, num_input_dependent, replacement_order)
from papa.tasks.registry import TaskSpec, check_task_fits_model, get_task

RANKING_SEED = 0  # the λ ranking is a pre-processing step (paper 3.2): one ranking serves every probe seed


@dataclass(frozen=True)
class GridConfig:
    """What to run. `fractions`/`seeds` None take the profile's (an empty list is an error); `constants_corpus`
    "task" = the task's own data; `profile` is a profile name or a JSON profile file (papa.runs.profiles); `layout` None
    takes the profile's (papa.method.layout); `dtype` is the model's (float32, bfloat16, float16); `probe_inputs`
    None takes the model's default (raw for encoders, as the paper; standardized for causal LMs:
    papa.probing.standardize)."""

    task: str
    model: str = DEFAULT_MODEL
    constants: tuple[str, ...] = ("average",)
    selections: tuple[str, ...] = ("lambda",)
    fractions: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    profile: str = "quick"
    constants_corpus: str = "task"
    rounding: str | None = None
    data_dir: str | None = None
    out_dir: str = "artifacts/runs"
    device: str = "cpu"
    force: bool = False
    layout: str | None = None
    dtype: str = DEFAULT_DTYPE
    probe_inputs: str | None = None

    def resolved(self) -> "GridConfig":
        """Fill profile defaults and check every value, so errors come before any work."""
        return _resolve(self)[0]


def _resolve(cfg: GridConfig) -> tuple[GridConfig, Profile, TaskSpec]:
    """`cfg` with the profile's defaults filled in and every value checked, with the profile and task spec it was
    resolved with: a grid resolves its inputs once and passes them down (a profile file is read once)."""
    prof = get_profile(cfg.profile).for_task(cfg.task)  # the task's own sizes, where the profile gives it some
    spec = get_task(cfg.task)
    if cfg.constants_corpus != "task":
        get_task(cfg.constants_corpus)
    for kind in cfg.constants:
        if kind not in CONSTANTS_KINDS:
            raise ValueError(f"unknown constants kind {kind!r}; choose from {', '.join(CONSTANTS_KINDS)}")
    for method in cfg.selections:
        if method not in SELECTION_METHODS:
            raise ValueError(f"unknown selection method {method!r}; choose from {', '.join(SELECTION_METHODS)}")
    fractions = tuple(fraction_label(f) for f in (prof.fractions if cfg.fractions is None else cfg.fractions))
    if not fractions:
        example = Arg("fractions", ["1", "1/2", "0"])
        raise InputError(f"the fraction list is empty: give at least one fraction (e.g. {example}), or leave it out "
                         "for the profile's", advice=[example])
    seeds = tuple(prof.seeds if cfg.seeds is None else cfg.seeds)
    if not seeds:
        example = Arg("seeds", [0, 1, 2])
        raise InputError(f"the seed list is empty: give at least one seed (e.g. {example}), or leave it out for the "
                         "profile's", advice=[example])
    if any(isinstance(v, bool) or not isinstance(v, int) for v in seeds):
        raise ValueError(f"seeds must be integers, got {list(seeds)}")
    if not cfg.constants or not cfg.selections:
        raise ValueError("give at least one constants kind and one selection method")
    rounding = cfg.rounding or prof.rounding
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; choose one of {', '.join(ROUNDINGS)}")
    causal = bool(is_causal_model(cfg.model))  # from the local config; unknown (hub-only) counts as an encoder
    layout = layout_for(causal, cfg.layout, prof.layout)
    check_task_fits_model(spec, causal, cfg.model)
    probe_inputs = probe_inputs_for(causal, cfg.probe_inputs, trains_probe=spec.trains_probe)
    resolve_device(cfg.device)  # an unavailable device fails here, before the model and data are loaded
    dtype = dtype_name(resolve_dtype(cfg.dtype))  # as does an unknown dtype
    # A profile file is recorded by the name it defines, never by its path.
    return replace(cfg, fractions=fractions, seeds=seeds, rounding=rounding, profile=prof.name,
                   layout=layout, dtype=dtype, probe_inputs=probe_inputs), prof, spec


@dataclass
class _Session:
    """What one grid shares: model, controller, encoded data, cached artifacts."""

    cfg: GridConfig
    profile: Profile
    model: object
    tokenizer: object
    controller: PapaController
    spec: object
    train: object
    eval: object
    max_length: int
    table: ResultsTable
    out: Path
    data_dir: Path | None         # resolved once (papa.tasks.data.resolve_data_dir): None = the hub
    constants: dict = field(default_factory=dict)


def run_grid(cfg: GridConfig, *, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) the grid; returns its rows from the results table."""
    cfg, prof, spec = _resolve(cfg)
    check_output_dir(cfg.out_dir)  # where results go is checked before the model and data are loaded
    progress = progress and distributed.is_main()
    s = _open_session(cfg, prof, spec, progress)
    try:
        total_heads = s.controller.num_layers * s.controller.num_heads
        for label in cfg.fractions:  # a fraction that is no whole number of heads fails before the first run
            num_input_dependent(label, total_heads, cfg.rounding)
        ids = []
        total = len(cfg.fractions) * len(cfg.seeds) * len(cfg.constants) * len(cfg.selections)
        bar = tqdm(total=total, desc=f"{cfg.task} grid", unit="run", disable=not progress)
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


@functools.lru_cache(maxsize=1)
def _load_model(name: str, device: str, dtype: str = DEFAULT_DTYPE):
    """`load_model`, keeping the last model: grids of one model over many tasks load it once. Safe to share because
    every grid detaches its controller, which restores the model exactly."""
    return load_model(name, device=device, dtype=dtype)


def _open_session(cfg: GridConfig, prof: Profile, spec: TaskSpec, progress: bool) -> _Session:
    """Load the model and encode the data of `cfg` (resolved, with its profile and task spec)."""
    data_dir = resolve_data_dir(cfg.data_dir)
    model, tokenizer = _load_model(cfg.model, distributed.process_device(cfg.device), cfg.dtype)
    n = spec.hparams.max_length
    train_ex = load_examples(spec, "train", data_dir, limit=prof.train_limit, sample=prof.sample)
    eval_ex = load_examples(spec, "eval", data_dir, limit=prof.eval_limit, sample=prof.sample)
    causal = is_causal(model)
    encode = lambda ex: encode_task(tokenizer, spec, ex, max_length=n, model_type=model.config.model_type,  # noqa
                                    layout=cfg.layout, causal=causal)
    out = Path(cfg.out_dir)
    controller = attach(model, model_name=canonical_model_name(cfg.model))
    return _Session(cfg, prof, model, tokenizer, controller, spec, encode(train_ex), encode(eval_ex), n,
                    ResultsTable(out / "results.csv"), out, data_dir)


# ---- artifacts ---------------------------------------------------------------------------------------------------

def average_constants(s: _Session, progress: bool) -> ConstantMatrices:
    """The session's average constants (its task's, or `constants_corpus`'s): cached under ``<out>/constants/``."""
    cfg = s.cfg
    corpus_task = cfg.task if cfg.constants_corpus == "task" else cfg.constants_corpus
    return cached_average_constants(s.model, s.tokenizer, s.controller.signature, corpus_task,
                                    limit=s.profile.corpus_limit, sample=s.profile.sample, max_length=s.max_length,
                                    out_dir=s.out, layout=cfg.layout,
                                    data_dir=s.data_dir, force=cfg.force, progress=progress)


def cached_average_constants(model, tokenizer, signature, corpus_task: str, *, limit: int | None, max_length: int,
                             out_dir: str | Path, layout: str, sample: str = "first", data_dir: Path | None = None,
                             force: bool = False, progress: bool = True) -> ConstantMatrices:
    """Average constants of `corpus_task`'s training inputs in `layout`: loaded from ``<out_dir>/constants/`` if
    there (and made for this model, length and layout), else extracted and saved there.

    The corpus is encoded as its own task's inputs are (a token task's with the token-task rule), whatever task
    the constants then serve (paper 5.3 uses MNLI's constants for every task). `data_dir` is resolved by the caller
    (`papa.tasks.data.resolve_data_dir`: None = the hub). The model's dtype is recorded with the constants, and
    named in the file unless it is float32 (constants averaged in another precision are other constants)."""
    dtype = dtype_name(next(model.parameters()).dtype)
    name = corpus_name(corpus_task, "train", limit, sample)
    names = constants_filenames(signature.model_name, name, max_length, layout, dtype=dtype)
    path = existing_file(Path(out_dir) / "constants", names)  # a file named by an older version is read too
    if distributed.main_decides(path.is_file() and not force):
        constants = load_constants(path)
        constants.check_compatible(signature, max_length=max_length, layout=layout)
        return constants
    corpus = task_corpus(corpus_task, "train", data_dir=data_dir, limit=limit, sample=sample)
    constants = extract_constants(model, tokenizer, corpus.texts, corpus.pairs, max_length=max_length,
                                  layout=layout, token_task=get_task(corpus_task).token_level,
                                  corpus=corpus.name, model_name=signature.model_name, progress=progress)
    constants = record_dtype(constants, dtype)
    if distributed.is_main():
        constants.save(path.with_name(names[0]))
    return constants


def record_dtype(constants: ConstantMatrices, dtype: str) -> ConstantMatrices:
    """`constants` whose metadata also names the dtype the model ran in while they were averaged (appended to their
    ``preprocessing`` record, which older papa versions read as free text: their files stay loadable both ways)."""
    meta = constants.metadata
    return ConstantMatrices(matrices=constants.matrices, counts=constants.counts,
                            metadata=replace(meta, preprocessing=f"{meta.preprocessing}; dtype={dtype}"))


def task_constants(task: str, *, model: str = DEFAULT_MODEL, profile: str = "quick", out_dir: str = "artifacts/runs",
                   corpus: str = "task", data_dir: str | None = None, device: str = "cpu", force: bool = False,
                   layout: str | None = None, dtype: str = DEFAULT_DTYPE, progress: bool = True
                   ) -> tuple[ConstantMatrices, object, object]:
    """The average constants a grid on `task` uses (same cache), with the model and tokenizer they belong to;
    `layout` None takes the profile's."""
    spec, prof = get_task(task), get_profile(profile).for_task(task)
    layout = layout_for(bool(is_causal_model(model)), layout, prof.layout)
    dtype = dtype_name(resolve_dtype(dtype))
    loaded, tokenizer = _load_model(model, distributed.process_device(device), dtype)
    signature = model_signature(loaded, canonical_model_name(model))
    constants = cached_average_constants(loaded, tokenizer, signature, task if corpus == "task" else corpus,
                                         limit=prof.corpus_limit, sample=prof.sample,
                                         max_length=spec.hparams.max_length, layout=layout,
                                         out_dir=out_dir, data_dir=resolve_data_dir(data_dir), force=force,
                                         progress=progress)
    return constants, loaded, tokenizer


def _constants(s: _Session, kind: str, progress: bool) -> ConstantMatrices:
    if kind not in s.constants:
        base = kind.removeprefix("trainable_")
        if base == "average":
            s.constants[kind] = average_constants(s, progress)
        else:
            s.constants[kind] = data_free_constants(base, s.controller.signature, s.max_length, s.cfg.layout)
    return s.constants[kind]


def head_ranking(s: _Session, kind: str, progress: bool, seed: int = RANKING_SEED) -> HeadRanking:
    """The λ ranking for `kind`'s constants, λ learned with `seed` (the grid's: RANKING_SEED): loaded if saved
    (and learned with the profile's settings), else learned and saved. It records how far λ moved
    (`papa.probing.convergence.lambda_movement`), the optimizer steps and λ's learning rate."""
    cfg, sig = s.cfg, s.controller.signature
    corpus = "task" if cfg.constants_corpus == "task" else cfg.constants_corpus
    names = _ranking_names(s, kind, seed)
    path = existing_file(s.out / "rankings", names)  # a file named by an older version is read too
    prof = s.profile
    rank_data = _subset(s.train, prof.rank_limit, prof.sample)
    settings = TrainSettings.from_task(s.spec, epochs=prof.rank_epochs)
    lambda_lr = prof.rank_lr or settings.learning_rate
    wanted = {"examples": len(rank_data), "epochs": settings.epochs, "learning_rate": settings.learning_rate,
              "lambda_learning_rate": lambda_lr, "probe_inputs": cfg.probe_inputs}
    if distributed.main_decides(path.is_file() and not cfg.force):
        ranking = load_ranking(path)
        ranking.check_compatible(sig.num_layers, sig.num_heads, sig.model_name, signature=sig,
                                 max_length=s.max_length, layout=cfg.layout)
        recorded = dict(ranking.metadata)
        if "learning_rate" in recorded:  # rankings saved before λ had a rate of its own learned at the probe's
            recorded.setdefault("lambda_learning_rate", recorded["learning_rate"])
        stale = _stale_settings(recorded, wanted)
        if not stale:
            return ranking
        # the file is named by profile, not by its sizes: a profile whose sizes changed must not reuse it
        tqdm.write(f"{path.name} was learned with {stale}; learning it again with the profile's "
                   f"{_settings_text(wanted)}.")
    s.controller.set_constants(_constants(s, kind.removeprefix("trainable_"), progress))
    trace = LambdaTrace()  # counts the steps
    lambdas = learn_lambdas(s.controller, s.spec, rank_data, settings, seed=seed, lambda_lr=prof.rank_lr,
                            progress=progress, trace=trace, standardize=cfg.probe_inputs != PAPER_PROBE_INPUTS)
    ranking = HeadRanking.from_lambdas(
        lambdas, signature=sig, task=cfg.task, constants=kind, constants_corpus=corpus, seed=seed,
        max_length=s.max_length, layout=cfg.layout, examples=len(rank_data), epochs=settings.epochs,
        learning_rate=settings.learning_rate, lambda_learning_rate=lambda_lr, steps=trace.total_steps,
        lambda_movement=lambda_movement(lambdas), profile=cfg.profile, dtype=cfg.dtype,
        probe_inputs=cfg.probe_inputs)
    if distributed.is_main():
        ranking.save(path.with_name(names[0]))
    return ranking


def _ranking_names(s: _Session, kind: str, seed: int = RANKING_SEED) -> list[str]:
    """The file names of the session's λ ranking with `kind` constants and λ learned with `seed`: the current one,
    then an older version's (only a seed other than the grid's is named)."""
    cfg = s.cfg
    return ranking_filenames(s.controller.signature.model_name, cfg.task, kind, cfg.constants_corpus, s.max_length,
                             cfg.profile, cfg.layout, cfg.dtype, seed=seed, probe_inputs=cfg.probe_inputs)


def _stale_settings(recorded: dict, wanted: dict) -> str:
    """The recorded ranking settings that differ from `wanted`, as text ("" when none differ)."""
    differ = {k: recorded[k] for k, v in wanted.items() if k in recorded and recorded[k] != v}
    return _settings_text(differ)


def _settings_text(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def _subset(data: EncodedTask, limit: int | None, sample: str) -> EncodedTask:
    """`limit` examples of an encoded split, picked as the profile picks them (the first, or a fixed random subset:
    a split kept in file order may be sorted by source, as CoLA's is)."""
    if limit is None or limit >= len(data):
        return data
    inputs, labels = data.batch(torch.tensor(subset_indices(len(data), limit, sample)))
    return replace(data, inputs=inputs, labels=labels)


def _order(s: _Session, kind: str, method: str, progress: bool) -> list[tuple[int, int]]:
    L, H = s.controller.num_layers, s.controller.num_heads
    if method in RANKED:
        return head_ranking(s, kind, progress).order_for(method)
    return replacement_order(method, L, H, seed=RANKING_SEED)


# ---- one point of the grid ---------------------------------------------------------------------------------------

def _run_point(s: _Session, kind: str, method: str, label: str, progress: bool, bar) -> list[str]:
    cfg, ctrl = s.cfg, s.controller
    # The job lister records the point by the same rule (papa.runs.keys), so its jobs are this point's rows.
    key = point_key(kind, method, cfg.constants_corpus, label, total_heads=ctrl.num_layers * ctrl.num_heads,
                    rounding=cfg.rounding)
    keep, baseline, replace_all = key.n_input_dependent, key.keeps_all, key.replaces_all
    row_kind, row_method, corpus = key.constants, key.selection, key.constants_corpus
    ranked = row_method in RANKED
    base = dict(model=ctrl.signature.model_name, task=cfg.task, constants=row_kind, constants_corpus=corpus,
                selection=row_method, fraction=label, rounding=cfg.rounding, profile=cfg.profile,
                train_limit=s.profile.train_limit, eval_limit=s.profile.eval_limit,
                corpus_limit=None if corpus == NONE else s.profile.corpus_limit,
                epochs=s.profile.epochs, rank=s.profile.ranking_key() if ranked else None)
    if s.profile.sample != "first":  # only then, so that the ids of runs on first-N subsets stay as they were
        base["sample"] = s.profile.sample
    if cfg.layout != UNRECORDED_LAYOUT:  # likewise: runs made before layouts were recorded keep their ids
        base["layout"] = cfg.layout
    if cfg.dtype != DEFAULT_DTYPE:  # and those made before dtypes were (all float32)
        base["dtype"] = cfg.dtype
    standardize = cfg.probe_inputs != PAPER_PROBE_INPUTS
    if standardize:  # and those of the paper's probe, which reads its inputs raw
        base["probe_inputs"] = cfg.probe_inputs
    trainable = kind.startswith("trainable_") and not baseline
    train, epochs = s.train, s.profile.epochs
    if trainable and (s.profile.trainable_limit, s.profile.trainable_epochs) != (None, None):
        # Trained constants run the backbone every step, so a profile may size them apart; recorded only then, so
        # that the ids of runs made before these sizes existed stay as they were.
        train = _subset(s.train, s.profile.trainable_limit, s.profile.sample)
        epochs = s.profile.trainable_epochs or epochs
        base.update(train_limit=s.profile.trainable_limit or s.profile.train_limit, epochs=epochs)
    ids = {seed: run_id(**base, seed=seed) for seed in cfg.seeds}
    todo = distributed.main_decides([seed for seed in cfg.seeds if cfg.force or not s.table.has(ids[seed])])
    bar.update(len(cfg.seeds) - len(todo))
    if not todo:
        return list(ids.values())

    ctrl.keep_all()
    if not baseline:
        ctrl.set_constants(_constants(s, kind, progress), trainable=trainable)
        order = None if replace_all else _order(s, kind, method, progress)
        ctrl.replace(None if replace_all else heads_to_replace(order, label, ctrl.num_layers, ctrl.num_heads,
                                                               cfg.rounding))
    initial = ctrl.constants.detach().clone() if trainable else None
    settings = TrainSettings.from_task(s.spec, epochs=epochs)
    # LM with the model's own head trains nothing (unless its constants train): no training features
    training = s.spec.trains_probe or trainable
    # Replaced heads skip their Q/K projections (paper 3.4); the outputs are the same, bit for bit on the CPU.
    with nullcontext() if baseline else query_key_dropped_while(ctrl, where_possible=True):
        sources = None if trainable else (
            FeatureSource(s.model, s.train, trainable_backbone=False, progress=progress, desc=f"features {label}")
            if training else None,
            FeatureSource(s.model, s.eval, trainable_backbone=False, progress=progress, desc="eval features"))
        untrained = None  # nothing trains (LM with the model's head): every seed scores the same model
        statistics = None  # of the training features, once per point (papa.probing.standardize)
        for seed in todo:
            start = time.perf_counter()
            if trainable:
                with torch.no_grad():
                    ctrl.constants.copy_(initial)
                train_src = FeatureSource(s.model, train, trainable_backbone=True, progress=False)
                eval_src = FeatureSource(s.model, s.eval, trainable_backbone=False, progress=False)
            else:
                train_src, eval_src = sources
            torch.manual_seed(seed)
            probe = make_probe(s.spec, s.model, s.max_length, len(s.tokenizer)).to(ctrl.theta.device)
            if standardize:
                if statistics is None:  # for trained constants: of the features at their initial values (the
                    # source then streams, and the statistics take no gradient)
                    statistics = _point_statistics(s, probe, train_src, base)
                probe.set_input_statistics(statistics)
            extra = [ctrl.constants] if trainable else []
            if training:
                train_probe(probe, s.spec.kind, train_src, settings, seed=seed, extra_parameters=extra,
                            progress=progress, desc=f"{cfg.task} {row_kind}/{row_method} {label} seed {seed}")
            if training or untrained is None:
                value, predictions = evaluate_probe(probe, s.spec, eval_src, return_predictions=True)
                untrained = None if training else (value, predictions)
            else:
                value, predictions = untrained
            if distributed.is_main():  # every process trained the same probe; one writes it down
                # before the row: a row in the table always has its predictions
                save_run_predictions(s.out, ids[seed], predictions, task=cfg.task, metric=s.spec.metric,
                                     value=value, model=base["model"], constants=row_kind, constants_corpus=corpus,
                                     selection=row_method, fraction=label, seed=seed, profile=cfg.profile,
                                     layout=cfg.layout, dtype=cfg.dtype, probe_inputs=cfg.probe_inputs)
                s.table.append([ResultRow(
                    model=base["model"], task=cfg.task, constants=row_kind, constants_corpus=corpus,
                    selection=row_method, fraction=label, n_input_dependent=keep, seed=seed, profile=cfg.profile,
                    layout=cfg.layout, dtype=cfg.dtype, probe_inputs=cfg.probe_inputs, metric=s.spec.metric,
                    value=value, runtime_s=time.perf_counter() - start, run_id=ids[seed],
                    extra={"train_examples": len(train), "eval_examples": len(s.eval), "epochs": settings.epochs,
                           "features_cached": bool(sources and next(x for x in sources if x).cached)})])
            bar.update(1)
    if trainable:
        ctrl.set_constants(_constants(s, kind, progress))  # back to the untrained initial constants
    return list(ids.values())


def statistics_path(out_dir: str | Path, point_id: str) -> Path:
    """Where a grid point's standardisation statistics are stored (``<out>/probe_inputs/<point id>.safetensors``,
    the point id being the run id of its configuration without the seed)."""
    return Path(out_dir) / "probe_inputs" / f"{point_id}.safetensors"


def _point_statistics(s: _Session, probe, source: FeatureSource, point: dict) -> InputStatistics:
    """The statistics that standardise the probe's inputs at one grid point (`point`: its run configuration without
    the seed), from its training features, stored with its runs: every seed of the point uses them."""
    statistics = input_statistics(probe, source)
    if distributed.is_main():
        point_id = run_id(**point)
        save_input_statistics(statistics_path(s.out, point_id), statistics,
                              {"point_id": point_id, "point": point, "train_examples": len(source.data)})
    return statistics


def learn_ranking(cfg: GridConfig, kind: str = "average", *, seed: int = RANKING_SEED,
                  progress: bool = True) -> tuple[HeadRanking, Path]:
    """Learn (or load) the λ ranking of `cfg`'s task with `kind` constants, λ learned with `seed` (the grid's is
    RANKING_SEED; another seed's ranking is saved under its own name, e.g. to see how much two seeds agree:
    `papa.runs.stability`); returns it and where it is saved."""
    if isinstance(seed, bool) or not isinstance(seed, int):  # before the model and data are loaded
        raise InputError(f"the ranking's seed must be an integer (got {seed!r}): {RANKING_SEED} for the grid's own "
                         "ranking, another one (1, 2, ...) to compare with it.")
    cfg, prof, spec = _resolve(cfg)
    check_output_dir(cfg.out_dir)  # where results go is checked before the model and data are loaded
    progress = progress and distributed.is_main()
    s = _open_session(cfg, prof, spec, progress)
    try:
        ranking = head_ranking(s, kind, progress, seed)
    finally:
        s.controller.detach()
    return ranking, existing_file(s.out / "rankings", _ranking_names(s, kind, seed))
