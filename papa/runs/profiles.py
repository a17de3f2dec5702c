"""Run profiles: how much data and which grid a reproduction uses. Recorded in every result row.

* ``quick``: small subsets so a whole task grid on the offline model finishes in minutes on 2 CPU cores;
  numbers are noisy and only show that everything runs end to end.
* ``cpu``: random subsets of 400 training / 400 evaluation examples, 4 epochs: the seven sections on the offline
  model in about 90 minutes on 2 CPU cores; the scale of the README's "Results".
* ``full``: the paper's settings (whole training sets, Table 3 epochs, 3 seeds).

Fractions are shares of heads that stay input-dependent. When a share is not a whole number of heads (1/16 of
MiniLM's 72 heads is 4.5) the profile's `rounding` decides (``down``: 4); the count used is in every row.

Other profiles (e.g. a tiny grid for a smoke test, run from the command line) come from a JSON file passed where a
profile name goes (``papa probe --profile tiny.json``)::

    {"name": "tiny", "base": "quick", "train_limit": 32, "eval_limit": 32, "epochs": 1, "seeds": [0, 1]}

Fields left out are taken from ``base`` (default ``quick``). The file's ``name`` is what result rows, run ids and
ranking file names record, so its runs never mix with those of a built-in profile. A batch run of the notebooks
(`papa.reproduce.notebooks`) gives a file profile the models and tasks of the built-in profile it derives from
(`builtin_base`): ``"base": "full"`` runs the paper's models at the file's sizes.

Every profile encodes inputs in ``layout`` (`papa.method.layout`): by default the authors' released preprocessing
(``official``); ``"layout": "sep_last"`` in a profile file, or ``--layout`` on the command line, runs papa's own.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from papa.core.vocabulary import LAYOUTS, PAPER_FRACTIONS, REPRODUCTION_LAYOUT, ROUNDINGS, SAMPLES
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Profile:
    """Data sizes and grid of one reproduction profile (None = everything / Table 3)."""

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

    def __post_init__(self) -> None:
        # Checked here so that a bad profile fails when it is made, not after the first runs of a grid.
        where = f"profile {self.name!r}"
        for name in ("train_limit", "eval_limit", "corpus_limit", "rank_limit", "rank_epochs", "epochs"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{where}: {name} must be a positive integer or null (= everything / Table 3), "
                                 f"got {v!r}.")
        seeds = tuple(self.seeds)
        if not seeds:
            raise ValueError(f"{where}: the seed list is empty: give at least one seed, e.g. [0, 1, 2].")
        if any(isinstance(v, bool) or not isinstance(v, int) for v in seeds):
            raise ValueError(f"{where}: seeds must be integers, got {list(seeds)}.")
        fractions = tuple(str(f) for f in self.fractions)
        if not fractions:
            raise ValueError(f"{where}: the fraction list is empty: give e.g. [\"1\", \"1/2\", \"0\"].")
        if self.sample not in SAMPLES:
            raise ValueError(f"{where}: unknown sample {self.sample!r}; choose one of {', '.join(SAMPLES)}.")
        if self.layout not in LAYOUTS:
            raise ValueError(f"{where}: unknown layout {self.layout!r}; choose one of {', '.join(LAYOUTS)}.")
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"{where}: unknown rounding {self.rounding!r}; choose one of {', '.join(ROUNDINGS)}.")
        object.__setattr__(self, "seeds", seeds)
        object.__setattr__(self, "fractions", fractions)


PROFILES: dict[str, Profile] = {
    # Sized so that all seven notebooks (some 200 probe runs) finish in minutes on 2 CPU cores: a smoke test of
    # every section, not a measurement.
    "quick": Profile("quick", train_limit=96, eval_limit=96, corpus_limit=96, rank_limit=48, rank_epochs=1,
                     epochs=2),
    # About 90 minutes on 2 CPU cores for the seven notebooks on the offline model (README "Results"): random subsets,
    # because some training files are sorted by source (CoLA); 4 probe epochs (Table 3's for SST-2, NER and POS)
    # for every run, including Table 1's trainable constants, whose backbone passes dominate the time.
    "cpu": Profile("cpu", train_limit=400, eval_limit=400, corpus_limit=1000, rank_limit=400, rank_epochs=1,
                   epochs=4, sample="random"),
    "full": Profile("full", train_limit=None, eval_limit=None, corpus_limit=None, rank_limit=None, rank_epochs=None,
                    epochs=None),
}


#: The built-in profiles, whose names profile files derive from.
BUILTIN_PROFILES = tuple(PROFILES)
# Profile file name -> the name of its base (which may itself be a file's), recorded when the file is loaded.
_BASES: dict[str, str] = {}


def builtin_base(name: str | os.PathLike | Profile) -> str | None:
    """The built-in profile that `name` derives from: itself when built in; for a profile file, its ``base``,
    followed through files based on other files. None for a profile registered without a file."""
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
    base = get_profile(spec.get("base", "quick"))
    values = {**asdict(base), **{k: v for k, v in spec.items() if k != "base"}}
    try:
        profile = Profile(**values)
    except ValueError as exc:
        raise ValueError(f"profile file {path}: {exc}") from None
    try:
        registered = register_profile(profile)
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
