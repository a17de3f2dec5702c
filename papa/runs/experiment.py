"""One task's probing grid: constants kinds x selection methods x fractions x seeds, cached and resumable.

`run_grid` does, for one model and one task:

1. encode the task's train/eval subsets (the profile's sizes) in the grid's input layout (the profile's, by default
   the released code's: `papa.method.layout`) at Table 3's length;
2. get each constants kind: average constants are extracted from the task's training inputs (or another corpus,
   paper 5.3) once and saved under ``<out>/constants/``; data-free kinds are built; ``trainable_*`` kinds start from
   Toeplitz or average constants and train with the probe (Table 1's "labeled data" rows);
3. get the replacement order of each selection method; the λ ranking is learned once (paper 3.2) and saved under
   ``<out>/rankings/``;
4. for each fraction of input-dependent heads, replace the rest and train and evaluate a probe per seed. A frozen
   head configuration runs the backbone once over its training and evaluation examples; what the probes read is
   stored (papa.probing.feature_store) and the seeds train together over it (papa.probing.training.train_probes).

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

from papa.core import distributed
from papa.core.artifacts import check_output_dir
from papa.core.errors import Arg, InputError
from papa.core.phases import phase, timed_into
from papa.core.progress import tqdm
from papa.core.vocabulary import (BATCH_ORDERS, CONSTANTS_KINDS, DEFAULT_BATCH_ORDER, DEFAULT_DTYPE,
                                  DEFAULT_EXECUTION, DEFAULT_PRECISION, NONE, PAPER_PROBE_INPUTS, RANKED)
from papa.method.architectures import is_causal, model_signature
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import ConstantMatrices, data_free_constants, load_constants
from papa.method.controller import PapaController, attach
from papa.method.layout import UNRECORDED_LAYOUT, layout_for
from papa.method.precision import backbone_autocast, check_precision, compiled_backbone, matmul_precision
from papa.method.models import (DEFAULT_MODEL, canonical_model_name, dtype_name, is_causal_model, load_model,
                                resolve_device, resolve_dtype)
from papa.probing.convergence import lambda_movement
from papa.probing.feature_store import STORED, block_examples, check_settings as check_feature_settings
from papa.probing.features import EncodedTask, FeatureSource, encode_task, feature_layers
from papa.probing.checkpoint import TrainingCheckpoint
from papa.probing.ranking import LambdaTrace, learn_lambdas
from papa.probing.standardize import InputStatistics, input_statistics, probe_inputs_for, save_input_statistics
from papa.probing.training import (TrainSettings, evaluate_probe, make_probe, train_probe, train_probes,
                                   train_probes_in_blocks)
from papa.runs.constants_cache import ConstantsSource, cached_average_constants
from papa.runs.keys import PointKey, point_key
from papa.runs.lambda_curves import CURVE_EVERY, checkpoint_path, curve_path, save_curve
from papa.runs.names import existing_file, ranking_filenames
from papa.runs.predictions_store import save_run_predictions
from papa.runs.profiles import PROFILES, Profile, get_profile
from papa.runs.results import ResultRow, ResultsTable, run_id
from papa.tasks.corpus import Corpus
from papa.tasks.data import disjoint_part, half_part, load_examples, resolve_data_dir, subset_indices
from papa.method.rankings import HeadRanking, load_ranking
from papa.method.selection import (ROUNDINGS, fraction_label, num_input_dependent, parse_selection, replaced_heads,
                                   replacement_order)
from papa.tasks.registry import TaskSpec, check_task_fits_model, get_task

RANKING_SEED = 0  # the λ ranking is a pre-processing step (paper 3.2): one ranking serves every probe seed


@dataclass(frozen=True)
class GridConfig:
    """What to run. `fractions`/`seeds` None take the profile's (an empty list is an error); `constants_corpus`
    "task" = the task's own data; `profile` is a profile name or a JSON profile file (papa.runs.profiles); `layout` None
    takes the profile's (papa.method.layout); `dtype` is the model's (float32, bfloat16, float16); `probe_inputs`
    None takes the model's default (raw for encoders, as the paper; standardized for causal LMs:
    papa.probing.standardize); `precision` and `compile` say how the backbone runs (papa.method.precision: float32
    and eager, the protocol's, by default); `batch_order` the order of the probes' training batches (`BATCH_ORDERS`:
    "blocks" for features that fit no store, papa.probing.training.train_probes_in_blocks); `constants_file` the
    average constants to use (a file `papa extract` wrote for this model, length and layout) instead of those the grid
    extracts (`constants_source`); runs on a file over another corpus record that corpus."""

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
    precision: str = DEFAULT_PRECISION
    compile: bool = False
    batch_order: str = DEFAULT_BATCH_ORDER
    constants_file: str | None = None

    def resolved(self) -> "GridConfig":
        """Fill profile defaults and check every value, so errors come before any work."""
        return _resolve(self)[0]


def _resolve(cfg: GridConfig, causal: bool | None = None) -> tuple[GridConfig, Profile, TaskSpec]:
    """`cfg` with the profile's defaults filled in and every value checked, with the profile and task spec it was
    resolved with: a grid resolves its inputs once and passes them down (a profile file is read once). `causal`
    None: from the model's local config (a model whose config is not on this machine counts as an encoder until it
    is loaded: `_open_grid`)."""
    prof = get_profile(cfg.profile).for_task(cfg.task)  # the task's own sizes, where the profile gives it some
    spec = get_task(cfg.task)
    if cfg.constants_corpus != "task":
        get_task(cfg.constants_corpus)
    for kind in cfg.constants:
        if kind not in CONSTANTS_KINDS:
            raise ValueError(f"unknown constants kind {kind!r}; choose from {', '.join(CONSTANTS_KINDS)}")
    for method in cfg.selections:
        selection = parse_selection(method)
        if selection.profile is not None and selection.profile not in PROFILES:
            raise InputError(f"selection {method!r} reads the λ ranking a profile named {selection.profile!r} learned, "
                             f"and there is no such profile: name one of {', '.join(PROFILES)} (e.g. "
                             f"{selection.method}@full), or another draw (seed<k>, part<k>).")
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
    causal = bool(is_causal_model(cfg.model)) if causal is None else causal
    layout = layout_for(causal, cfg.layout, prof.layout)
    check_task_fits_model(spec, causal, cfg.model)
    probe_inputs = probe_inputs_for(causal, cfg.probe_inputs, trains_probe=spec.trains_probe)
    device = resolve_device(cfg.device)  # an unavailable device fails here, before the model and data are loaded
    check_precision(cfg.precision, device)
    if not isinstance(cfg.compile, bool):
        raise InputError(f"compile must be True or False, got {cfg.compile!r}")
    if cfg.batch_order not in BATCH_ORDERS:
        fix = Arg("batch_order", DEFAULT_BATCH_ORDER)
        raise InputError(f"unknown batch order {cfg.batch_order!r}: choose one of {', '.join(BATCH_ORDERS)} (give "
                         f"{fix} for the protocol's)", advice=[fix])
    dtype = dtype_name(resolve_dtype(cfg.dtype))  # as does an unknown dtype
    if cfg.constants_file is not None and not Path(cfg.constants_file).is_file():
        given = Arg("constants_file", str(cfg.constants_file))
        raise InputError(f"no constants file at {given}: give a file `papa extract` wrote (.safetensors), or leave "
                         "it out for the grid's own average constants", advice=[given])
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
    recorded: int = 0             # runs this session has recorded (a refusal after one keeps its phase times)

    def encode(self, examples: list) -> EncodedTask:
        """`examples` of the session's task encoded as its grid encodes them (length, layout, decoder or not)."""
        return encode_task(self.tokenizer, self.spec, examples, max_length=self.max_length,
                           model_type=self.model.config.model_type, layout=self.cfg.layout,
                           causal=is_causal(self.model))


