"""Fig. 4's claims (notebook 03): the shares of diagonal heads and of heads on special tokens, and the median row
spread, described from the run's pattern tables (no verdict)."""
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
