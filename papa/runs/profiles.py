"""Run profiles: how much data and which grid a reproduction uses. Recorded in every result row.

``quick`` is a smoke run, ``cpu`` the paper's protocol cut to a few hours on 2 CPU cores, ``full`` the paper's
settings. Other profiles come from a JSON file passed where a profile name goes::

    {"name": "tiny", "base": "quick", "train_limit": 32, "eval_limit": 32, "epochs": 1, "seeds": [0, 1]}

Fields left out come from ``base`` (default ``quick``); a size set at the top holds for every task, ``"tasks"`` sets
one task's. The file's ``name`` is recorded in rows, run ids and file names.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from papa.core.errors import check_one_of
from papa.core.vocabulary import LAYOUTS, PAPER_FRACTIONS, REPRODUCTION_LAYOUT, ROUNDINGS, SAMPLES
from papa.tasks.registry import TASKS
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


#: The sizes a profile may set, profile-wide and per task (`Profile.tasks`): how much data and how many epochs.
SIZE_FIELDS = ("train_limit", "eval_limit", "corpus_limit", "rank_limit", "rank_epochs", "epochs",
               "trainable_limit", "trainable_epochs")
#: Learning rates a profile may set, profile-wide and per task: positive numbers, or None for Table 3's.
RATE_FIELDS = ("rank_lr",)
#: What `Profile.tasks` may set for one task.
TASK_FIELDS = SIZE_FIELDS + RATE_FIELDS


@dataclass(frozen=True)
class Profile:
    """Data sizes and grid of one reproduction profile (None = everything / Table 3).

    `tasks` gives some tasks other sizes (kept as sorted pairs, hashable; `for_task`); `curves` maps tasks to the
    training-set sizes of a learning curve; `trainable_*` size the runs whose constants train (None: as the others);
    `look_limit` and `timing_repeats` size only what the notebooks show beside the grids.
    """

    name: str
    train_limit: int | None
    eval_limit: int | None
    corpus_limit: int | None      # examples averaged into the constants
    rank_limit: int | None        # examples for learning λ
    rank_epochs: int | None       # epochs for learning λ (None: Table 3)
    epochs: int | None            # probe epochs (None: Table 3)
    seeds: tuple[int, ...] = (0, 1, 2)
    fractions: tuple[str, ...] = PAPER_FRACTIONS
    rounding: str = "down"
    sample: str = "first"         # how limits pick examples: the first ones or a fixed random subset (papa.tasks.data)
    layout: str = REPRODUCTION_LAYOUT  # input layout of every run (papa.method.layout)
    trainable_limit: int | None = None
    trainable_epochs: int | None = None
    tasks: tuple[tuple[str, tuple[tuple[str, int | float | None], ...]], ...] = ()
    curves: tuple[tuple[str, tuple[int | None, ...]], ...] = ()
    rank_lr: float | None = None  # λ's learning rate (None: the probe's, Table 3)
    look_limit: int | None = None  # examples per split the notebooks' looks at the data read (None: whole splits)
    timing_repeats: int = 3       # timed repeats of the notebooks' looks at speed (benchmarks/ measures with care)

    def __post_init__(self) -> None:
        # Checked here so that a bad profile fails when it is made, not after the first runs of a grid.
        where = f"profile {self.name!r}"
        for name in (*SIZE_FIELDS, "look_limit"):
            _check_size(where, name, getattr(self, name))
        repeats = self.timing_repeats
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"{where}: timing_repeats must be a positive integer, got {repeats!r}.")
        for name in RATE_FIELDS:
            object.__setattr__(self, name, _check_rate(where, name, getattr(self, name)))
        object.__setattr__(self, "tasks", _task_sizes(where, self.tasks))
        object.__setattr__(self, "curves", _curve_sizes(where, self.curves))
        seeds = tuple(self.seeds)
        if not seeds:
            raise ValueError(f"{where}: the seed list is empty: give at least one seed, e.g. [0, 1, 2].")
        if any(isinstance(v, bool) or not isinstance(v, int) for v in seeds):
            raise ValueError(f"{where}: seeds must be integers, got {list(seeds)}.")
        fractions = tuple(str(f) for f in self.fractions)
        if not fractions:
            raise ValueError(f"{where}: the fraction list is empty: give e.g. [\"1\", \"1/2\", \"0\"].")
        check_one_of(self.sample, SAMPLES, "sample", where=where)
        check_one_of(self.layout, LAYOUTS, "layout", where=where)
        check_one_of(self.rounding, ROUNDINGS, "rounding", where=where)
        object.__setattr__(self, "seeds", seeds)
        object.__setattr__(self, "fractions", fractions)

    def task_sizes(self, task: str) -> dict[str, int | float | None]:
        """The sizes (and λ learning rate) `task` has in this profile that differ from the profile-wide ones."""
        return dict(dict(self.tasks).get(task, ()))

    def for_task(self, task: str) -> "Profile":
        """This profile with `task`'s own sizes in place of the profile-wide ones (same name)."""
        return replace(self, **self.task_sizes(task), tasks=())

    def sizes_text(self) -> str:
        """The training sizes in words, e.g. "2000 training examples per task (cola: 3000, mrpc: 1000)"."""
        amount = lambda v: "all" if v is None else str(v)  # noqa: E731
        own = [f"{task}: {amount(dict(sizes)['train_limit'])}" for task, sizes in self.tasks
               if "train_limit" in dict(sizes)]
        text = f"{amount(self.train_limit).capitalize()} training examples per task"
        return f"{text} ({', '.join(own)})" if own else text

    def curve_sizes(self, task: str) -> tuple[int | None, ...]:
        """The training-set sizes of `task`'s learning curve in this profile (none: no curve)."""
        return dict(self.curves).get(task, ())

    def curve_profile(self, task: str, size: int | None) -> "Profile":
        """The registered profile ``<name>-<task>-n<size>`` (or ``-all``) of one point of `task`'s learning curve;
        this profile itself at its own training size."""
        if size == self.for_task(task).train_limit:
            return self
        name = f"{self.name}-{task}-{'all' if size is None else f'n{size}'}"
        return register_profile(replace(self.for_task(task), name=name, train_limit=size, curves=()))