def run_grid(cfg: GridConfig, *, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) the grid; returns its rows from the results table."""
    progress = progress and distributed.is_main()
    s = _open_grid(cfg, progress)
    cfg = s.cfg
    try:
        with timed_into(s.out, ran=lambda: s.recorded > 0):
            total_heads = s.controller.num_layers * s.controller.num_heads
            for label in cfg.fractions:  # a fraction that is no whole number of heads fails before the first run
                num_input_dependent(label, total_heads, cfg.rounding)
            _check_saved_rankings(s)
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


@functools.lru_cache(maxsize=1)
def _load_model(name: str, device: str, dtype: str = DEFAULT_DTYPE):
    """`load_model`, keeping the last model: grids of one model over many tasks load it once. Safe to share because
    every grid detaches its controller, which restores the model exactly."""
    return load_model(name, device=device, dtype=dtype)


def _load_resolved(cfg: GridConfig) -> tuple[GridConfig, Profile, TaskSpec, object, object]:
    """`cfg` resolved (every input checked before the model and data are loaded, where results go included), with
    its profile, task spec, and the model and tokenizer loaded.

    A model whose config was not on this machine before loading (a hub id not yet cached) was resolved as an
    encoder; once loaded, the model itself says whether it is causal (`papa.method.architectures.is_causal`), and
    a causal LM is resolved again: it gets a decoder's defaults (layout, probe inputs) as one whose config is here.
    """
    known = is_causal_model(cfg.model)
    resolved, prof, spec = _resolve(cfg, causal=bool(known))
    check_output_dir(resolved.out_dir)
    device = distributed.process_device(resolved.device)
    check_feature_settings(resolve_device(device))
    model, tokenizer = _load_model(resolved.model, device, resolved.dtype)
    if known is None and is_causal(model):
        resolved, prof, spec = _resolve(cfg, causal=True)
    return resolved, prof, spec, model, tokenizer


def _open_grid(cfg: GridConfig, progress: bool) -> _Session:
    """Everything a grid shares: `cfg` resolved, the model loaded and attached, the data encoded."""
    resolved, prof, spec, model, tokenizer = _load_resolved(cfg)
    data_dir = resolve_data_dir(resolved.data_dir)
    train_ex = load_examples(spec, "train", data_dir, limit=prof.train_limit, sample=prof.sample)
    eval_ex = load_examples(spec, "eval", data_dir, limit=prof.eval_limit, sample=prof.sample)
    out = Path(resolved.out_dir)
    controller = attach(model, model_name=canonical_model_name(resolved.model))
    s = _Session(resolved, prof, model, tokenizer, controller, spec, None, None, spec.hparams.max_length,
                 ResultsTable(out / "results.csv"), out, data_dir)
    if resolved.constants_file is not None:  # read and checked before any data is encoded
        s.constants["average"] = given_constants(s, progress)
    s.train, s.eval = s.encode(train_ex), s.encode(eval_ex)
    return s


# ---- artifacts ---------------------------------------------------------------------------------------------------

def constants_source(cfg: GridConfig, prof: Profile, spec: TaskSpec) -> ConstantsSource:
    """Which average constants a resolved grid uses: its constants corpus's training subset (the task's own, or
    `constants_corpus`'s: paper 5.3), at the task's length (Table 3) in the grid's layout."""
    corpus_task = cfg.task if cfg.constants_corpus == "task" else cfg.constants_corpus
    return ConstantsSource(corpus_task, limit=prof.corpus_limit, max_length=spec.hparams.max_length,
                           layout=cfg.layout, sample=prof.sample)


