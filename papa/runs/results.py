"""A tidy results table: one CSV row per (run, metric), seed aggregation with 95% t-intervals, relative drops.

A row's ``run_id`` hashes the run's configuration, so a resumed grid skips finished runs and a re-run replaces its
old rows; appends rewrite the whole file atomically.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from filelock import FileLock

from papa.core.artifacts import FORMAT, atomic_path, check_format, remove_stale_temporaries
from papa.core.errors import CorruptArtifactError, check_one_of
from papa.core.vocabulary import (BATCH_ORDERS, DEFAULT_BATCH_ORDER, DEFAULT_DTYPE, DEFAULT_EXECUTION,
                                  DEFAULT_PRECISION, EXECUTIONS, LAYOUTS, MODEL_DTYPES, PAPER_PROBE_INPUTS,
                                  PRECISIONS, PROBE_INPUTS, REPRODUCTION_LAYOUT)
from papa.method.selection import as_fraction, fraction_label
from papa.runs.profiles import PROFILES

COLUMNS = ("model", "task", "constants", "constants_corpus", "selection", "fraction", "fraction_label",
           "n_input_dependent", "seed", "profile", "layout", "dtype", "probe_inputs", "precision", "execution",
           "batch_order", "metric", "value", "runtime_s", "run_id", "extra", "format")
_FLOAT_COLUMNS = ("fraction", "value", "runtime_s")
_INT_COLUMNS = ("n_input_dependent", "seed", "format")
_STR_COLUMNS = tuple(c for c in COLUMNS if c not in _FLOAT_COLUMNS + _INT_COLUMNS)
DTYPES = {**{c: "float64" for c in _FLOAT_COLUMNS}, **{c: "int64" for c in _INT_COLUMNS},
          **{c: str for c in _STR_COLUMNS}}

GROUP_KEYS = ("model", "task", "constants", "constants_corpus", "selection", "fraction", "profile", "layout",
              "dtype", "probe_inputs", "precision", "execution", "batch_order", "metric")
STAT_COLUMNS = ("n", "mean", "std", "ci95", "low", "high")


# ---- rows and run ids ------------------------------------------------------------------------------------------

@dataclass(kw_only=True)
class ResultRow:
    """One metric of one run; `fraction` is the share of heads that stay input-dependent (1 = original model)."""

    model: str
    task: str
    constants: str
    constants_corpus: str
    selection: str
    fraction: float
    fraction_label: str = ""
    n_input_dependent: int
    seed: int
    profile: str
    layout: str = REPRODUCTION_LAYOUT
    dtype: str = DEFAULT_DTYPE
    probe_inputs: str = PAPER_PROBE_INPUTS
    precision: str = DEFAULT_PRECISION
    execution: str = DEFAULT_EXECUTION
    batch_order: str = DEFAULT_BATCH_ORDER
    metric: str
    value: float
    runtime_s: float = float("nan")
    run_id: str
    extra: str = ""
    format: int = FORMAT  # papa.core.artifacts.FORMAT: every row of a table has it

    def __post_init__(self) -> None:
        # Fractions may arrive as Fraction or "1/16" from the CLI; the table stores a float plus a readable label.
        self.fraction = float(as_fraction(self.fraction))
        if not self.fraction_label:
            self.fraction_label = fraction_label(self.fraction)
        if isinstance(self.extra, Mapping):
            self.extra = json.dumps(self.extra, sort_keys=True, default=_json_default)
        for name, choices in (("profile", PROFILES), ("layout", LAYOUTS), ("dtype", MODEL_DTYPES),
                              ("probe_inputs", PROBE_INPUTS), ("precision", PRECISIONS), ("execution", EXECUTIONS),
                              ("batch_order", BATCH_ORDERS)):
            check_one_of(getattr(self, name), choices, name.replace("_", " "))
        for name in _INT_COLUMNS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"{name} must be an integer, got {v!r}.")
            setattr(self, name, int(v))
        if self.n_input_dependent < 0:
            raise ValueError(f"n_input_dependent must be >= 0, got {self.n_input_dependent}.")
        for name in ("value", "runtime_s"):
            setattr(self, name, float(getattr(self, name)))  # NaN allowed: a metric can be undefined
        for name in _STR_COLUMNS:
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}.")
        if not self.run_id:
            raise ValueError("run_id must be non-empty: use papa.runs.results.run_id(**config).")
        check_format(self.format, f"row {self.run_id}", "result row")

    def to_dict(self) -> dict[str, Any]:
        """The row as a dict in column order."""
        d = asdict(self)
        return {c: d[c] for c in COLUMNS}


def _json_default(obj: Any) -> Any:
    """Canonical JSON for the few non-JSON types a configuration holds; anything else is refused (its str() may
    differ between runs and break resumption)."""
    if isinstance(obj, Fraction):
        return float(obj)  # Fraction(1, 2) and 0.5 are the same configuration
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"cannot hash a {type(obj).__name__} in a run configuration: pass str/int/float/bool/list/dict.")


def run_id(**config: Any) -> str:
    """Stable 16-hex-digit id of a run configuration: sha256 of its JSON with sorted keys."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=_json_default)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---- the table -------------------------------------------------------------------------------------------------

