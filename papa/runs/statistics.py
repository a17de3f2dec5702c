"""Paired statistics of runs, with evaluation-set uncertainty, and the verdicts a claim is read with.

Settings are compared seed by seed on the same evaluation examples. A quantity of the settings' seed means has two
variance parts: the seeds' (delete-one-seed jackknife; the paired t test's standard error for a difference) and the
evaluation examples' (a bootstrap shared by every setting of a task, `resample_weights`); `over_orders` adds a third
where the head order is itself a draw. The interval is value ± t(ν) · se at `LEVEL`, ν by Welch–Satterthwaite.

A claim's part holds when its whole interval lies on the claim's side of the bound, does not hold when it lies on
the other side, and is inconclusive otherwise (two one-sided tests at `ALPHA`; TOST for `within`); `all_of` and
`any_of` apply Holm's correction on the side where any one comparison decides.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from papa.tasks.metric_statistics import metric_on_resamples



def _scipy_stats():
    """scipy.stats, imported on first use (it takes seconds)."""
    from scipy import stats

    return stats


LEVEL = 0.95
#: Each one-sided test's level: a part holds when its two-sided `LEVEL` interval lies on the claim's side.
ALPHA = (1 - LEVEL) / 2
RESAMPLES = 1000
HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_READ = "holds", "does not hold", "inconclusive", "not read"
#: A claim whose read parts all hold while others could not be read: never "holds".
PARTLY_READ = "partly read"
#: A reading that describes (a share with its interval) and tests nothing.
DESCRIPTIVE = "descriptive"
#: A part that could not have failed: its control shows no effect beyond the part's margin.
NOT_INFORMATIVE = "not informative"
#: A claim's verdicts.
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, PARTLY_READ, NOT_READ, NOT_INFORMATIVE, DESCRIPTIVE)
#: The verdicts of a part that tells nothing either way about its claim.
UNREAD = (NOT_READ, NOT_INFORMATIVE)


def resample_weights(n: int, resamples: int = RESAMPLES, *, key: str = "") -> np.ndarray:
    """How often each of `n` evaluation examples is drawn in each of `resamples` bootstrap resamples: [R, n],
    depending only on `key` and `n` (so that every setting of a task is resampled alike)."""
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
    """A setting's `Scores` from its value per seed and, optionally, each seed's per-example `statistics` resampled
    with `weights` (left out unless every seed has them)."""
    seeds = tuple(sorted(values))
    resampled = None
    if statistics is not None and weights is not None and all(s in statistics for s in seeds):
        if metric is None:
            raise ValueError("resampling needs the metric the statistics are of")
        resampled = np.stack([metric_on_resamples(metric, statistics[s], weights) for s in seeds])
    return Scores(seeds, np.array([values[s] for s in seeds], dtype=np.float64), resampled)


@dataclass(frozen=True)
class Estimate:
    """A quantity of one or more settings' scores with its uncertainty."""

    value: float
    se_seeds: float        # NaN with one seed
    se_examples: float     # 0.0 when the evaluation examples were not resampled
    seeds: int
    examples: bool         # whether the evaluation examples' uncertainty is in the interval
    resamples: int = RESAMPLES       # bootstrap resamples behind se_examples
    df_seeds: float | None = None    # degrees of freedom of se_seeds (None: seeds − 1)
    se_orders: float = 0.0           # the head order's own spread (`over_orders`); 0: one order, fixed
    df_orders: float | None = None   # its degrees of freedom (orders − 1, Welch–Satterthwaite over several arms)
    orders: int = 1                  # the fewest draws of the order behind an arm

    @property
    def se(self) -> float:
        return math.sqrt(self.se_seeds ** 2 + self.se_examples ** 2 + self.se_orders ** 2)

    @property
    def df(self) -> float:
        """Welch–Satterthwaite degrees of freedom of `se`: se⁴ / Σ part⁴ / ν_part over the seeds' part (ν = seeds − 1),
        the bootstrap's (R − 1) and the orders' (`df_orders`)."""
        seeds = self.seeds - 1 if self.df_seeds is None else self.df_seeds
        parts = [(self.se_seeds, seeds), (self.se_examples, max(self.resamples - 1, 1)),
                 (self.se_orders, self.df_orders or 1)]
        parts = [(se, df) for se, df in parts if se and math.isfinite(se)]
        if not parts:  # nothing varies: the seeds' count is all there is
            return seeds
        return self.se ** 4 / sum(se ** 4 / df for se, df in parts)

    def _has_interval(self) -> bool:
        # seeds that agree exactly (nothing trained) say nothing of the evaluation set's uncertainty
        return self.seeds >= 2 and math.isfinite(self.se) and not (self.se == 0 and not self.examples)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The two-sided interval at `level`; NaN ends (no interval) with one seed, or with seeds that agree exactly
        and no resamples of the evaluation examples."""
        if not self._has_interval():
            return (math.nan, math.nan)
        half = _scipy_stats().t.ppf(0.5 + level / 2, self.df) * self.se
        return (self.value - half, self.value + half)

    def p_above(self, bound: float) -> float:
        """One-sided p-value of "the quantity is above `bound`" (small: it is); NaN without an interval."""
        if not self._has_interval():
            return math.nan
        if self.se == 0:
            return 0.0 if self.value > bound else 1.0
        return float(_scipy_stats().t.sf((self.value - bound) / self.se, self.df))

    def p_below(self, bound: float) -> float:
        """One-sided p-value of "the quantity is below `bound`" (small: it is); NaN without an interval."""
        if not self._has_interval():
            return math.nan
        if self.se == 0:
            return 0.0 if self.value < bound else 1.0
        return float(_scipy_stats().t.cdf((self.value - bound) / self.se, self.df))

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
    """`quantity` (one argument per setting, elementwise on arrays) of the settings' means over the seeds they
    share, paired seed by seed."""
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
    se_examples, resamples = 0.0, 0
    if examples:
        replicated = np.asarray(quantity(*(s.resampled.mean(axis=0) for s in settings)), dtype=np.float64)
        replicated = replicated[np.isfinite(replicated)]
        resamples = len(replicated)
        se_examples = float(replicated.std(ddof=1)) if resamples > 1 else math.nan
    return Estimate(value, se_seeds, se_examples, k, examples, resamples)


def over_orders(joint: Estimate, *arms: Sequence[float]) -> Estimate:
    """`joint` (estimated over several draws of the head order) with the order's own spread added: each arm (one
    setting's values under each draw) adds s² / n with n − 1 degrees of freedom; conservative, as each draw's spread
    holds seed noise `joint` counts too."""
    parts = []
    for values in arms:
        values = np.asarray(values, dtype=np.float64)
        if len(values) > 1:
            parts.append((float(values.var(ddof=1)) / len(values), len(values) - 1))
    orders = min((len(a) for a in arms), default=1)
    if not parts:
        return dataclasses.replace(joint, orders=orders)
    variance = sum(v for v, _ in parts)
    df = variance ** 2 / sum(v ** 2 / d for v, d in parts) if variance > 0 else min(d for _, d in parts)
    return dataclasses.replace(joint, se_orders=math.sqrt(variance), df_orders=df, orders=orders)


def mean_of(estimates: Sequence[Estimate]) -> Estimate:
    """The mean of independent estimates (e.g. one per model): their variances add, and the seeds' degrees of
    freedom are the Welch–Satterthwaite ones of that sum."""
    if not estimates:
        raise ValueError("give at least one estimate")
    k = len(estimates)
    se_seeds = math.sqrt(sum(e.se_seeds ** 2 for e in estimates)) / k
    parts = sum((e.se_seeds / k) ** 4 / (e.seeds - 1 if e.df_seeds is None else e.df_seeds) for e in estimates
                if e.seeds > 1)
    df_seeds = se_seeds ** 4 / parts if parts > 0 else min(e.seeds for e in estimates) - 1
    varied = [e for e in estimates if e.se_orders > 0]  # the orders' parts add alike
    se_orders = math.sqrt(sum(e.se_orders ** 2 for e in varied)) / k
    df_orders = (se_orders ** 4 / sum((e.se_orders / k) ** 4 / e.df_orders for e in varied)) if varied else None
    return Estimate(value=sum(e.value for e in estimates) / k, se_seeds=se_seeds,
                    se_examples=math.sqrt(sum(e.se_examples ** 2 for e in estimates)) / k,
                    seeds=min(e.seeds for e in estimates), examples=all(e.examples for e in estimates),
                    resamples=min(e.resamples for e in estimates), df_seeds=df_seeds, se_orders=se_orders,
                    df_orders=df_orders, orders=min(e.orders for e in estimates))


def difference(reference: Scores, other: Scores) -> Estimate:
    """`other` − `reference`, paired."""
    return estimate(lambda a, b: b - a, reference, other)


def relative_drop(original: Scores, replaced: Scores) -> Estimate:
    """(original − replaced) / |original|, paired: the paper's relative drop."""
    return estimate(lambda o, r: (o - r) / np.abs(o), original, replaced)