def given_constants(s: _Session, progress: bool) -> ConstantMatrices:
    """The constants file the grid was given (`GridConfig.constants_file`), checked against the model, the task's
    length and the grid's layout; says which file it read."""
    path = Path(s.cfg.constants_file)
    constants = load_constants(path)
    constants.check_compatible(s.controller.signature, max_length=s.max_length, layout=s.cfg.layout)
    meta = constants.metadata
    if progress:
        tqdm.write(f"constants: read {path} ({meta.num_examples} examples of {meta.corpus}, {meta.kind})")
    return constants


def recorded_corpus(s: _Session, corpus: str) -> str:
    """The constants corpus a run records: the grid's (`corpus`: "task", a task, "none"), or the corpus of a given
    constants file where that is not the grid's own, so that such runs never pass for the protocol's."""
    given = s.constants.get("average") if s.cfg.constants_file is not None else None
    if given is None or corpus == NONE or given.metadata.corpus == constants_source(s.cfg, s.profile, s.spec).corpus:
        return corpus
    return given.metadata.corpus


def average_constants(s: _Session, progress: bool) -> ConstantMatrices:
    """The session's average constants: cached under ``<out>/constants/``."""
    return cached_average_constants(s.model, s.tokenizer, s.controller.signature,
                                    constants_source(s.cfg, s.profile, s.spec), out_dir=s.out, data_dir=s.data_dir,
                                    force=s.cfg.force, progress=progress, given=s.cfg.model)


