"""What a grid point records as its key: one owner for the "none" rules, used by the grid runner and the job lister.

A point that keeps every head input-dependent involves no constants and no selection; one that replaces every head
involves no selection. Such points are computed once and recorded with ``none``, whatever kinds and methods the grid
names. Whether a point is such a point depends on the head count its fraction resolves to (1/16 of 8 heads rounds
down to 0: every head is replaced), so both sides decide it here from that count, and a job listed for a point is
the row the runner writes for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from papa.core.vocabulary import DATA_FREE_KINDS, NONE
from papa.method.selection import as_fraction, num_input_dependent


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
    """The recorded constants kind, corpus and selection of the point (`kind`, `method`, `fraction`).

    `total_heads` is the model's number of heads (layers x heads); with it the fraction is resolved to a head count
    as the runner resolves it (`rounding`). None (the model's config is not on this machine, so the model cannot run
    here either) takes a fraction strictly between 0 and 1 to keep some but not all heads.
    """
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
