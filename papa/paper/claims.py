"""The paper's claims read off a run's results: per claim a verdict, our numbers in one line, and the figure (or
table) that shows it. `papa reproduce` ends with `format_claims` of what it just computed.

Each claim is read with the section functions the notebooks use (`papa.paper.sections`, `papa.paper.patterns`), on
the rows of ``<out>/results.csv`` and the pattern tables under ``<out>/tables/``; the claims' texts and the paper's
numbers are `papa.paper.paper_numbers`'. The verdicts are rules, stated beside the constants below, not judgement:

* ``holds``: the rule is met on every task (and model) the run has;
* ``partly``: on some of them, or only roughly (a share within `SHARE_PARTLY` of the paper's, not `SHARE_CLOSE`);
* ``does not hold``: on none;
* ``not read``: the run has nothing to read the claim on (e.g. Fig. 3 needs two models, the quick profile runs one).
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from papa.core.vocabulary import (DATA_FREE_KINDS, DECODER_LAYOUT, NONE, PAPER_BASE, PAPER_LARGE,
                                  SELECTION_METHODS)
from papa.paper.paper_numbers import (CLAIMS, PAPER_DIAGONAL_SHARE, PAPER_MAX_RELATIVE_DROP,
                                      PAPER_AVERAGE_RELATIVE_DROP, PAPER_SPECIAL_SHARE)
from papa.paper.patterns import pattern_summary
from papa.paper.sections import (DOWNSTREAM_TASKS, LEARNS_TABLES, average_beats, fraction_claims, main_curves,
                                 method_ranks, performance_vs_drop, selection_curves, short_model, split_learning)
from papa.runs.results import aggregate

VERDICTS = ("holds", "partly", "does not hold", "not read")
# "No major drop" at 1/2 (Fig. 2), read as: within this many points of the metric (0.02 = 2 points).
HALF_TOLERANCE = 0.02
# A share of heads (Fig. 4) is close to the paper's "about X%" within SHARE_CLOSE, roughly so within SHARE_PARTLY.
SHARE_CLOSE, SHARE_PARTLY = 0.15, 0.35
# "Spread over several tokens rather than one" (Fig. 4): median normalised row entropy at least this.
SPREAD_THRESHOLD = 0.5


@dataclass(frozen=True)
class ClaimReading:
    """One claim of the paper as this run reads it."""

    claim: str       # key of `papa.paper.paper_numbers.CLAIMS`
    where: str       # the paper's figure or table
    notebook: str    # the section notebook that computes it
    verdict: str     # one of VERDICTS
    ours: str        # our numbers, one line
    evidence: str    # the figure (or table) behind it, relative to the run's output folder

    @property
    def text(self) -> str:
        """The paper's claim."""
        return CLAIMS[self.claim]


def _verdict(met: int, of: int) -> str:
    if of == 0:
        return "not read"
    return "holds" if met == of else "partly" if met else "does not hold"


def _label(model: str, task: str, models: int) -> str:
    return task if models < 2 else f"{task}, {short_model(model)}"


def _share_verdict(ours: float, paper: float) -> str:
    gap = abs(ours - paper)
    return "holds" if gap <= SHARE_CLOSE else "partly" if gap <= SHARE_PARTLY else "does not hold"


def _downstream(results: pd.DataFrame) -> pd.DataFrame:
    return results[results.task.isin(DOWNSTREAM_TASKS)]


