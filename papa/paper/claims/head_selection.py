"""Fig. 5's claim (notebook 06): λ order beats every other way of choosing the heads to keep, and reversed λ is
the worst, over every draw of the drawn orders. `selection_comparisons` is every comparison the claim counts (the
claim and Fig. 5's panels read the same list)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE, RANKED, SELECTION_METHODS
from papa.paper.claims.rules import (RANKINGS, ClaimReading, Part, claim_reading, compared_part, not_read_claim,
                                     tally_part, unread_part)
from papa.paper.claims.scores import DRAWN_ORDERS, ClaimRun, drawn_numbers, order_contrast, part_label
from papa.runs.statistics import Estimate, above

#: The two kinds of comparison the claim counts: λ − another order (λ beats it), another order − reversed λ
#: (reversed λ is the worst); and how a table or a figure names each.
LAMBDA_BEATS, ABOVE_REVERSED = "lambda_beats", "above_reversed"
COMPARISON_NAMES = {LAMBDA_BEATS: "λ − other order (above 0: λ beats it)",
                    ABOVE_REVERSED: "other order − reversed λ (above 0: reversed λ is worse)"}


@dataclass(frozen=True)
class SelectionComparison:
    """One comparison Fig. 5's claim counts: at one (model, task, fraction), `kind`'s difference between λ (ranked
    by `profile`'s ranking; None: the grid's) and `method`, paired by seed, positive where the claim holds."""

    model: str
    task: str
    fraction: str              # the fraction's label, e.g. "1/2"
    profile: str | None        # whose λ ranking: None for the grid's own, else another profile's (e.g. "full")
    kind: str                  # LAMBDA_BEATS or ABOVE_REVERSED
    method: str                # the other order (λ itself where `kind` is ABOVE_REVERSED)
    point: str                 # the point as the claim names it, e.g. "sst2 at 1/2, λ of the full profile"
    estimate: Estimate
    numbers: str               # the estimate's text with the draws behind it
    gate: str | None           # why the λ rankings behind it cannot be read; None: they can

    @property
    def name(self) -> str:
        return (f"λ beats {self.method}" if self.kind == LAMBDA_BEATS else f"{self.method} beats reversed λ") + \
            f" ({self.point})"


def selection_comparisons(run: ClaimRun) -> list[SelectionComparison]:
    """Every comparison Fig. 5's claim counts, per task and fraction strictly between 0 and 1 and per λ ranking
    (the grid's, and another profile's learned in parts of its own): λ − each order that is not a λ ranking, and each
    order − reversed λ, over every draw of the drawn orders; those whose rankings are unstable carry the gate's
    reason."""
    methods = [m for m in SELECTION_METHODS if m in set(run.results.selection)]
    mid = run.results[run.results.selection.isin(methods) & (run.results.fraction > 0) & (run.results.fraction < 1)
                      & (run.results.constants == "average") & (run.results.constants_corpus == "task")]
    points = sorted(set(zip(mid.model, mid.task, mid.fraction_label)))
    k = len({m for m, _, _ in points})
    found = []
    for model, task, label in points:
        free = {m: run.draws(model, task, m, label) for m in methods if m not in RANKED}  # drawn the grid's way
        for profile in (None, *run.ranking_profiles(model, task)):
            # λ-ranked methods of `profile`'s ranking against the data-free orders
            ran = {m: run.draws(model, task, m, label, profile=profile) if m in RANKED else free[m] for m in methods}
            ran = {m: list(draws.values()) for m, draws in ran.items() if draws}
            if "lambda" not in ran or len(ran) < 2:
                continue  # Fig. 2's tasks run λ alone
            rankings = [*run.draws(model, task, "lambda", label, profile=profile),
                        *run.draws(model, task, "reversed_lambda", label, profile=profile)]
            gate = run.unstable(model, task, rankings, profile)
            point = f"{part_label(model, task, k)} at {label}" + ("" if profile is None else f", λ of the {profile} "
                                                                                           "profile")
            here = dict(model=model, task=task, fraction=label, profile=profile, point=point, gate=gate)
            for m, draws in ran.items():
                if m not in RANKED:  # λ against the data-free orders
                    d = order_contrast(ran["lambda"], draws)
                    arms = [(RANKINGS, ran["lambda"])] + [(f"{m} orders", draws)] * (m in DRAWN_ORDERS)
                    found.append(SelectionComparison(kind=LAMBDA_BEATS, method=m, estimate=d,
                                                     numbers=drawn_numbers(d, arms), **here))
            if "reversed_lambda" in ran:
                for m, draws in ran.items():
                    if m != "reversed_lambda":
                        d = order_contrast(draws, ran["reversed_lambda"])
                        arms = [(RANKINGS if m in RANKED else f"{m} orders", draws)] * (m in DRAWN_ORDERS) + [
                            (f"reversed {RANKINGS}", ran["reversed_lambda"])]
                        found.append(SelectionComparison(kind=ABOVE_REVERSED, method=m, estimate=d,
                                                         numbers=drawn_numbers(d, arms), **here))
    return found


def comparison_table(comparisons: list[SelectionComparison]) -> pd.DataFrame:
    """`selection_comparisons` as a table, one row per comparison: its difference and 95% interval (uncorrected;
    the claim's verdicts are Holm-corrected across all of them) and ``gate`` (empty where the rankings are read)."""
    rows = []
    for c in comparisons:
        low, high = c.estimate.interval()
        rows.append({"model": c.model, "task": c.task, "fraction": c.fraction, "profile": c.profile or "",
                     "kind": c.kind, "comparison": COMPARISON_NAMES[c.kind], "method": c.method,
                     "difference": c.estimate.value,
                     "low": low if math.isfinite(low) else None, "high": high if math.isfinite(high) else None,
                     "gate": c.gate or ""})
    return pd.DataFrame(rows, columns=["model", "task", "fraction", "profile", "kind", "comparison", "method",
                                       "difference", "low", "high", "gate"])


def read_fig5(run: ClaimRun) -> ClaimReading:
    """Per task and fraction strictly between 0 and 1: λ beats every other order, and reversed λ is the worst, over
    every draw of the drawn orders; a ranking learned by another profile in parts of its own, gated by its own
    draws."""
    where = ("fig5", "Fig. 5", "06_head_selection", RunFolder.figure_file("fig5_head_selection"))
    best: dict[str | None, list[Part]] = {}
    worst: dict[str | None, list[Part]] = {}
    unstable: dict[str | None, dict[str, Part]] = {}
    for c in selection_comparisons(run):
        if c.gate:  # one unread part per point, whatever it compares
            unstable.setdefault(c.profile, {}).setdefault(c.point, unread_part(c.point, c.gate))
            continue
        (best if c.kind == LAMBDA_BEATS else worst).setdefault(c.profile, []).append(
            compared_part(c.name, above(c.estimate), c.numbers))
    profiles = sorted({*best, *unstable}, key=lambda p: (p is not None, p or ""))
    if not profiles:
        return not_read_claim(*where, run.not_run("λ and another selection method at a fraction between 0 and 1",
                                                  lambda r: (r.fraction > 0) & (r.fraction < 1)
                                                  & (r.selection != "lambda") & (r.selection != NONE)))
    parts = []
    for profile in profiles:
        whose = "" if profile is None else f", λ of the {profile} profile"
        gated = list(unstable.get(profile, {}).values())
        none = "no λ ranking could be read" + (f" ({gated[0].numbers})" if gated else "")
        parts += [tally_part(f"λ beats every other method{whose}", best.get(profile, []), none=none),
                  tally_part(f"reversed λ is the worst{whose}", worst.get(profile, []),
                             none="reversed λ not run" if best.get(profile) else none)]
        if gated and best.get(profile):
            parts.append(unread_part(f"{len(gated)} points{whose}", gated[0].numbers))
    return claim_reading(*where, parts)
