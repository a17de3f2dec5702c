"""The module of the constant-patterns section's notebook (03, Fig. 4): pattern shares beside the paper's, and the
claims they describe, without a verdict."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from papa.core.run_folder import RunFolder
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims
from papa.paper.claims.rules import ClaimReading, Part, not_read_claim
from papa.paper.claims.run_tables import RunTables
from papa.paper.figures import constant_heatmaps, legend_outside, save_figure
from papa.paper.paper_numbers import CLAIMS, PAPER_DIAGONAL_SHARE, PAPER_SPECIAL_SHARE
from papa.paper.pattern_intervals import pattern_share_intervals
from papa.paper.patterns import head_patterns, pattern_summary, representative_heads, special_slots
from papa.paper.tables import save_table, setup, short_model
from papa.runs.session import GridConfig, task_constants, task_constants_corpus
from papa.runs.statistics import DESCRIPTIVE

#: The pattern table's entries that are no share of heads (a count, a median).
_NOT_HEAD_SHARES = ("heads", "median_spread")


def pattern_shares(shares: pd.Series | pd.DataFrame, *, title: str = "", paper: bool = True) -> plt.Figure:
    """Fig. 4's shares of heads by pattern, one bar each (a `pattern_summary` series, or a frame with ``value``,
    ``low`` and ``high``); with `paper`, the paper's shares as dashed ticks."""
    table = shares.to_frame("value") if isinstance(shares, pd.Series) else shares
    if "value" not in table:
        raise ValueError("pattern shares need a `value` per share (pattern_summary or pattern_share_intervals)")
    table = table.drop(index=[n for n in _NOT_HEAD_SHARES if n in table.index]).astype({"value": float})
    names = list(table.index)
    fig, ax = plt.subplots(figsize=(1.0 * len(names) + 2.0, 3.6))
    x = list(range(len(names)))
    yerr = None
    if {"low", "high"} <= set(table.columns):
        yerr = [(table["value"] - table["low"]).clip(lower=0), (table["high"] - table["value"]).clip(lower=0)]
    ax.bar(x, table["value"], yerr=yerr, capsize=3, color="tab:blue", label="this run")
    marks = [(name, share) for name, share in (("diagonal", PAPER_DIAGONAL_SHARE), ("special", PAPER_SPECIAL_SHARE))
             if paper and name in names]
    for name, share in marks:
        i = names.index(name)
        ax.plot([i - 0.4, i + 0.4], [share, share], color="0.2", linestyle="--", linewidth=1.6,
                label=f"paper (about {share:.0%})")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of heads")
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    legend_outside(fig, [ax], last=[f"paper (about {share:.0%})" for _, share in marks])
    return fig


#: Fig. 4's claims: the pattern share each describes, its name, and the paper's value.
FIG4 = {"fig4_diagonal": ("diagonal", "diagonal heads", PAPER_DIAGONAL_SHARE),
        "fig4_special": ("special", "heads mostly on special tokens", PAPER_SPECIAL_SHARE),
        "fig4_spread": ("median_spread", "median row spread", None)}


def pattern_readings(patterns: dict[str, pd.DataFrame], intervals: dict[str, pd.DataFrame]) -> list[ClaimReading]:
    """Fig. 4's claims described from the first task's pattern table, with its bootstrap interval where written."""
    if not patterns:
        return [not_read_claim(c, "Fig. 4", "03_constant_patterns", RunFolder.figure_file("fig4_constant_matrices_<task>"),
                               "no pattern table in this run") for c in FIG4]
    task = sorted(patterns)[0]
    summary = pattern_summary(patterns[task])
    interval = intervals.get(task)
    figure = RunFolder.figure_file(f"fig4_constant_matrices_{task}")
    heads = int(summary["heads"])
    readings = []
    for claim, (share, name, paper) in FIG4.items():
        value = float(summary[share])
        fmt = (lambda v: f"{v:.0%}") if paper is not None else (lambda v: f"{v:.2f}")  # noqa: E731
        if interval is not None and share in interval.index:
            low, high = float(interval.loc[share, "low"]), float(interval.loc[share, "high"])
            blocks = int(interval.loc[share, "blocks"]) if "blocks" in interval else None
            spread = f" [{fmt(low)}, {fmt(high)}]" + (f" (bootstrap over {blocks} blocks of corpus sentences)"
                                                       if blocks else " (bootstrap over corpus sentences)")
        else:
            spread = f" (no interval: tables/fig4_pattern_intervals_{task}.csv not written)"
        text = (f"{fmt(value)}{spread} of {heads} heads ({task} constants; paper about {paper:.0%})" if paper is not None
                else f"{fmt(value)}{spread} (0 = one token, 1 = uniform; {heads} heads, {task} constants)")
        part = Part(name, DESCRIPTIVE, text)
        readings.append(ClaimReading(claim, "Fig. 4", "03_constant_patterns", DESCRIPTIVE, f"{name}: {text}", figure,
                                     (part,)))
    return readings


def paper_comparison(intervals: pd.DataFrame) -> str:
    """One sentence setting Fig. 4's diagonal and special shares with their 95% intervals beside the paper's, and
    whether each interval holds the paper's value."""
    clauses = []
    for share, name, paper in (entry for entry in FIG4.values() if entry[2] is not None):
        if share not in intervals.index:
            continue
        value, low, high = (float(intervals.loc[share, c]) for c in ("value", "low", "high"))
        side = "below" if high < paper else "above" if low > paper else None
        verdict = (f"an interval wholly {side} it (the run disagrees with the paper)" if side
                   else "an interval that holds it")
        clauses.append(f"{name} {value:.0%} [{low:.0%}, {high:.0%}] against the paper's about {paper:.0%}, {verdict}")
    if not clauses:
        return "No pattern share with an interval to set beside the paper's: the run wrote no pattern intervals."
    heads = f"{int(intervals['heads'].iloc[0])} heads, " if "heads" in intervals else ""
    return f"Fig. 4's shares beside the paper's ({heads}95% bootstrap intervals over the corpus sentences): " \
           f"{'; '.join(clauses)}."


def read(run: RunTables) -> list[ClaimReading]:
    """Fig. 4's claims described from a run's pattern tables."""
    return pattern_readings(dict(run.patterns), dict(run.intervals))


claims = SectionClaims("03_constant_patterns", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["CLAIMS", "FIG4", "GridConfig", "PAPER_DIAGONAL_SHARE", "PAPER_SPECIAL_SHARE", "check_table", "claims",
           "constant_heatmaps", "head_patterns", "paper_comparison", "pattern_readings", "pattern_share_intervals",
           "pattern_shares", "pattern_summary", "read", "representative_heads", "save_figure", "save_table", "setup",
           "short_model", "special_slots", "task_constants", "task_constants_corpus"]