def _fraction_readings(results: pd.DataFrame) -> list[ClaimReading]:
    """Fig. 2's two claims and Fig. 3's, from the λ curves with average constants of the task's own inputs."""
    figure2, figure3 = "figures/fig2_main_results.png", "figures/fig3_performance_vs_drop.png"
    curves = main_curves(_downstream(results))
    claims = fraction_claims(curves) if not curves.empty else pd.DataFrame()
    models = curves["model"].nunique() if not curves.empty else 0
    out = []

    half = claims["drop_at_half"].dropna() if "drop_at_half" in claims else pd.Series(dtype=float)
    if half.empty:
        out.append(ClaimReading("fig2_half", "Fig. 2", "02_main_results", "not read",
                                "no task was run at fractions 1 and 1/2", figure2))
    else:
        (model, task, _), worst = half.idxmax(), half.max()
        within = int((half <= HALF_TOLERANCE + 1e-12).sum())
        out.append(ClaimReading(
            "fig2_half", "Fig. 2", "02_main_results", _verdict(within, len(half)),
            f"largest drop at 1/2: {worst:.3f} ({_label(model, task, models)}); within {HALF_TOLERANCE * 100:.0f} "
            f"points of the original on {within} of {len(half)} tasks", figure2))

    rel = (claims["relative_drop_at_0"].replace([np.inf, -np.inf], np.nan).dropna()
           if "relative_drop_at_0" in claims else pd.Series(dtype=float))
    if not rel.empty:  # a score of 0 (a probe that learnt nothing) has no relative drop
        rel = rel[claims.loc[rel.index, "original"] != 0]
    if rel.empty:
        out.append(ClaimReading("fig2_all", "Fig. 2", "02_main_results", "not read",
                                "no task with a non-zero original score was run at fractions 1 and 0", figure2))
    else:
        (model, task, _), worst = rel.idxmax(), rel.max()
        out.append(ClaimReading(
            "fig2_all", "Fig. 2", "02_main_results", "holds" if worst <= PAPER_MAX_RELATIVE_DROP else "does not hold",
            f"mean relative drop at 0: {rel.mean():.1%} (paper {PAPER_AVERAGE_RELATIVE_DROP:.0%}), largest "
            f"{worst:.1%} ({_label(model, task, models)}; paper: never over {PAPER_MAX_RELATIVE_DROP:.0%})", figure2))

    per_model = performance_vs_drop(curves) if not curves.empty else pd.DataFrame()
    if len(per_model) < 2:
        out.append(ClaimReading("fig3", "Fig. 3", "02_main_results", "not read",
                                f"{len(per_model)} model(s): the claim compares models (the full profile runs six)",
                                figure3))
    else:
        rho = per_model["original"].rank().corr(per_model["relative_drop"].rank())
        better_loses_more = not math.isnan(rho) and rho > 0
        out.append(ClaimReading(
            "fig3", "Fig. 3", "02_main_results", "holds" if better_loses_more else "does not hold",
            f"rank correlation of original score and relative drop over {len(per_model)} models: {rho:+.2f}",
            figure3))
    return out


def _pattern_readings(patterns: dict[str, pd.DataFrame]) -> list[ClaimReading]:
    """Fig. 4's three claims from the pattern table of the first task that has one."""
    if not patterns:
        return [ClaimReading(claim, "Fig. 4", "03_constant_patterns", "not read", "no pattern table in this run",
                             "figures/fig4_constant_matrices_<task>.png")
                for claim in ("fig4_diagonal", "fig4_special", "fig4_spread")]
    task = sorted(patterns)[0]
    summary = pattern_summary(patterns[task])
    figure = f"figures/fig4_constant_matrices_{task}.png"
    heads = int(summary["heads"])
    diagonal, special, spread = summary["diagonal"], summary["special"], summary["median_spread"]
    return [
        ClaimReading("fig4_diagonal", "Fig. 4", "03_constant_patterns",
                     _share_verdict(diagonal, PAPER_DIAGONAL_SHARE),
                     f"{diagonal:.0%} of {heads} heads diagonal ({task} constants; paper about "
                     f"{PAPER_DIAGONAL_SHARE:.0%})", figure),
        ClaimReading("fig4_special", "Fig. 4", "03_constant_patterns", _share_verdict(special, PAPER_SPECIAL_SHARE),
                     f"{special:.0%} of {heads} heads mostly on special tokens (paper about {PAPER_SPECIAL_SHARE:.0%})",
                     figure),
        ClaimReading("fig4_spread", "Fig. 4", "03_constant_patterns",
                     "holds" if spread >= SPREAD_THRESHOLD else "does not hold",
                     f"median row spread {spread:.2f} (0 = one token, 1 = uniform; several tokens: at least "
                     f"{SPREAD_THRESHOLD})", figure),
    ]