def task_constants(task: str, *, model: str = DEFAULT_MODEL, profile: str = "quick", out_dir: str = "artifacts/runs",
                   corpus: str = "task", data_dir: str | None = None, device: str = "cpu", force: bool = False,
                   layout: str | None = None, dtype: str = DEFAULT_DTYPE, progress: bool = True
                   ) -> tuple[ConstantMatrices, object, object]:
    """The average constants a grid on `task` uses (same cache), with the model and tokenizer they belong to;
    `layout` None takes the profile's (the grid's resolution: `GridConfig.resolved`)."""
    cfg, prof, spec, loaded, tokenizer = _load_resolved(GridConfig(
        task=task, model=model, profile=profile, out_dir=out_dir, constants_corpus=corpus, data_dir=data_dir,
        device=device, force=force, layout=layout, dtype=dtype))
    signature = model_signature(loaded, canonical_model_name(cfg.model))
    with timed_into(cfg.out_dir, ran=lambda: False), phase("extraction"):
        constants = cached_average_constants(loaded, tokenizer, signature, constants_source(cfg, prof, spec),
                                             out_dir=cfg.out_dir, data_dir=resolve_data_dir(cfg.data_dir),
                                             force=cfg.force, progress=progress, given=cfg.model)
    return constants, loaded, tokenizer


def task_constants_corpus(task: str, *, model: str = DEFAULT_MODEL, profile: str = "quick", corpus: str = "task",
                          data_dir: str | None = None, layout: str | None = None) -> tuple[ConstantsSource, Corpus]:
    """What the average constants of `task_constants` (same arguments) are averaged over: their source (length,
    layout, corpus task, its token rule) and the corpus's texts in order, for work that reads that corpus again
    (`papa.paper.pattern_intervals`). A decoder is known by its config on this machine (there once
    `task_constants` has loaded it)."""
    cfg, prof, spec = _resolve(GridConfig(task=task, model=model, profile=profile, constants_corpus=corpus,
                                          data_dir=data_dir, layout=layout))
    source = constants_source(cfg, prof, spec)
    return source, source.load(resolve_data_dir(cfg.data_dir))


def _constants(s: _Session, kind: str, progress: bool) -> ConstantMatrices:
    if kind not in s.constants:
        base = kind.removeprefix("trainable_")
        if base == "average":
            with phase("extraction"):
                s.constants[kind] = average_constants(s, progress)
        else:
            s.constants[kind] = data_free_constants(base, s.controller.signature, s.max_length, s.cfg.layout)
    return s.constants[kind]


def head_ranking(s: _Session, kind: str, progress: bool, seed: int = RANKING_SEED, *, part: int = 0,
                 profile: str | None = None) -> HeadRanking:
    """The λ ranking for `kind`'s constants, λ learned with `seed` (the grid's: RANKING_SEED) on training part `part`
    (0: the grid's subset; k ≥ 1: the k-th subset of the same size disjoint from it, `papa.tasks.data.
    disjoint_part`): loaded if saved (and learned with the profile's settings), else learned and saved. It records
    how far λ moved (`papa.probing.convergence.lambda_movement`), the optimizer steps and λ's learning rate, and
    its learning curve is saved beside it (`papa.runs.lambda_curves`). With `profile` (another than the grid's) the
    ranking that profile learned is read, never learned here."""
    if profile is not None and profile != s.cfg.profile:
        return _other_profile_ranking(s, kind, seed, profile)
    cfg, sig = s.cfg, s.controller.signature
    names = _ranking_names(s, kind, seed, part)
    path = existing_file(s.out / "rankings", names)  # a file named by an older version is read too
    prof = s.profile
    rank_data = _subset(s.train, prof.rank_limit, prof.sample)
    if part:
        rank_data = _disjoint_rank_data(s, len(rank_data), part)
    settings = TrainSettings.from_task(s.spec, epochs=prof.rank_epochs)
    lambda_lr = prof.rank_lr or settings.learning_rate
    wanted = {"examples": len(rank_data), "epochs": settings.epochs, "learning_rate": settings.learning_rate,
              "lambda_learning_rate": lambda_lr, "probe_inputs": cfg.probe_inputs}
    if distributed.main_decides(path.is_file() and not cfg.force):
        ranking = _checked_ranking(s, path)
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
    target = path.with_name(names[0])
    trace = LambdaTrace(every=CURVE_EVERY)
    checkpoint = None
    if distributed.world_size() == 1:  # one process owns the file; distributed λ learning starts over
        identity = {"ranking": names[0], "task": cfg.task, "seed": seed, **wanted}
        checkpoint = TrainingCheckpoint(checkpoint_path(target), identity)
        if cfg.force:
            checkpoint.remove()
        elif checkpoint.path.is_file() and progress:
            tqdm.write(f"λ learning resumes from {checkpoint.path}")
    with phase("lambda"):
        lambdas = learn_lambdas(s.controller, s.spec, rank_data, settings, seed=seed, lambda_lr=prof.rank_lr,
                                progress=progress, trace=trace, standardize=cfg.probe_inputs != PAPER_PROBE_INPUTS,
                                checkpoint=checkpoint)
    ranking = HeadRanking.from_lambdas(
        lambdas, signature=sig, task=cfg.task, constants=kind, constants_corpus=cfg.constants_corpus, seed=seed,
        max_length=s.max_length, layout=cfg.layout, examples=len(rank_data), epochs=settings.epochs,
        learning_rate=settings.learning_rate, lambda_learning_rate=lambda_lr, steps=trace.total_steps,
        lambda_movement=lambda_movement(lambdas), profile=cfg.profile, dtype=cfg.dtype,
        probe_inputs=cfg.probe_inputs)
    if distributed.is_main():
        ranking.save(target)
        save_curve(curve_path(target), trace, names[0])
        if checkpoint is not None:
            checkpoint.remove()  # after the ranking is saved: a kill in between resumes at the last step
    return ranking