#: Below this many points, Spearman's ρ is tested exactly over every permutation (10! = 3.6 million above it).
EXACT_SPEARMAN_BELOW = 10


def spearman_test(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Spearman's ρ of `x` and `y` with its one-sided p-values (ρ > 0, ρ < 0): exact over every permutation below
    `EXACT_SPEARMAN_BELOW` points, else scipy's t approximation."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = len(x)
    if n != len(y) or n < 3:
        raise ValueError(f"Spearman's ρ needs at least 3 pairs of equal length, got {len(x)} and {len(y)}")
    stats = _scipy_stats()
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    rho = float(np.corrcoef(rx, ry)[0, 1]) if rx.std() and ry.std() else math.nan
    if not math.isfinite(rho):
        return rho, math.nan, math.nan
    if n >= EXACT_SPEARMAN_BELOW:
        return rho, *(float(stats.spearmanr(x, y, alternative=side).pvalue) for side in ("greater", "less"))
    centred = rx - rx.mean()

    def rho_of(ranks: np.ndarray, axis: int) -> np.ndarray:
        ranks = ranks - ranks.mean(axis=axis, keepdims=True)
        return (ranks * centred).sum(axis=axis) / np.sqrt((centred @ centred) * (ranks * ranks).sum(axis=axis))

    # One sample (y's ranks against fixed x): "pairings" then visits its n! orders; given both, it visits (n!)².
    # Ties with the observed ρ count as at least as extreme (scipy's relative tolerance).
    p = [stats.permutation_test((ry,), rho_of, permutation_type="pairings", vectorized=True, n_resamples=np.inf,
                                alternative=side).pvalue for side in ("greater", "less")]
    return rho, float(p[0]), float(p[1])


# ---- reading a claim's part ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """A part read by one rule: its verdict, and the one-sided p-values of its two sides (NaN: no interval)."""

    verdict: str
    p_holds: float = math.nan   # of "the claim's side": small when the part holds
    p_fails: float = math.nan   # of "the other side": small when it does not hold
    #: Holm-adjusted p of the side its family was corrected on (`corrected`), and the family's size (0: none)
    p_adjusted: float = math.nan
    family: int = 0


def _test(p_holds: float, p_fails: float, alpha: float) -> Outcome:
    if not (math.isfinite(p_holds) and math.isfinite(p_fails)):
        return Outcome(INCONCLUSIVE)
    verdict = HOLDS if p_holds < alpha else DOES_NOT_HOLD if p_fails < alpha else INCONCLUSIVE
    return Outcome(verdict, p_holds, p_fails)


def _alpha(level: float) -> float:
    return (1 - level) / 2


def at_most(e: Estimate, bound: float, level: float = LEVEL) -> Outcome:
    """The claim "the quantity is at most `bound`"."""
    return _test(e.p_below(bound), e.p_above(bound), _alpha(level))


def at_least(e: Estimate, bound: float, level: float = LEVEL) -> Outcome:
    """The claim "the quantity is at least `bound`" (with `bound` 0 and a difference: "better than")."""
    return _test(e.p_above(bound), e.p_below(bound), _alpha(level))


def above(e: Estimate, bound: float = 0.0, level: float = LEVEL) -> Outcome:
    """The claim "the quantity is above `bound`"."""
    return _test(e.p_above(bound), e.p_below(bound), _alpha(level))


def within(e: Estimate, low_bound: float, high_bound: float, level: float = LEVEL) -> Outcome:
    """The claim "the quantity lies between the bounds" (equivalence, e.g. a difference within ± a margin): it holds
    when both one-sided tests show it inside (TOST), does not hold when one shows it outside."""
    inside = max(e.p_above(low_bound), e.p_below(high_bound))
    outside = min(e.p_below(low_bound), e.p_above(high_bound))
    return _test(inside, outside, _alpha(level))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Which of the hypotheses with these p-values Holm's step-down procedure rejects at family-wise `alpha` (a NaN
    counts in m, as p = 1)."""
    return [p < alpha for p in holm_adjusted(p_values)]


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values: min(1, running max of (m − rank) · p) in increasing order of p (a NaN as p = 1)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: (p_values[i] if math.isfinite(p_values[i]) else math.inf, i))
    adjusted, running = [1.0] * m, 0.0
    for rank, i in enumerate(order):
        p = p_values[i] if math.isfinite(p_values[i]) else 1.0
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def corrected(tests: Sequence[Outcome], side: str, alpha: float = ALPHA) -> list[Outcome]:
    """`tests` as one Holm family on `side` ("fails" or "holds"): every read comparison counts in m, and keeps that
    side's verdict only where its adjusted p is below `alpha` (else inconclusive)."""
    if side not in ("fails", "holds"):
        raise ValueError(f"side must be 'fails' or 'holds', got {side!r}")
    key, verdict = ("p_fails", DOES_NOT_HOLD) if side == "fails" else ("p_holds", HOLDS)
    read = [i for i, t in enumerate(tests) if t.verdict not in (NOT_READ, DESCRIPTIVE)]
    adjusted = dict(zip(read, holm_adjusted([getattr(tests[i], key) for i in read])))
    out = []
    for i, t in enumerate(tests):
        if i not in adjusted:
            out.append(t)
            continue
        kept = t.verdict if t.verdict != verdict or adjusted[i] < alpha else INCONCLUSIVE
        out.append(Outcome(kept, t.p_holds, t.p_fails, adjusted[i], len(read)))
    return out