def _table1_reading(results: pd.DataFrame) -> ClaimReading:
    table = "tables/table1_alternative_matrices.csv"
    zero = _downstream(results)
    zero = zero[(zero.fraction == 0.0) & zero.constants_corpus.isin(["task", NONE])]
    beats = average_beats(zero, DATA_FREE_KINDS) if not zero.empty else pd.DataFrame()
    if beats.empty or len(beats.columns) < len(DATA_FREE_KINDS):
        return ClaimReading("table1", "Table 1", "04_alternative_matrices", "not read",
                            "average and data-free constants were not all run with every head replaced", table)
    every = beats.all(axis=1)
    models = beats.index.get_level_values("model").nunique()
    missed = [_label(m, t, models) for (m, t), ok in every.items() if not ok]
    return ClaimReading(
        "table1", "Table 1", "04_alternative_matrices", _verdict(int(every.sum()), len(every)),
        f"average constants beat identity, Toeplitz and zeros on {int(every.sum())} of {len(every)} tasks"
        + (f" (not on {', '.join(missed)})" if missed else ""), table)


def _table2_reading(results: pd.DataFrame) -> ClaimReading:
    table = "tables/table2_data_dependence.csv"
    rows = _downstream(results)
    rows = rows[(rows.constants == "average") & (rows.fraction == 0.0) & (rows.selection == NONE)]
    others = sorted(set(rows.constants_corpus) - {"task", NONE})
    if rows.empty or not others or "task" not in set(rows.constants_corpus):
        return ClaimReading("table2", "Table 2", "05_data_dependence", "not read",
                            "constants from another corpus were not run beside the task's own", table)
    other = others[0]
    agg = aggregate(rows[rows.constants_corpus.isin(["task", other])])
    wide = agg.pivot_table(index=["model", "task"], columns="constants_corpus", values=["mean", "ci95"],
                           aggfunc="first").dropna(subset=[("mean", "task"), ("mean", other)])
    if wide.empty:
        return ClaimReading("table2", "Table 2", "05_data_dependence", "not read",
                            f"no task was run with both its own and {other}'s constants", table)
    gap = (wide[("mean", other)] - wide[("mean", "task")]).abs()
    # Intervals that overlap: the two constants cannot be told apart (one seed: no interval, only equal means).
    reach = wide[("ci95", "task")].fillna(0) + wide[("ci95", other)].fillna(0)
    alike = gap <= reach + 1e-12
    (model, task), largest = gap.idxmax(), gap.max()
    models = wide.index.get_level_values("model").nunique()
    return ClaimReading(
        "table2", "Table 2", "05_data_dependence", _verdict(int(alike.sum()), len(alike)),
        f"constants from {other}'s inputs within the 95% intervals of the task's own on {int(alike.sum())} of "
        f"{len(alike)} tasks "
        f"(largest difference {largest:.3f}, {_label(model, task, models)})", table)