def _ranking_names(s: _Session, kind: str, seed: int = RANKING_SEED, part: int = 0,
                   profile: str | None = None) -> list[str]:
    """The file names of the session's λ ranking with `kind` constants, λ learned with `seed` on training part `part`
    by `profile` (None: the grid's): the current one, then an older version's (only a seed other than the grid's is
    named)."""
    cfg = s.cfg
    # a ranking learned with a given constants file over another corpus is that corpus's, not the grid's
    return ranking_filenames(s.controller.signature.model_name, cfg.task, kind,
                             recorded_corpus(s, cfg.constants_corpus), s.max_length,
                             profile or cfg.profile, cfg.layout, cfg.dtype, seed=seed, probe_inputs=cfg.probe_inputs,
                             part=part, given=cfg.model)


def _other_profile_ranking(s: _Session, kind: str, seed: int, profile: str) -> HeadRanking:
    """The ranking `profile` learned for the session's model, task and settings: read, checked, never learned."""
    get_profile(profile)  # an unknown profile says so, naming the known ones
    path = existing_file(s.out / "rankings", _ranking_names(s, kind, seed, profile=profile))
    if not path.is_file():
        command = f"papa rank --task {s.cfg.task} --profile {profile} --out {s.out}"
        raise InputError(f"the selection reads the λ ranking the {profile!r} profile learns, and there is none at "
                         f"{path}: learn it first (`{command}`), with this grid's model and layout.")
    return _checked_ranking(s, path)


def _checked_ranking(s: _Session, path: Path) -> HeadRanking:
    """The ranking saved at `path`, read and checked against the session's model, length and layout."""
    sig = s.controller.signature
    ranking = load_ranking(path)
    ranking.check_compatible(sig.num_layers, sig.num_heads, sig.model_name, signature=sig, max_length=s.max_length,
                             layout=s.cfg.layout)
    return ranking


def _check_saved_rankings(s: _Session) -> None:
    """Every saved λ ranking the grid will read, read and checked before its first run, so that a corrupt or
    mismatched file (or another profile's ranking not learned yet) is refused before any work, not when its point
    comes. Rankings still to be learned are not checked here; `--force` learns them all again."""
    for kind in s.cfg.constants:
        for method in s.cfg.selections:
            selection = parse_selection(method)
            if selection.method not in RANKED:
                continue
            if selection.profile not in (None, s.cfg.profile):
                _other_profile_ranking(s, kind, selection.seed, selection.profile)
                continue
            path = existing_file(s.out / "rankings", _ranking_names(s, kind, selection.seed, selection.part))
            if path.is_file() and not s.cfg.force:
                _checked_ranking(s, path)


