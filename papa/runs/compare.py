"""Settings of a run compared seed by seed: the `Scores` of a setting (its runs' values, and their stored predictions
resampled alike for every setting of a task), and paired comparison tables."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.runs.predictions_store import load_run_predictions, stores_predictions
from papa.runs.statistics import Estimate, Scores, difference, resample_weights, scores

#: A setting: the columns of a result row that say what ran (besides model, task and seed).
SETTING_COLUMNS = ("constants", "constants_corpus", "selection", "fraction_label", "layout", "dtype", "probe_inputs",
                   "precision", "execution", "batch_order", "profile")


class RunScores:
    """The runs of one results table, read as paired `Scores` per setting. Where `folder` holds ``predictions/``, every
    setting also gets the evaluation examples' uncertainty, from resamples shared by every setting of a model and task;
    else the seeds alone."""

    def __init__(self, results: pd.DataFrame, folder: RunFolder | None = None):
        self.results = results
        self.out = folder if stores_predictions(folder) else None
        self._weights: dict[tuple[str, str, int], np.ndarray] = {}

    def rows(self, model: str, task: str, **setting: str) -> pd.DataFrame:
        """The rows of `model` on `task` whose columns equal `setting` (e.g. constants="average")."""
        r = self.results
        keep = (r.model == model) & (r.task == task)
        for column, value in setting.items():
            keep &= r[column] == value
        return r[keep]

    def scores(self, model: str, task: str, constants: str = NONE, corpus: str = NONE, selection: str = NONE,
               label: str = "1", **more: str) -> Scores | None:
        """The `Scores` of one setting (None when it did not run): constants kind and corpus, selection method,
        fraction label, and any further columns in `more` (e.g. layout="official")."""
        return self.setting_scores(model, task, constants=constants, constants_corpus=corpus, selection=selection,
                                   fraction_label=label, **more)

    def setting_scores(self, model: str, task: str, **setting: str) -> Scores | None:
        """The `Scores` of the rows of `model` on `task` whose columns equal `setting` (None when none ran)."""
        rows = self.rows(model, task, **setting).drop_duplicates("seed", keep="last")
        if rows.empty:
            return None
        seeds = rows.seed.astype(int).tolist()
        values = dict(zip(seeds, rows.value.astype(float)))
        metric, statistics, weights = str(rows.metric.iloc[0]), None, None
        if self.out is not None:
            found = load_run_predictions(self.out, list(rows.run_id))
            seed_of = dict(zip(rows.run_id, seeds))
            statistics = {seed_of[rid]: p.example_statistics(metric) for rid, p in found.items()}
            weights = self.weights(model, task, len(next(iter(statistics.values()))))
        return scores(values, statistics, metric=metric, weights=weights)

    def weights(self, model: str, task: str, n: int) -> np.ndarray:
        """The bootstrap resamples of `task`'s `n` evaluation examples: the same for every setting (paired)."""
        key = (model, task, n)
        if key not in self._weights:
            self._weights[key] = resample_weights(n, key=f"{model}|{task}")
        return self._weights[key]


#: Columns whose value "none" means nothing applies there, so that such a row pairs with any value (`compare`).
NOT_APPLICABLE_WHEN_NONE = ("constants", "constants_corpus", "selection")


def _pairs_with(a: dict, b: dict, columns: Sequence[str]) -> bool:
    """Whether settings `a` and `b` agree on `columns`, a "none" where nothing applies pairing with anything."""
    return all(a[c] == b[c] or (c in NOT_APPLICABLE_WHEN_NONE and NONE in (a[c], b[c])) for c in columns)


def compare(results: pd.DataFrame, column: str, reference: str, other: str, *,
            folder: RunFolder | None = None,
            fixed: Mapping[str, str] | None = None) -> pd.DataFrame:
    """`other` − `reference` of `column`, paired by seed, for every model, task and setting of the other columns that
    ran with both: difference, 95% interval, standard errors and `detectable` difference. The other columns are held
    fixed, but a "none" in `NOT_APPLICABLE_WHEN_NONE` pairs with every value there."""
    if column not in SETTING_COLUMNS:
        raise ValueError(f"compare settings by one of {', '.join(SETTING_COLUMNS)}, not {column!r}")
    if column not in results:
        raise ValueError(f"this results table has no {column} column: "
                         f"compare by one of {', '.join(c for c in SETTING_COLUMNS if c in results)}")
    rows = results
    for c, v in (fixed or {}).items():
        rows = rows[rows[c] == v]
    others = [c for c in SETTING_COLUMNS if c != column and c in rows]
    run = RunScores(rows, folder)
    keys = ["model", "task", *others]
    side = {v: [g._asdict() for g in rows.loc[rows[column].astype(str) == str(v), keys].drop_duplicates()
                .itertuples(index=False)] for v in (reference, other)}
    out = []
    for a in side[reference]:
        for b in side[other]:
            if (a["model"], a["task"]) != (b["model"], b["task"]) or not _pairs_with(a, b, others):
                continue
            sa = run.setting_scores(a["model"], a["task"], **{c: a[c] for c in others}, **{column: reference})
            sb = run.setting_scores(b["model"], b["task"], **{c: b[c] for c in others}, **{column: other})
            if sa is None or sb is None:
                continue
            e = difference(sa, sb)
            low, high = e.interval()
            setting = {c: b[c] if a[c] == NONE else a[c] for c in keys}
            out.append({**setting, "reference": sa.values.mean(), "other": sb.values.mean(), "difference": e.value,
                        "low": low, "high": high, "se_seeds": e.se_seeds, "se_examples": e.se_examples,
                        "seeds": e.seeds, "examples": e.examples, "detectable": detectable(e)})
    return pd.DataFrame(out)


def detectable(e: Estimate, power: float = 0.8, level: float = 0.95) -> float:
    """The smallest true difference found with probability `power` at `level` (two-sided t test):
    (t_{1-α/2} + t_{power}) · se; NaN with one seed."""
    from scipy import stats

    if e.seeds < 2 or not np.isfinite(e.se):
        return float("nan")
    return float((stats.t.ppf(0.5 + level / 2, e.df) + stats.t.ppf(power, e.df)) * e.se)


def comparison_text(table: pd.DataFrame, digits: int = 3, keys: Sequence[str] = ("task", "fraction_label")) -> str:
    """One line per compared setting: keys, difference [interval], detectable difference."""
    lines = []
    for _, r in table.iterrows():
        where = ", ".join(str(r[k]) for k in keys)
        lines.append(f"{where}: {r['difference']:+.{digits}f} [{r['low']:+.{digits}f}, {r['high']:+.{digits}f}], "
                     f"detectable {r['detectable']:.{digits}f}")
    return "\n".join(lines)