def _fig5_reading(results: pd.DataFrame) -> ClaimReading:
    figure = "figures/fig5_head_selection.png"
    methods = [m for m in SELECTION_METHODS if m in set(results.selection)]
    curves = selection_curves(results, methods) if len(methods) > 1 else pd.DataFrame()
    if not curves.empty:  # only the points where every method ran can rank them (Fig. 2's tasks run λ alone)
        mid = curves[(curves.fraction > 0) & (curves.fraction < 1)]
        complete = mid.groupby(["model", "task", "fraction_label"])["selection"].transform("nunique") == len(methods)
        curves = mid[complete]
    ranks = method_ranks(curves) if not curves.empty else pd.DataFrame()
    if ranks.empty or "lambda" not in ranks:
        return ClaimReading("fig5", "Fig. 5", "06_head_selection", "not read",
                            "λ and another selection method were not run at a fraction between 0 and 1", figure)
    best = int((ranks["lambda"] == 1).sum())
    tasks = ", ".join(sorted(set(ranks.index.get_level_values("task"))))
    line = f"λ ranking best of {len(ranks.columns)} methods at {best} of {len(ranks)} fractions ({tasks})"
    if "reversed_lambda" in ranks:
        worst = int((ranks["reversed_lambda"] == ranks.max(axis=1)).sum())
        line += f"; reversed λ worst at {worst} of {len(ranks)}"
    return ClaimReading("fig5", "Fig. 5", "06_head_selection", _verdict(best, len(ranks)), line, figure)


# The pretraining objectives Fig. 6 compares with the downstream tasks: an encoder's MLM (a probe trained on its
# features) and a decoder's LM (scored by its own frozen head, notebook 08).
OBJECTIVES = ("mlm", "lm")
# The paper's hypothesis is about a model's own pretraining objective: MLM is read for the paper's MLM-pretrained
# encoders only (not ELECTRA, pretrained on replaced-token detection, nor e.g. a sentence-embedding model without an
# MLM head), LM for every decoder.
MLM_PRETRAINED = tuple(short_model(m) for m in (*PAPER_BASE, *PAPER_LARGE))


def _own_objective(task: str, model: str) -> bool:
    return task == "lm" or (task == "mlm" and short_model(model) in MLM_PRETRAINED)


def _fig6_reading(results: pd.DataFrame) -> ClaimReading:
    figure = "figures/fig6_mlm_electra.png"
    curves = main_curves(results[results.task.isin([*OBJECTIVES, *DOWNSTREAM_TASKS])])
    claims = fraction_claims(curves) if not curves.empty else pd.DataFrame()
    if "relative_drop_at_0" not in claims:
        return ClaimReading("fig6", "Fig. 6", "07_mlm_electra", "not read", "no run at fractions 1 and 0", figure)
    rel = claims.reset_index()
    rel = rel[np.isfinite(rel["relative_drop_at_0"]) & (rel["original"] != 0)]
    own = np.array([_own_objective(t, m) for t, m in zip(rel.task, rel.model)], dtype=bool)
    mlm, downstream = rel[own], rel[~rel.task.isin(OBJECTIVES)]
    others = sorted({short_model(m) for m in rel[rel.task.isin(OBJECTIVES) & ~own].model})
    unread = f" (not read: MLM probes of {', '.join(others)}, not pretrained with MLM)" if others else ""
    models = sorted(set(mlm.model) & set(downstream.model))
    if not models:
        return ClaimReading("fig6", "Fig. 6", "07_mlm_electra", "not read",
                            "a model's own pretraining objective (MLM for the paper's MLM-pretrained encoders, LM for "
                            "a decoder) and a downstream task whose probe learns were not both run at fractions 1 "
                            "and 0" + unread, figure)
    more = 0
    for model in models:
        mine = mlm[mlm.model == model]["relative_drop_at_0"].iloc[0]
        more += int(mine > downstream[downstream.model == model]["relative_drop_at_0"].mean())
    parts = []
    for model in models:
        first = mlm[mlm.model == model].iloc[0]
        others = downstream[downstream.model == model]["relative_drop_at_0"].mean()
        parts.append(f"{first['task'].upper()} {first['original']:.2f} -> {first['at_0']:.2f} nats at 0, a relative "
                     f"drop of {first['relative_drop_at_0']:.1%}, against {others:.1%} on the downstream tasks"
                     + (f" ({short_model(model)})" if len(models) > 1 else ""))
    line = "; ".join(parts)
    if len(models) > 1:
        line += f"; the objective drops more for {more} of {len(models)} models"
    line += unread
    return ClaimReading("fig6", "Fig. 6", "07_mlm_electra", _verdict(more, len(models)), line, figure)