def _disjoint_rank_data(s: _Session, size: int, part: int) -> EncodedTask:
    """`size` training examples of disjoint part `part`: none of them in the grid's training subset (from which
    part 0, its own ranking's, is drawn) nor in another part. Where the grid trains on the whole split and λ learns
    on all of it (the paper's protocol, the full profile), part 1 or 2 is one of two disjoint halves of the split
    (`papa.tasks.data.half_part`)."""
    every = load_examples(s.spec, "train", s.data_dir)
    taken = subset_indices(len(every), s.profile.train_limit, s.profile.sample)
    if len(taken) == len(every) and size == len(every):
        return s.encode([every[i] for i in half_part(len(every), part)])
    return s.encode([every[i] for i in disjoint_part(len(every), taken, size, part)])


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
    selection = parse_selection(method)
    if selection.method in RANKED:
        return head_ranking(s, kind, progress, selection.seed, part=selection.part,
                            profile=selection.profile).order_for(selection.method)
    return replacement_order(selection.method, L, H, seed=selection.seed)  # random: permutation 0 unless a variant


# ---- one point of the grid ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Point:
    """One grid point as it runs and is recorded: its key, its run configuration without the seed (what its run ids
    hash), and what its probes train on."""

    key: PointKey
    kind: str                     # the constants kind the point runs (``trainable_*`` included)
    method: str
    label: str
    config: dict
    train: EncodedTask
    epochs: int
    trainable: bool               # its constants train with the probe


def _run_point(s: _Session, kind: str, method: str, label: str, progress: bool, bar) -> list[str]:
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
                s.controller.set_constants(_constants(s, kind, progress))  # back to the untrained initial constants
    return list(ids.values())


def _point(s: _Session, kind: str, method: str, label: str) -> _Point:
    """Point (`kind`, `method`, `label`) of the session's grid, keyed as the job lister keys it (papa.runs.keys)."""
    cfg, ctrl, prof = s.cfg, s.controller, s.profile
    key = point_key(kind, method, cfg.constants_corpus, label, total_heads=ctrl.num_layers * ctrl.num_heads,
                    rounding=cfg.rounding)
    selection = parse_selection(key.selection) if key.selection != NONE else None
    ranked = selection is not None and selection.method in RANKED
    if ranked and selection.profile not in (None, cfg.profile):  # the ranking another profile learned
        prof_rank = get_profile(selection.profile).for_task(cfg.task).ranking_key()
    else:
        prof_rank = prof.ranking_key()
    config = dict(model=ctrl.signature.model_name, task=cfg.task, constants=key.constants,
                  constants_corpus=recorded_corpus(s, key.constants_corpus), selection=key.selection, fraction=label,
                  rounding=cfg.rounding, profile=cfg.profile, train_limit=prof.train_limit,
                  eval_limit=prof.eval_limit, corpus_limit=None if key.constants_corpus == NONE else prof.corpus_limit,
                  epochs=prof.epochs, rank=prof_rank if ranked else None)
    if prof.sample != "first":  # only then, so that the ids of runs on first-N subsets stay as they were
        config["sample"] = prof.sample
    if cfg.layout != UNRECORDED_LAYOUT:  # likewise: runs made before layouts were recorded keep their ids
        config["layout"] = cfg.layout
    if cfg.dtype != DEFAULT_DTYPE:  # and those made before dtypes were (all float32)
        config["dtype"] = cfg.dtype
    if cfg.probe_inputs != PAPER_PROBE_INPUTS:  # and those of the paper's probe, which reads its inputs raw
        config["probe_inputs"] = cfg.probe_inputs
    if cfg.precision != DEFAULT_PRECISION:  # and those run in float32, eagerly (all before these options)
        config["precision"] = cfg.precision
    if cfg.compile:
        config["execution"] = "compiled"
    if cfg.batch_order != DEFAULT_BATCH_ORDER and s.spec.trains_probe and not (kind.startswith("trainable_")
                                                                              and not key.keeps_all):
        config["batch_order"] = cfg.batch_order  # trained constants stream their batches either way
    trainable = kind.startswith("trainable_") and not key.keeps_all
    train, epochs = s.train, prof.epochs
    if trainable and (prof.trainable_limit, prof.trainable_epochs) != (None, None):
        # Trained constants run the backbone every step, so a profile may size them apart; recorded only then, so
        # that the ids of runs made before these sizes existed stay as they were.
        train = _subset(s.train, prof.trainable_limit, prof.sample)
        epochs = prof.trainable_epochs or epochs
        config.update(train_limit=prof.trainable_limit or prof.train_limit, epochs=epochs)
    return _Point(key, kind, method, label, config, train, epochs, trainable)


