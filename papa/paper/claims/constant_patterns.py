"""Fig. 4's claims (notebook 03): the shares of diagonal heads and of heads on special tokens, and the median row
spread, described from the run's pattern tables (no verdict), and the shares set beside the paper's in a sentence."""
from __future__ import annotations

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.paper.claims.rules import ClaimReading, Part, not_read_claim
from papa.paper.paper_numbers import PAPER_DIAGONAL_SHARE, PAPER_SPECIAL_SHARE
from papa.paper.patterns import pattern_summary
from papa.runs.statistics import DESCRIPTIVE


#: Fig. 4's claims: the pattern share each describes (`papa.paper.patterns.pattern_summary`), and the paper's value.
FIG4 = {"fig4_diagonal": ("diagonal", "diagonal heads", PAPER_DIAGONAL_SHARE),
        "fig4_special": ("special", "heads mostly on special tokens", PAPER_SPECIAL_SHARE),
        "fig4_spread": ("median_spread", "median row spread", None)}


def pattern_readings(patterns: dict[str, pd.DataFrame], intervals: dict[str, pd.DataFrame]) -> list[ClaimReading]:
    """Fig. 4's three claims described from the pattern table of the first task that has one, with the bootstrap
    interval of `papa.paper.pattern_intervals` where the run wrote it (constants have no seeds to test with)."""
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
    """One sentence on Fig. 4's two shares that the paper gives a value for (diagonal heads, heads on [CLS]/[SEP]):
    the run's share and 95% interval (`intervals`: indexed by share, columns ``value``, ``low``, ``high`` and
    ``heads``, as `papa.paper.pattern_intervals` writes them) beside the paper's, saying where the interval excludes
    the paper's value (lies wholly below or above it) and where it holds it."""
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