def read_claims(results: pd.DataFrame, patterns: dict[str, pd.DataFrame] | None = None,
                learns: pd.DataFrame | None = None) -> list[ClaimReading]:
    """Every claim of `papa.paper.paper_numbers.CLAIMS`, in the paper's order, read on `results` (rows of a results
    table, `papa.runs.results.ResultsTable.read`) and `patterns` (task -> `papa.paper.patterns.head_patterns`).
    With `learns` (`papa.paper.sections.probes_learn`), tasks whose probe does not beat its majority baseline are
    left out: whatever the attention, such a probe cannot tell one attention matrix from another."""
    results, _ = split_learning(results, learns)
    readings = [*_fraction_readings(results), *_pattern_readings(patterns or {}), _table1_reading(results),
                _table2_reading(results), _fig5_reading(results), _fig6_reading(results)]
    order = list(CLAIMS)
    return sorted(readings, key=lambda r: order.index(r.claim))


def run_claims(out_dir: str | Path, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None) -> list[ClaimReading]:
    """`read_claims` on a run's output folder (``results.csv``, ``tables/fig4_patterns_<task>.csv``), keeping the
    rows of `profile`, `layout` and `dtype` when given (a folder may hold several runs' rows)."""
    from papa.runs.results import ResultsTable

    out = Path(out_dir)
    results = ResultsTable(out / "results.csv").read()
    for column, wanted in (("profile", profile), ("dtype", dtype)):
        if wanted is not None:
            results = results[results[column] == wanted]
    if layout is not None:
        results = results[_in_layout(results, layout)]
    patterns = {path.stem.removeprefix("fig4_patterns_"): pd.read_csv(path, index_col=0)
                for path in sorted((out / "tables").glob("fig4_patterns_*.csv"))}
    return read_claims(results, patterns, read_learns(out))


def _in_layout(results: pd.DataFrame, layout: str) -> pd.Series:
    """Rows made in `layout`, and the rows of models made only in the decoder layout: a profile's layout applies to
    encoders, while a causal LM always reads left-aligned inputs (`papa.method.layout.layout_for`)."""
    mine = results["layout"] == layout
    decoders = set(results.loc[results["layout"] == DECODER_LAYOUT, "model"]) - set(results.loc[mine, "model"])
    return mine | results["model"].isin(decoders)


def read_learns(out_dir: str | Path) -> pd.DataFrame | None:
    """The run's `papa.paper.sections.probes_learn` tables (notebook 02's and notebook 08's), together, or None."""
    paths = [Path(out_dir) / "tables" / f"{name}.csv" for name in LEARNS_TABLES]
    tables = [pd.read_csv(path) for path in paths if path.is_file()]
    return pd.concat(tables, ignore_index=True).set_index(["model", "task"]) if tables else None


def format_claims(readings: Sequence[ClaimReading], out_dir: str | Path, width: int = 116) -> str:
    """Per claim: where in the paper, the verdict and the claim; then our numbers and the file to look at (marked
    "not written" when the run did not write it). Lines are wrapped at `width`, never inside a path."""
    lines = []
    for r in readings:
        head = f"  {r.where:<8} {r.verdict:<14} "
        indent = " " * len(head)
        evidence = Path(out_dir) / r.evidence
        missing = "" if evidence.is_file() or r.verdict == "not read" else " (not written)"
        lines.append(textwrap.fill(r.text, width=width, initial_indent=head, subsequent_indent=indent))
        lines.append(textwrap.fill(f"ours: {r.ours} -> {evidence}{missing}", width=width, initial_indent=indent,
                                   subsequent_indent=indent + "      ", break_long_words=False,
                                   break_on_hyphens=False))
    return "\n".join(lines)
