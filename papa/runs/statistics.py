"""Paired statistics of runs, with evaluation-set uncertainty, and the verdicts a claim is read with.

Runs with the same seed share the probe's initial weights and batch order, and all runs of a task are scored on the
same evaluation examples: two settings are compared seed by seed on the same examples (paired), never as two
independent intervals. A quantity (a difference, a relative drop, an average of relative drops over tasks) is a
function of each setting's mean over seeds; its uncertainty has two parts, added as variances:

* seeds: the delete-one-seed jackknife of the quantity (for a plain difference of means it is exactly the paired t
  test's standard error, s_d / sqrt(k));
* evaluation examples: a bootstrap over the evaluation set, the same resampled examples for every setting of a task
  (`resample_weights`), from each run's per-example statistics (`papa.tasks.metric_statistics`); runs recorded
  without their predictions have none, and `Estimate.examples` says so.

The interval is value ± t(k−1) · sqrt(se_seeds² + se_examples²) at `LEVEL`. A claim's part is then read with one rule
(`at_most`, `at_least`, `within`): it **holds** when the whole interval lies on the claim's side of its bound,
**does not hold** when the whole interval lies on the other side, and is **inconclusive** when the interval
straddles the bound. For "within a margin" this is two one-sided tests (TOST) at (1 − LEVEL) / 2 each.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

from papa.tasks.metric_statistics import metric_on_resamples

LEVEL = 0.95
RESAMPLES = 1000
HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_READ = "holds", "does not hold", "inconclusive", "not read"
#: A claim's verdicts: its three readings, and "not read" where the run has nothing to read it on.
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_READ)


def resample_weights(n: int, resamples: int = RESAMPLES, *, key: str = "") -> np.ndarray:
    """How often each of `n` evaluation examples is drawn in each of `resamples` bootstrap resamples: [R, n].

    The draws depend only on `key` (e.g. the model, task and evaluation size), so every setting of a task is
    resampled alike (paired) and a reading is the same each time it is made."""
    if n < 1 or resamples < 1:
        raise ValueError(f"need at least one example and one resample, got n={n}, resamples={resamples}")
    seed = int.from_bytes(hashlib.sha256(f"{key}|{n}".encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)


@dataclass(frozen=True)
class Scores:
    """One setting's runs: the recorded metric value of each seed, and (when each run's predictions are stored) its
    value on each shared bootstrap resample of the evaluation examples."""

    seeds: tuple[int, ...]
    values: np.ndarray               # [seeds]
    resampled: np.ndarray | None     # [seeds, resamples]

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64).reshape(-1)
        if len(values) != len(self.seeds) or not len(values):
            raise ValueError(f"need one value per seed, got {len(values)} values for seeds {list(self.seeds)}")
        object.__setattr__(self, "values", values)
        if self.resampled is not None:
            resampled = np.asarray(self.resampled, dtype=np.float64)
            if resampled.ndim != 2 or resampled.shape[0] != len(values):
                raise ValueError(f"resampled values must be [seeds, resamples], got {resampled.shape}")
            object.__setattr__(self, "resampled", resampled)

    def only(self, seeds: Iterable[int]) -> "Scores":
        """These scores restricted to `seeds`, in that order."""
        seeds = tuple(seeds)
        index = [self.seeds.index(s) for s in seeds]
        return Scores(seeds, self.values[index], None if self.resampled is None else self.resampled[index])


def scores(values: Mapping[int, float], statistics: Mapping[int, np.ndarray] | None = None, *,
           metric: str | None = None, weights: np.ndarray | None = None) -> Scores:
    """A setting's `Scores` from its value per seed and, optionally, each seed's per-example statistics
    ([examples, k] of `papa.tasks.metric_statistics.per_example_statistics`) resampled with `weights`.
    Statistics missing for any seed leave the evaluation examples out (`Estimate.examples` is False)."""
    seeds = tuple(sorted(values))
    resampled = None
    if statistics is not None and weights is not None and all(s in statistics for s in seeds):
        if metric is None:
            raise ValueError("resampling needs the metric the statistics are of")
        resampled = np.stack([metric_on_resamples(metric, statistics[s], weights) for s in seeds])
    return Scores(seeds, np.array([values[s] for s in seeds], dtype=np.float64), resampled)


@dataclass(frozen=True)
class Estimate:
    """A quantity of one or more settings' scores with its uncertainty (see the module's docstring)."""

    value: float
    se_seeds: float        # NaN with one seed
    se_examples: float     # 0.0 when the evaluation examples were not resampled
    seeds: int
    examples: bool         # whether the evaluation examples' uncertainty is in the interval

    @property
    def se(self) -> float:
        return math.sqrt(self.se_seeds ** 2 + self.se_examples ** 2)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The two-sided interval at `level`; NaN ends (no interval) with one seed, or with seeds that agree exactly
        and no resamples of the evaluation examples."""
        if self.seeds < 2 or not math.isfinite(self.se) or (self.se == 0 and not self.examples):
            # seeds that agree exactly (a model scored without training a probe) say nothing of the evaluation
            # set's own uncertainty: without resamples there is no interval
            return (math.nan, math.nan)
        half = _scipy_stats.t.ppf(0.5 + level / 2, self.seeds - 1) * self.se
        return (self.value - half, self.value + half)

    def text(self, digits: int = 3, *, percent: bool = False, level: float = LEVEL) -> str:
        """e.g. ``-0.027 [-0.043, -0.011]`` or ``12.3% [4.0%, 20.6%]``."""
        low, high = self.interval(level)
        fmt = (lambda v: f"{v * 100:.{max(digits - 2, 0)}f}%") if percent else (lambda v: f"{v:+.{digits}f}")
        body = fmt(self.value)
        if math.isfinite(low):
            return f"{body} [{fmt(low)}, {fmt(high)}]"
        return body + (" [one seed: no interval]" if self.seeds < 2 else
                       " [seeds agree exactly, examples not resampled: no interval]")