def _check_size(where: str, name: str, v) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise ValueError(f"{where}: {name} must be a positive integer or null (= everything / Table 3), got {v!r}.")


def _check_rate(where: str, name: str, v) -> float | None:
    """`v` as a float if it is a positive finite number or None (= Table 3's rate); else a clear error."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{where}: {name} must be a positive number (a learning rate, e.g. 0.01) or null (= the "
                         f"probe's Table 3 rate), got {v!r}.")
    return float(v)


def _curve_sizes(where: str, curves) -> tuple:
    """`curves` (a mapping task -> sizes, or the pairs it is kept as) checked and kept as sorted pairs."""
    out = []
    for task, sizes in (curves.items() if isinstance(curves, Mapping) else curves):
        if task not in TASKS:
            raise ValueError(f"{where}: unknown task {task!r} in its learning curves; tasks: {', '.join(TASKS)}.")
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
            raise ValueError(f"{where}: the learning curve of {task!r} needs a list of training-set sizes (null = "
                             f"all), e.g. [250, 1000, null]; got {sizes!r}.")
        for v in sizes:
            _check_size(f"{where}, learning curve of {task!r}", "a size", v)
        out.append((str(task), tuple(sizes)))
    return tuple(sorted(out))


def _task_sizes(where: str, tasks) -> tuple:
    """`tasks` (a mapping or the pairs it is kept as) checked and kept as sorted pairs."""
    items = tasks.items() if isinstance(tasks, Mapping) else tasks
    out = []
    for task, sizes in items:
        if task not in TASKS:
            raise ValueError(f"{where}: unknown task {task!r} in its per-task sizes; tasks: {', '.join(TASKS)}.")
        sizes = dict(sizes.items() if isinstance(sizes, Mapping) else sizes)
        unknown = sorted(set(sizes) - set(TASK_FIELDS))
        if unknown:
            raise ValueError(f"{where}: task {task!r} sets {', '.join(unknown)}; a task may set only "
                             f"{', '.join(TASK_FIELDS)}.")
        for name, v in sizes.items():
            if name in RATE_FIELDS:
                sizes[name] = _check_rate(f"{where}, task {task!r}", name, v)
            else:
                _check_size(f"{where}, task {task!r}", name, v)
        out.append((str(task), tuple(sorted(sizes.items()))))
    return tuple(sorted(out))


PROFILES: dict[str, Profile] = {
    # The smallest sizes that still run every code path (two seeds: a paired interval); its numbers mean nothing.
    "quick": Profile("quick", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=4, rank_epochs=1,
                     epochs=1, seeds=(0, 1), fractions=("1", "1/2", "0"), trainable_limit=8, trainable_epochs=1,
                     tasks={"lm": {"eval_limit": 4, "corpus_limit": 4},
                            "lm_probe": {"train_limit": 4, "eval_limit": 4, "corpus_limit": 4}},
                     look_limit=500, timing_repeats=1),
    # The paper's protocol cut to about 2.5 hours on 2 CPU cores (the arithmetic: docs/results.md). Random subsets
    # (some files are sorted by source); λ's epochs the fewest at which two seeds' rankings agreed at ρ >= 0.9 on the
    # measured learning curves (SST-2 4, NER 2, POS 1), else Table 3's. MRPC's λ keeps one epoch: its probe stays at
    # the majority class. The LM probe needs 240 paragraphs to beat a unigram model (60 did not).
    "cpu": Profile("cpu", train_limit=2000, eval_limit=None, corpus_limit=1000, rank_limit=1000, rank_epochs=None,
                   epochs=None, seeds=(0, 1, 2, 3, 4), sample="random", trainable_limit=200, trainable_epochs=1,
                   tasks={"cola": {"train_limit": 3000}, "mrpc": {"train_limit": 500, "rank_epochs": 1},
                          "ner": {"train_limit": 1000, "eval_limit": 500, "rank_epochs": 2},
                          "pos": {"train_limit": 1000, "eval_limit": 500, "rank_epochs": 1},
                          "mlm": {"train_limit": 400, "eval_limit": 400, "rank_limit": 400},
                          "lm": {"eval_limit": 200, "corpus_limit": 500, "rank_limit": 200},
                          "lm_probe": {"train_limit": 240, "eval_limit": 200, "corpus_limit": 500, "rank_limit": 60}},
                   curves={"mrpc": (250, 1000, None), "lm_probe": (60, 120, 240)}),
    "full": Profile("full", train_limit=None, eval_limit=None, corpus_limit=None, rank_limit=None, rank_epochs=None,
                    epochs=None),
}


#: The built-in profiles, whose names profile files derive from.
BUILTIN_PROFILES = tuple(PROFILES)
# Profile file name -> the name of its base (which may itself be a file's), recorded when the file is loaded.
_BASES: dict[str, str] = {}


def builtin_base(name: str | os.PathLike | Profile) -> str | None:
    """The built-in profile that `name` derives from (through file bases); None for one registered without a file."""
    current = get_profile(name).name
    seen = set()
    while current not in BUILTIN_PROFILES:
        if current in seen or current not in _BASES:
            return None
        seen.add(current)
        current = _BASES[current]
    return current


def get_profile(name: str | os.PathLike | Profile) -> Profile:
    """The profile called `name`, or the one a JSON file defines (registered under its name); else a clear error."""
    if isinstance(name, Profile):
        return name
    if isinstance(name, str) and name in PROFILES:
        return PROFILES[name]
    if str(name).endswith(".json") or Path(name).is_file():
        return load_profile_file(name)
    raise ValueError(f"unknown profile {str(name)!r}; choose one of {', '.join(PROFILES)} or pass a JSON profile "
                     "file (see papa.runs.profiles)")


def load_profile_file(path: str | os.PathLike) -> Profile:
    """Read a profile from a JSON file (fields missing from it come from ``base``) and register it by name."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no profile file at {path}: give a built-in profile ({', '.join(PROFILES)}) or "
                                "the path of an existing JSON file.")
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"profile file {path} is not valid JSON ({exc}): fix it.") from exc
    if not isinstance(spec, dict):
        raise ValueError(f"profile file {path} must hold a JSON object, got {type(spec).__name__}.")
    known = {f.name for f in fields(Profile)}
    unknown = sorted(set(spec) - known - {"base"})
    if unknown:
        raise ValueError(f"profile file {path}: unknown field(s) {', '.join(unknown)}; known: base, "
                         f"{', '.join(sorted(known))}.")
    name = spec.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"profile file {path} needs a \"name\" of letters, digits, '.', '_' or '-' (it is recorded "
                         f"in every result row), got {name!r}.")
    tasks = spec.get("tasks", {})
    if not isinstance(tasks, dict) or not all(isinstance(v, dict) for v in tasks.values()):
        raise ValueError(f"profile file {path}: \"tasks\" must map task names to objects of sizes, e.g. "
                         "{\"cola\": {\"train_limit\": null, \"epochs\": 15}}.")
    base = get_profile(spec.get("base", "quick"))
    values = {**asdict(base), **{k: v for k, v in spec.items() if k != "base"}}
    if "tasks" not in spec:  # a size the file sets holds for every task: the base's per-task values of it go
        values["tasks"] = {task: {k: v for k, v in sizes if k not in spec} for task, sizes in base.tasks}
    try:
        registered = register_profile(Profile(**values))
    except ValueError as exc:
        raise ValueError(f"profile file {path}: {exc}") from None
    _BASES[registered.name] = base.name
    return registered


def register_profile(profile: Profile) -> Profile:
    """Make `profile` known by its name (e.g. in a worker process that runs jobs of a profile file)."""
    existing = PROFILES.get(profile.name)
    if existing is not None and existing != profile:
        raise ValueError(f"it defines {profile.name!r} differently from the profile already known by that name: "
                         "give it another name.")
    PROFILES[profile.name] = profile
    return profile
