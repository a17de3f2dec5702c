"""Run profiles: how much data and which grid a reproduction uses. Recorded in every result row.

* ``quick``: small subsets so a whole task grid on the offline model finishes in minutes on 2 CPU cores;
  numbers are noisy and only show that everything runs end to end.
* ``full``: the paper's settings (whole training sets, Table 3 epochs, 3 seeds).

Fractions are shares of heads that stay input-dependent. When a share is not a whole number of heads (1/16 of
MiniLM's 72 heads is 4.5) the profile's `rounding` decides (``down``: 4); the count used is in every row.
"""
from __future__ import annotations

from dataclasses import dataclass

PAPER_FRACTIONS = ("1", "1/2", "1/8", "1/16", "0")


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


PROFILES: dict[str, Profile] = {
    "quick": Profile("quick", train_limit=256, eval_limit=256, corpus_limit=256, rank_limit=128, rank_epochs=1,
                     epochs=None),
    "full": Profile("full", train_limit=None, eval_limit=None, corpus_limit=None, rank_limit=None, rank_epochs=None,
                    epochs=None),
}


def get_profile(name: str | Profile) -> Profile:
    """The profile called `name`, with an error listing the known ones."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}") from None