def _verdicts(tests: Iterable[Outcome | str]) -> list[str]:
    verdicts = [t.verdict if isinstance(t, Outcome) else t for t in tests]
    unknown = [v for v in verdicts if v not in VERDICTS]
    if unknown:
        raise ValueError(f"unknown verdict in {unknown}; verdicts: {', '.join(VERDICTS)}")
    return verdicts


def _corrected_verdicts(tests: Iterable[Outcome | str], side: str) -> list[str]:
    """The verdicts of `tests`, Holm-corrected on `side` across the `Outcome`s; plain verdicts taken as they are."""
    tests = list(tests)
    fixed = iter(corrected([t for t in tests if isinstance(t, Outcome)], side))
    return _verdicts(next(fixed) if isinstance(t, Outcome) else t for t in tests)


def all_of(tests: Iterable[Outcome | str]) -> str:
    """A claim made of parts (Holm-corrected for "does not hold"): does not hold if a part does not, holds if every
    part holds, partly read if some were not read, inconclusive otherwise."""
    verdicts = _corrected_verdicts(tests, "fails")
    read = [v for v in verdicts if v not in UNREAD]
    if not read:
        return NOT_INFORMATIVE if NOT_INFORMATIVE in verdicts else NOT_READ
    if DOES_NOT_HOLD in read:
        return DOES_NOT_HOLD
    if INCONCLUSIVE in read:
        return INCONCLUSIVE
    return PARTLY_READ if len(read) < len(verdicts) or PARTLY_READ in read else HOLDS


def any_of(tests: Iterable[Outcome | str]) -> str:
    """A claim that something happens somewhere (Holm-corrected for "holds"): holds if one part holds, does not
    hold if every part read does not, inconclusive otherwise."""
    verdicts = _corrected_verdicts(tests, "holds")
    read = [v for v in verdicts if v not in UNREAD]
    if not read:
        return NOT_INFORMATIVE if NOT_INFORMATIVE in verdicts else NOT_READ
    return HOLDS if HOLDS in read else DOES_NOT_HOLD if all(v == DOES_NOT_HOLD for v in read) else INCONCLUSIVE
