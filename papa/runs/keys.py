"""What a grid point records as its key, and what its run ids hash (for the grid runner and the job lister alike).

A point that keeps every head records constants and selection ``none``, one that replaces every head selection
``none``, decided from the head count its fraction resolves to. A run id hashes `run_config` (the artifact format
included) and the seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from papa.core.artifacts import FORMAT
from papa.core.vocabulary import DATA_FREE_KINDS, DEFAULT_BATCH_ORDER, NONE, RANKED
from papa.method.selection import as_fraction, num_input_dependent, parse_selection

if TYPE_CHECKING:
    from papa.runs.profiles import Profile
    from papa.runs.session import GridConfig


@dataclass(frozen=True)
class PointKey:
    """The key fields of one grid point's rows (papa.runs.results.ResultRow)."""

    constants: str
    constants_corpus: str
    selection: str
    n_input_dependent: int | None   # None: decided without the model's head count (see `point_key`)
    keeps_all: bool                 # nothing replaced (the original model)
    replaces_all: bool              # every head replaced


def point_key(kind: str, method: str, constants_corpus: str, fraction: str | float | Fraction, *,
              total_heads: int | None, rounding: str) -> PointKey:
    """The recorded constants kind, corpus and selection of the point (`kind`, `method`, `fraction`); `total_heads`
    None (no local config) takes a fraction strictly between 0 and 1 to keep some heads."""
    if total_heads is None:
        frac = as_fraction(fraction)
        keep, keeps_all, replaces_all = None, frac == 1, frac == 0
    else:
        keep = num_input_dependent(fraction, total_heads, rounding)
        keeps_all, replaces_all = keep == total_heads, keep == 0
    data_free = kind in DATA_FREE_KINDS
    return PointKey(constants=NONE if keeps_all else kind,
                    constants_corpus=NONE if keeps_all or data_free else constants_corpus,
                    selection=NONE if keeps_all or replaces_all else method,
                    n_input_dependent=keep, keeps_all=keeps_all, replaces_all=replaces_all)


def trains_constants(kind: str, key: PointKey) -> bool:
    """Whether the point's constants train with its probe (a ``trainable_*`` kind, where some head is replaced)."""
    return kind.startswith("trainable_") and not key.keeps_all


def run_config(cfg: "GridConfig", prof: "Profile", key: PointKey, *, model: str, kind: str, fraction: str,
               constants_corpus: str, trains_probe: bool) -> dict[str, Any]:
    """What the run ids of the point (`kind`, `key`, `fraction`) of the resolved grid `cfg` hash, without the seed:
    every setting that changes what the run computes, with `prof` the grid's profile for its task."""
    from papa.runs.profiles import get_profile

    selection = parse_selection(key.selection) if key.selection != NONE else None
    rank = None
    if selection is not None and selection.method in RANKED:
        ranker = prof if selection.profile in (None, cfg.profile) else get_profile(selection.profile).for_task(cfg.task)
        rank = [ranker.rank_limit, ranker.rank_epochs, ranker.rank_lr]
    trainable = trains_constants(kind, key)
    train_limit, epochs = prof.train_limit, prof.epochs
    if trainable:
        train_limit, epochs = prof.trainable_limit or prof.train_limit, prof.trainable_epochs or prof.epochs
    return dict(format=FORMAT, model=model, task=cfg.task, constants=key.constants, constants_corpus=constants_corpus,
                selection=key.selection, fraction=fraction, rounding=cfg.rounding, profile=cfg.profile,
                train_limit=train_limit, eval_limit=prof.eval_limit,
                corpus_limit=None if key.constants_corpus == NONE else prof.corpus_limit, epochs=epochs, rank=rank,
                sample=prof.sample, layout=cfg.layout, dtype=cfg.dtype, probe_inputs=cfg.probe_inputs,
                precision=cfg.precision, execution="compiled" if cfg.compile else "eager",
                batch_order=cfg.batch_order if trains_probe and not trainable else DEFAULT_BATCH_ORDER)