def _set_heads(s: _Session, point: _Point, progress: bool) -> None:
    """Replace the point's heads: none at fraction 1; else its constants, in every head (fraction 0) or in the
    first heads of its method's order."""
    ctrl, key = s.controller, point.key
    ctrl.keep_all()
    if key.keeps_all:
        return
    ctrl.set_constants(_constants(s, point.kind, progress), trainable=point.trainable)
    if key.replaces_all:
        ctrl.replace(None)
        return
    order = _order(s, point.kind, point.method, progress)
    ctrl.replace(replaced_heads(order, ctrl.num_layers * ctrl.num_heads - key.n_input_dependent, ctrl.num_layers,
                                ctrl.num_heads))


def _run_seeds(s: _Session, point: _Point, seeds: list[int], ids: dict[int, str], progress: bool, bar) -> None:
    """Train and evaluate the point's probe with each of `seeds` and record each run (predictions, then its row).
    Frozen heads: the backbone runs once over the point's examples and the seeds train together on what it gave
    (`_run_frozen`); trained constants restart from their initial values for each seed (`_run_trained`)."""
    # Replaced heads skip their Q/K projections (paper 3.4); the outputs are the same, bit for bit on the CPU.
    with nullcontext() if point.key.keeps_all else query_key_dropped_while(s.controller, where_possible=True):
        (_run_trained if point.trainable else _run_frozen)(s, point, seeds, ids, progress, bar)


def _run_frozen(s: _Session, point: _Point, seeds: list[int], ids: dict[int, str], progress: bool, bar) -> None:
    """Every seed of a frozen point: one backbone pass over its training and evaluation examples, stored
    (papa.probing.feature_store), then the seeds' probes trained together over the store (`train_probes`: each as
    it would be alone)."""
    cfg, key = s.cfg, point.key
    settings = TrainSettings.from_task(s.spec, epochs=point.epochs)
    training = s.spec.trains_probe  # LM with the model's own head trains nothing: no training features
    blocks = training and point.config.get("batch_order") == "blocks"
    standardize = cfg.probe_inputs != PAPER_PROBE_INPUTS
    folder = s.out / "features"
    train_src = eval_src = None
    try:
        with _autocast(s), phase("features"):
            if training and (standardize or not blocks):  # in blocks, only the statistics read it: streamed
                train_src = FeatureSource(s.model, point.train, trainable_backbone=False, progress=progress,
                                          desc=f"features {point.label}", folder=folder,
                                          store="backbone" if blocks else None)
            eval_src = FeatureSource(s.model, s.eval, trainable_backbone=False, progress=progress,
                                     desc="eval features", folder=folder)
        start = time.perf_counter()
        with phase("probe training"):
            probes = [_fresh_probe(s, seed) for seed in seeds]
            if standardize:
                statistics = _point_statistics(s, probes[0], train_src, point.config)
                for probe in probes:
                    probe.set_input_statistics(statistics)
            desc = f"{cfg.task} {key.constants}/{key.selection} {point.label} seeds {','.join(map(str, seeds))}"
            if blocks:
                with _autocast(s):  # the backbone runs here, block by block
                    train_probes_in_blocks(probes, s.spec.kind, s.model, point.train, settings, seeds=seeds,
                                           block_examples=_block_examples(s, point, settings), progress=progress,
                                           desc=desc)
            elif training:
                train_probes(probes, s.spec.kind, train_src, settings, seeds=seeds, progress=progress, desc=desc)
        with phase("evaluation"):
            # nothing trains (LM with the model's own head): every seed scores the same model
            scored = probes if training else probes[:1]
            outcomes = [evaluate_probe(probe, s.spec, eval_src, return_predictions=True) for probe in scored]
            outcomes = outcomes if training else outcomes * len(seeds)
        seconds = (time.perf_counter() - start) / len(seeds)  # the seeds ran together: each gets an equal share
        for seed, (value, predictions) in zip(seeds, outcomes):
            if distributed.is_main():  # every process trained the same probes; one writes them down
                _record(s, point, seed, ids[seed], value, predictions, seconds=seconds, epochs=settings.epochs,
                        store="blocks" if blocks else (train_src or eval_src).placement)
            bar.update(1)
    finally:
        for source in (train_src, eval_src):
            if source is not None:
                source.close()