def estimate(quantity: Callable[..., np.ndarray | float], *settings: Scores) -> Estimate:
    """`quantity` of the settings' means over seeds, paired seed by seed (the seeds all settings share).

    `quantity` takes one argument per setting and must work elementwise on arrays (plain arithmetic does), e.g.
    ``estimate(lambda original, replaced: (original - replaced) / original, a, b)``."""
    if not settings:
        raise ValueError("give at least one setting")
    shared = sorted(set.intersection(*(set(s.seeds) for s in settings)))
    if not shared:
        raise ValueError("the settings share no seed: a paired estimate needs runs with the same seeds")
    settings = tuple(s.only(shared) for s in settings)
    k = len(shared)
    value = float(quantity(*(s.values.mean() for s in settings)))
    if k > 1:
        leave_one_out = np.array([float(quantity(*(np.delete(s.values, i).mean() for s in settings)))
                                  for i in range(k)])
        se_seeds = float(math.sqrt((k - 1) / k * ((leave_one_out - leave_one_out.mean()) ** 2).sum()))
    else:
        se_seeds = math.nan
    examples = all(s.resampled is not None for s in settings)
    se_examples = 0.0
    if examples:
        replicated = np.asarray(quantity(*(s.resampled.mean(axis=0) for s in settings)), dtype=np.float64)
        replicated = replicated[np.isfinite(replicated)]
        se_examples = float(replicated.std(ddof=1)) if len(replicated) > 1 else math.nan
    return Estimate(value, se_seeds, se_examples, k, examples)


def difference(reference: Scores, other: Scores) -> Estimate:
    """`other` − `reference`, paired."""
    return estimate(lambda a, b: b - a, reference, other)


def relative_drop(original: Scores, replaced: Scores) -> Estimate:
    """(original − replaced) / |original|, paired: the paper's relative drop."""
    return estimate(lambda o, r: (o - r) / np.abs(o), original, replaced)


# ---- reading a claim's part ---------------------------------------------------------------------------------------

def at_most(e: Estimate, bound: float, level: float = LEVEL) -> str:
    """The claim "the quantity is at most `bound`"."""
    low, high = e.interval(level)
    if not math.isfinite(low):
        return INCONCLUSIVE
    return HOLDS if high <= bound else DOES_NOT_HOLD if low > bound else INCONCLUSIVE


def at_least(e: Estimate, bound: float, level: float = LEVEL) -> str:
    """The claim "the quantity is at least `bound`" (with `bound` 0 and a difference: "better than")."""
    low, high = e.interval(level)
    if not math.isfinite(low):
        return INCONCLUSIVE
    return HOLDS if low >= bound else DOES_NOT_HOLD if high < bound else INCONCLUSIVE


def above(e: Estimate, bound: float = 0.0, level: float = LEVEL) -> str:
    """The claim "the quantity is above `bound`" (strictly: an interval touching the bound does not show it)."""
    low, high = e.interval(level)
    if not math.isfinite(low):
        return INCONCLUSIVE
    return HOLDS if low > bound else DOES_NOT_HOLD if high <= bound else INCONCLUSIVE


def within(e: Estimate, low_bound: float, high_bound: float, level: float = LEVEL) -> str:
    """The claim "the quantity lies between the bounds" (equivalence, e.g. a difference within ± a margin: TOST)."""
    low, high = e.interval(level)
    if not math.isfinite(low):
        return INCONCLUSIVE
    if low_bound <= low and high <= high_bound:
        return HOLDS
    return DOES_NOT_HOLD if high < low_bound or low > high_bound else INCONCLUSIVE


def all_of(verdicts: Iterable[str]) -> str:
    """A claim made of parts (or of every task): does not hold if one part does not, holds if every part holds,
    inconclusive otherwise; parts "not read" are left out (all of them: not read)."""
    read = [v for v in verdicts if v != NOT_READ]
    if any(v not in VERDICTS for v in read):
        raise ValueError(f"unknown verdict in {read}; verdicts: {', '.join(VERDICTS)}")
    if not read:
        return NOT_READ
    return DOES_NOT_HOLD if DOES_NOT_HOLD in read else HOLDS if all(v == HOLDS for v in read) else INCONCLUSIVE


def any_of(verdicts: Iterable[str]) -> str:
    """A claim that something happens somewhere ("sometimes"): holds if one part holds, does not hold if every part
    does not, inconclusive otherwise."""
    read = [v for v in verdicts if v != NOT_READ]
    if not read:
        return NOT_READ
    return HOLDS if HOLDS in read else DOES_NOT_HOLD if all(v == DOES_NOT_HOLD for v in read) else INCONCLUSIVE