def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=DTYPES[c]) for c in COLUMNS})


class ResultsTable:
    """A CSV of `ResultRow`s with a fixed column order, written atomically."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ResultsTable({str(self.path)!r})"

    def read(self) -> pd.DataFrame:
        """The table as a DataFrame (empty, with the right columns, if the file does not exist yet)."""
        path = self.path
        if not path.exists() or path.stat().st_size == 0:
            return _empty_frame()
        try:
            # Everything as text first: keeps "NA"/"None"-like names as names and lets floats parse exactly.
            raw = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            raise CorruptArtifactError(f"results table {path} is not a readable CSV ({exc}): move it aside and "
                                       "re-run, or point to another file.") from exc
        # A table without the column is papa's first format, from before the column.
        for found in sorted(set(raw["format"]) if "format" in raw.columns else {"1"}):
            check_format(int(found) if found.isdigit() else found, path, "results table")
        missing = [c for c in COLUMNS if c not in raw.columns]
        if missing:
            raise CorruptArtifactError(f"results table {path} lacks the column(s) {', '.join(missing)}; a papa results "
                                       f"table has {', '.join(COLUMNS)}: it was not written by papa.runs.results: "
                                       "move it aside.")
        df = raw.copy()
        for col in COLUMNS:
            try:
                if col in _FLOAT_COLUMNS:
                    df[col] = [float(v) if v != "" else math.nan for v in raw[col]]
                elif col in _INT_COLUMNS:
                    df[col] = [int(v) for v in raw[col]]
            except ValueError as exc:
                raise CorruptArtifactError(f"results table {path}: column {col!r} holds a non-number ({exc}): "
                                           "fix or remove that row.") from exc
        df = df.astype(DTYPES)
        extra_cols = [c for c in df.columns if c not in COLUMNS]  # kept (after ours) so appends never drop them
        return df[[*COLUMNS, *extra_cols]]

    def completed_ids(self) -> set[str]:
        """run_ids with at least one row in the table."""
        return set(self.read()["run_id"])

    def has(self, run_id: str) -> bool:
        """Whether the run `run_id` already has results."""
        return run_id in self.completed_ids()

    def append(self, rows: ResultRow | Mapping | Iterable[ResultRow | Mapping]) -> None:
        """Add rows; rows of a run_id already in the table replace its old rows (a repeated (run_id, metric) among
        the new keeps the last)."""
        if isinstance(rows, (ResultRow, Mapping)):
            rows = [rows]
        new_rows = [r if isinstance(r, ResultRow) else ResultRow(**r) for r in rows]
        if not new_rows:
            return
        new = pd.DataFrame([r.to_dict() for r in new_rows], columns=list(COLUMNS)).astype(DTYPES)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # An exclusive lock: a lock file beside the table, never deleted (that would race a waiter).
        with FileLock(self.path.parent / f".{self.path.name}.lock"):
            # Writers hold the lock while their temporary exists: one found now is a killed writer's.
            remove_stale_temporaries(self.path)
            old = self.read()
            kept = old[~old["run_id"].isin(set(new["run_id"]))]
            parts = [kept, new] if len(kept) else [new]
            table = pd.concat(parts, ignore_index=True)
            table = table.drop_duplicates(subset=["run_id", "metric"], keep="last")
            with atomic_path(self.path) as tmp:
                table.to_csv(tmp, index=False)


# ---- aggregation -----------------------------------------------------------------------------------------------

def aggregate(df: pd.DataFrame, by: Sequence[str] = GROUP_KEYS) -> pd.DataFrame:
    """Mean over seeds per group, with n, std (ddof=1), the 95% t-interval half-width ci95 (NaN when n == 1), low
    and high; NaN values are left out. Sorted by the group keys."""
    by = list(by)
    missing = [c for c in (*by, "value") if c not in df.columns]
    if missing:
        raise KeyError(f"aggregate needs the column(s) {', '.join(missing)}; the frame has {', '.join(df.columns)}.")
    carry_label = "fraction" in by and "fraction_label" in df.columns and "fraction_label" not in by
    if df.empty:
        cols = [*by, *(["fraction_label"] if carry_label else []), *STAT_COLUMNS]
        return pd.DataFrame({c: pd.Series([], dtype=df[c].dtype if c in df.columns else "float64") for c in cols})
    from scipy import stats  # imported where used: scipy.stats takes seconds to import

    grouped = df.groupby(by, sort=True, dropna=False)
    out = grouped["value"].agg(n="count", mean="mean", std="std").reset_index()
    if carry_label:  # the label sits right after the fraction it names
        out.insert(out.columns.get_loc("fraction") + 1, "fraction_label", grouped["fraction_label"].first().to_numpy())
    n = out["n"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(n > 1, stats.t.ppf(0.975, np.maximum(n - 1, 1)), np.nan)
        out["ci95"] = t * out["std"].to_numpy(dtype=float) / np.sqrt(n)
    out["low"] = out["mean"] - out["ci95"]
    out["high"] = out["mean"] + out["ci95"]
    out["n"] = out["n"].astype("int64")
    return out.reset_index(drop=True)


def report_order(agg: pd.DataFrame) -> pd.DataFrame:
    """`aggregate`'s rows in reading order: per model and task, fractions from 1 (the original) down to 0 as numbers
    (as labels, 1/8 sorts before 1/2), then constants and selection."""
    keys = [c for c in ("model", "task", "profile", "layout", "dtype", "probe_inputs", "precision", "execution",
                        "batch_order", "metric") if c in agg.columns]
    ordered = agg.assign(_fraction=-agg["fraction"].astype(float))
    ordered = ordered.sort_values([*keys, "_fraction", "constants", "selection"], kind="stable")
    return ordered.drop(columns="_fraction").reset_index(drop=True)


def with_heads_kept(agg: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """`agg` with a `heads_kept` column: how many heads each fraction keeps input-dependent, out of all where
    fraction 1 ran (``2/36``)."""
    if agg.empty or "n_input_dependent" not in rows or "fraction_label" not in agg:
        return agg
    kept = rows.groupby(["model", "fraction_label"])["n_input_dependent"].first()
    total = rows[rows["fraction_label"].astype(str) == "1"].groupby("model")["n_input_dependent"].first()

    def label(model: str, fraction: str) -> str:
        k = kept.get((model, fraction))
        if k is None or pd.isna(k):
            return ""
        return f"{int(k)}/{int(total[model])}" if model in total else str(int(k))

    heads = [label(m, f) for m, f in zip(agg["model"], agg["fraction_label"].astype(str))]
    at = list(agg.columns).index("fraction_label") + 1
    return agg.assign(heads_kept=heads)[[*agg.columns[:at], "heads_kept", *agg.columns[at:]]]


def relative_drop(agg: pd.DataFrame, baseline_fraction: float | Fraction | str = 1.0,
                  target_fraction: float | Fraction | str = 0.0, *, match: Sequence[str] | None = None
                  ) -> pd.DataFrame:
    """(baseline - target) / |baseline| of `aggregate`'s seed means, per group (paper Fig. 3); positive values are
    drops, NaN without a baseline. Each target row pairs with the baseline row that agrees on `match` (default:
    every group column but the fraction)."""
    if "mean" not in agg.columns or "fraction" not in agg.columns:
        raise KeyError("relative_drop needs aggregate()'s output (columns 'fraction' and 'mean'); "
                       f"got {', '.join(agg.columns)}.")
    keys_all = [c for c in agg.columns if c not in STAT_COLUMNS and c not in ("fraction", "fraction_label")]
    keys = list(match) if match is not None else keys_all
    missing = [c for c in keys if c not in agg.columns]
    if missing:
        raise KeyError(f"relative_drop cannot match on missing column(s) {', '.join(missing)}.")
    bf, tf = float(as_fraction(baseline_fraction)), float(as_fraction(target_fraction))
    frac = agg["fraction"].to_numpy(dtype=float)
    base = agg[np.isclose(frac, bf, rtol=0, atol=1e-12)]
    target = agg[np.isclose(frac, tf, rtol=0, atol=1e-12)]
    dup = base.duplicated(keys, keep=False) if keys else pd.Series(len(base) > 1, index=base.index)
    if dup.any():
        example = base.loc[dup, keys].iloc[0].to_dict() if keys else {}
        raise ValueError(f"ambiguous baseline: several rows at fraction {bf:g} agree on {keys} (e.g. {example}); "
                         "pass a wider match= or filter the rows first.")
    out = target[keys_all].copy()
    out["target"] = target["mean"].to_numpy()
    baseline = base[keys + ["mean"]].rename(columns={"mean": "baseline"})
    if keys:
        out = out.merge(baseline, on=keys, how="left")
    else:
        out["baseline"] = baseline["baseline"].iloc[0] if len(baseline) else math.nan
    b, t = out["baseline"].to_numpy(dtype=float), out["target"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["relative_drop"] = np.where(b != 0, (b - t) / np.abs(b), np.nan)
    out = out[[*keys_all, "baseline", "target", "relative_drop"]]
    return out.sort_values(keys_all, kind="stable").reset_index(drop=True) if keys_all else out.reset_index(drop=True)
