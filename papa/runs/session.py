"""What one grid shares, resolved once: its configuration, the model, the encoded task and its constants.

`GridConfig` says what to run, `resolve_grid` checks every input before any work, and `Session` holds the model
loaded and attached, the task encoded and the constants made so far.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from papa.core import distributed
from papa.core.artifacts import check_output_dir
from papa.core.run_folder import RunFolder
from papa.core.errors import Arg, InputError, check_one_of
from papa.core.phases import phase, timed_into
from papa.core.progress import tqdm
from papa.core.settings import Resources
from papa.core.vocabulary import (BATCH_ORDERS, BF16_STORE_PRECISIONS, CONSTANTS_KINDS, DEFAULT_BATCH_ORDER,
                                  DEFAULT_DTYPE, DEFAULT_PRECISION, DEFAULT_STEP_MODE, NONE, SPLITS)
from papa.method.architectures import is_causal, model_signature
from papa.method.constants import ConstantMatrices, data_free_constants, load_constants
from papa.method.controller import PapaController, attach
from papa.method.layout import layout_for
from papa.method.models import (DEFAULT_MODEL, canonical_model_name, check_model_name, dtype_name, is_causal_model,
                                load_model, resolve_device, resolve_dtype)
from papa.method.precision import check_precision
from papa.method.selection import ROUNDINGS, fraction_label, parse_selection
from papa.probing.feature_store import check_settings as check_feature_settings
from papa.probing.features import EncodedTask, encode_task
from papa.probing.standardize import probe_inputs_for
from papa.probing.step_modes import check_step_mode
from papa.runs.constants_cache import ConstantsSource, cached_average_constants
from papa.runs.profiles import PROFILES, Profile, get_profile
from papa.runs.results import ResultsTable
from papa.tasks.corpus import Corpus
from papa.tasks.data import check_task_files, load_examples, resolve_data_dir, subset_indices
from papa.tasks.registry import TaskSpec, check_task_fits_model, get_task


@dataclass(frozen=True)
class GridConfig:
    """What to run. None takes the profile's (`fractions`, `seeds`, `rounding`, `layout`) or the model's default
    (`probe_inputs`); `constants_corpus` "task" is the task's own data; `profile` is a name or a JSON file;
    `constants_file` is average constants `papa extract` wrote, used instead of the grid's own; `folder` is where it
    writes (a `RunFolder`, or a path made into one)."""

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
    folder: RunFolder = RunFolder(Path("artifacts/runs"))
    device: str = "cpu"
    force: bool = False
    layout: str | None = None
    dtype: str = DEFAULT_DTYPE
    probe_inputs: str | None = None
    precision: str = DEFAULT_PRECISION
    compile: bool = False
    steps: str = DEFAULT_STEP_MODE
    batch_order: str = DEFAULT_BATCH_ORDER
    constants_file: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", RunFolder.at(self.folder))  # a path given here: a user's edge

    def resolved(self) -> "GridConfig":
        """Fill profile defaults and check every value, so errors come before any work."""
        return resolve_grid(self)[0]


def resolve_grid(cfg: GridConfig, causal: bool | None = None) -> tuple[GridConfig, Profile, TaskSpec]:
    """(`cfg` with the profile's defaults filled in and every value checked, its profile, its task spec); `causal`
    None: from the model's local config (an encoder where there is none)."""
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
    check_one_of(rounding, ROUNDINGS, "rounding")
    causal = bool(is_causal_model(cfg.model)) if causal is None else causal
    layout = layout_for(causal, cfg.layout, prof.layout)
    check_task_fits_model(spec, causal, cfg.model)
    probe_inputs = probe_inputs_for(causal, cfg.probe_inputs, trains_probe=spec.trains_probe)
    _check_run_options(cfg, resolve_device(cfg.device))  # an unavailable device fails here, before any loading
    dtype = dtype_name(resolve_dtype(cfg.dtype))  # as does an unknown dtype
    if cfg.constants_file is not None and not Path(cfg.constants_file).is_file():
        given = Arg("constants_file", str(cfg.constants_file))
        raise InputError(f"no constants file at {given}: give a file `papa extract` wrote (.safetensors), or leave "
                         "it out for the grid's own average constants", advice=[given])
    # A profile file is recorded by the name it defines, never by its path.
    return replace(cfg, fractions=fractions, seeds=seeds, rounding=rounding, profile=prof.name,
                   layout=layout, dtype=dtype, probe_inputs=probe_inputs), prof, spec


def _check_run_options(cfg: GridConfig, device) -> None:
    """How the grid computes (precision, compile, step mode, batch order), checked against each other and `device`."""
    check_precision(cfg.precision, device)
    if not isinstance(cfg.compile, bool):
        raise InputError(f"compile must be True or False, got {cfg.compile!r}")
    check_step_mode(cfg.steps, device)
    if cfg.batch_order not in BATCH_ORDERS:
        fix = Arg("batch_order", DEFAULT_BATCH_ORDER)
        raise InputError(f"unknown batch order {cfg.batch_order!r}: choose one of {', '.join(BATCH_ORDERS)} (give "
                         f"{fix} for the protocol's)", advice=[fix])
    if cfg.precision in BF16_STORE_PRECISIONS and cfg.batch_order == "blocks":
        fix = Arg("batch_order", "chunks")
        raise InputError(f"precision {cfg.precision!r} keeps the stored features in bfloat16, and batch order "
                         f"'blocks' stores no training features (the backbone runs block by block): give {fix}, or "
                         "another precision", advice=[fix])


@dataclass
class Session:
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
    out: RunFolder
    data_dir: Path | None         # resolved once (papa.tasks.data.resolve_data_dir): None = the hub
    constants: dict = field(default_factory=dict)
    recorded: int = 0             # runs this session has recorded (a refusal after one keeps its phase times)

    def encode(self, examples: list) -> EncodedTask:
        """`examples` of the session's task encoded as its grid encodes them (length, layout, decoder or not)."""
        return encode_task(self.tokenizer, self.spec, examples, max_length=self.max_length,
                           model_type=self.model.config.model_type, layout=self.cfg.layout,
                           causal=is_causal(self.model))


@functools.lru_cache(maxsize=1)
def _load_model(name: str, device: str, dtype: str = DEFAULT_DTYPE):
    """`load_model`, keeping the last model (safe: every grid detaches its controller, which restores the model)."""
    return load_model(name, device=device, dtype=dtype)


def load_resolved(cfg: GridConfig,
                  splits: tuple[str, ...] = ()) -> tuple[GridConfig, Profile, TaskSpec, object, object]:
    """`cfg` resolved and checked (the output folder and the task's `splits` files included), its profile, task
    spec, and the model and tokenizer loaded; a model found causal only once loaded is resolved again."""
    check_model_name(cfg.model)  # before its config is looked for: a folder that is not there says so
    known = is_causal_model(cfg.model)
    resolved, prof, spec = resolve_grid(cfg, causal=bool(known))
    check_output_dir(resolved.folder, argument="folder")
    check_task_files(spec, splits, resolved.data_dir)  # the model would otherwise load before the data is missed
    device = distributed.process_device(resolved.device)
    check_feature_settings(resolve_device(device), resolved.batch_order)
    model, tokenizer = _load_model(resolved.model, device, resolved.dtype)
    if known is None and is_causal(model):
        resolved, prof, spec = resolve_grid(cfg, causal=True)
    return resolved, prof, spec, model, tokenizer


def open_session(cfg: GridConfig, progress: bool) -> Session:
    """Everything a grid shares: `cfg` resolved, the model loaded and attached, the data encoded."""
    resolved, prof, spec, model, tokenizer = load_resolved(cfg, splits=SPLITS)
    data_dir = resolve_data_dir(resolved.data_dir)
    train_ex = load_examples(spec, "train", data_dir, limit=prof.train_limit, sample=prof.sample)
    eval_ex = load_examples(spec, "eval", data_dir, limit=prof.eval_limit, sample=prof.sample)
    out = resolved.folder
    controller = attach(model, model_name=canonical_model_name(resolved.model))
    s = Session(resolved, prof, model, tokenizer, controller, spec, None, None, spec.hparams.max_length,
                 ResultsTable(out.results), out, data_dir)
    if resolved.constants_file is not None:  # read and checked before any data is encoded
        s.constants["average"] = given_constants(s, progress)
    s.train, s.eval = s.encode(train_ex), s.encode(eval_ex)
    return s


def constants_source(cfg: GridConfig, prof: Profile, spec: TaskSpec) -> ConstantsSource:
    """Which average constants a resolved grid uses: its constants corpus's training subset at the task's length in
    the grid's layout."""
    corpus_task = cfg.task if cfg.constants_corpus == "task" else cfg.constants_corpus
    return ConstantsSource(corpus_task, limit=prof.corpus_limit, max_length=spec.hparams.max_length,
                           layout=cfg.layout, sample=prof.sample)


def given_constants(s: Session, progress: bool) -> ConstantMatrices:
    """The constants file the grid was given (`GridConfig.constants_file`), checked against the model, the task's
    length and the grid's layout; says which file it read."""
    path = Path(s.cfg.constants_file)
    constants = load_constants(path)
    constants.check_compatible(s.controller.signature, max_length=s.max_length, layout=s.cfg.layout)
    meta = constants.metadata
    if progress:
        tqdm.write(f"constants: read {path} ({meta.num_examples} examples of {meta.corpus}, {meta.kind})")
    return constants


def recorded_corpus(s: Session, corpus: str) -> str:
    """The constants corpus a run records: the grid's `corpus`, or a given constants file's where it differs."""
    given = s.constants.get("average") if s.cfg.constants_file is not None else None
    if given is None or corpus == NONE or given.metadata.corpus == constants_source(s.cfg, s.profile, s.spec).corpus:
        return corpus
    return given.metadata.corpus


def average_constants(s: Session, progress: bool) -> ConstantMatrices:
    """The session's average constants: cached under ``<out>/constants/``."""
    return cached_average_constants(s.model, s.tokenizer, s.controller.signature,
                                    constants_source(s.cfg, s.profile, s.spec), folder=s.out,
                                    resources=Resources(s.data_dir, progress=progress), force=s.cfg.force)


def task_constants(grid: GridConfig, *, progress: bool = True) -> tuple[ConstantMatrices, object, object]:
    """The average constants the grid `grid` uses (same cache), with the model and tokenizer they belong to."""
    cfg, prof, spec, loaded, tokenizer = load_resolved(grid)
    signature = model_signature(loaded, canonical_model_name(cfg.model))
    with timed_into(cfg.folder, ran=lambda: False), phase("extraction"):
        constants = cached_average_constants(loaded, tokenizer, signature, constants_source(cfg, prof, spec),
                                             folder=cfg.folder, resources=Resources(cfg.data_dir, progress=progress),
                                             force=cfg.force)
    return constants, loaded, tokenizer


def task_constants_corpus(task: str, *, model: str = DEFAULT_MODEL, profile: str = "quick", corpus: str = "task",
                          data_dir: str | None = None, layout: str | None = None) -> tuple[ConstantsSource, Corpus]:
    """(source, corpus texts in order) of what `task_constants` with the same arguments averages over."""
    cfg, prof, spec = resolve_grid(GridConfig(task=task, model=model, profile=profile, constants_corpus=corpus,
                                          data_dir=data_dir, layout=layout))
    source = constants_source(cfg, prof, spec)
    return source, source.load(resolve_data_dir(cfg.data_dir))


def session_constants(s: Session, kind: str, progress: bool) -> ConstantMatrices:
    if kind not in s.constants:
        base = kind.removeprefix("trainable_")
        if base == "average":
            with phase("extraction"):
                s.constants[kind] = average_constants(s, progress)
        else:
            s.constants[kind] = data_free_constants(base, s.controller.signature, s.max_length, s.cfg.layout)
    return s.constants[kind]


def subset(data: EncodedTask, limit: int | None, sample: str) -> EncodedTask:
    """`limit` examples of an encoded split, picked as the profile picks them (`sample`)."""
    if limit is None or limit >= len(data):
        return data
    inputs, labels = data.batch(torch.tensor(subset_indices(len(data), limit, sample)))
    return replace(data, inputs=inputs, labels=labels)