def _block_examples(s: _Session, point: _Point, settings: TrainSettings) -> int:
    """Examples per block of a point trained in blocks: as many whole batches as the memory budget holds."""
    model = s.model
    layers = feature_layers(model, point.train.last_layer_only)
    return block_examples(layers, s.max_length, model.config.hidden_size, s.controller.theta.device,
                          batch_size=settings.batch_size, total=len(point.train))


def _run_trained(s: _Session, point: _Point, seeds: list[int], ids: dict[int, str], progress: bool, bar) -> None:
    """Every seed of a point whose constants train with the probe: the backbone runs every step, so each seed runs
    alone, from the initial constants."""
    cfg, ctrl, key = s.cfg, s.controller, point.key
    initial = ctrl.constants.detach().clone()
    settings = TrainSettings.from_task(s.spec, epochs=point.epochs)
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
                                     folder=s.out / "features")
        try:
            with phase("evaluation"):
                value, predictions = evaluate_probe(probe, s.spec, eval_src, return_predictions=True)
        finally:
            eval_src.close()
        if distributed.is_main():
            _record(s, point, seed, ids[seed], value, predictions, seconds=time.perf_counter() - start,
                    epochs=settings.epochs, store="backbone")
        bar.update(1)


def _autocast(s: _Session):
    """The autocast context the session's backbone runs its forward passes in (papa.method.precision)."""
    return backbone_autocast(s.cfg.precision, s.controller.theta.device)


def _fresh_probe(s: _Session, seed: int):
    """The probe `seed` starts from (its initial weights), on the model's device."""
    torch.manual_seed(seed)
    return make_probe(s.spec, s.model, s.max_length, len(s.tokenizer)).to(s.controller.theta.device)


def _record(s: _Session, point: _Point, seed: int, run: str, value: float, predictions, *, seconds: float,
            epochs: int, store: str) -> None:
    """One run's predictions file, then its row: a row in the table always has its predictions."""
    cfg, key = s.cfg, point.key
    recorded = dict(model=point.config["model"], task=cfg.task, constants=key.constants,
                    constants_corpus=point.config["constants_corpus"], selection=key.selection, fraction=point.label,
                    seed=seed, profile=cfg.profile, layout=cfg.layout, dtype=cfg.dtype, probe_inputs=cfg.probe_inputs,
                    precision=cfg.precision, execution=point.config.get("execution", DEFAULT_EXECUTION),
                    batch_order=point.config.get("batch_order", DEFAULT_BATCH_ORDER))
    save_run_predictions(s.out, run, predictions, metric=s.spec.metric, value=value, **recorded)
    s.recorded += 1
    s.table.append([ResultRow(
        **recorded, n_input_dependent=key.n_input_dependent, metric=s.spec.metric, value=value, runtime_s=seconds,
        run_id=run, extra={"train_examples": len(point.train), "eval_examples": len(s.eval), "epochs": epochs,
                           "features_cached": store in STORED, "feature_store": store})])


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


def learn_ranking(cfg: GridConfig, kind: str = "average", *, seed: int = RANKING_SEED, part: int = 0,
                  progress: bool = True) -> tuple[HeadRanking, Path]:
    """Learn (or load) the λ ranking of `cfg`'s task with `kind` constants, λ learned with `seed` (the grid's is
    RANKING_SEED; another seed's ranking is saved under its own name, e.g. to see how much two seeds agree:
    `papa.runs.stability`) on training part `part` (0: the grid's subset; k ≥ 1: the k-th disjoint one, saved under
    its own name); returns it and where it is saved. An interrupted λ learning resumes where it stopped."""
    for name, value, meaning in (("seed", seed, f"{RANKING_SEED} for the grid's own ranking, another one (1, 2, "
                                                "...) to compare with it"),
                                 ("part", part, "0 for the grid's own training subset, 1, 2, ... for disjoint ones")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:  # before the model and data load
            raise InputError(f"the ranking's {name} must be a whole number (got {value!r}): {meaning}.")
    progress = progress and distributed.is_main()
    s = _open_grid(cfg, progress)
    try:
        with timed_into(s.out, ran=lambda: False):
            ranking = head_ranking(s, kind, progress, seed, part=part)
    finally:
        s.controller.detach()
    return ranking, existing_file(s.out / "rankings", _ranking_names(s, kind, seed, part))
