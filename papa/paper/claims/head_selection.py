"""Fig. 5's claim (notebook 06): λ order beats every other way of choosing the heads to keep, and reversed λ is
the worst, over every draw of the drawn orders. `selection_comparisons` is every comparison the claim counts (the
claim and Fig. 5's panels read the same list); `fig5_sentence` says the verdict in words."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE, RANKED, SELECTION_METHODS
from papa.method.selection import as_fraction
from papa.paper.claims.rules import (RANKINGS, ClaimReading, Part, claim_reading, compared_part, not_read_claim,
                                     tally_part, unread_part)
from papa.paper.claims.scores import DRAWN_ORDERS, ClaimRun, drawn_numbers, order_contrast, part_label
from papa.paper.sections import OBJECTIVE_TASKS, SELECTION_NAMES
from papa.runs.statistics import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, Estimate, above

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


def fig5_sentence(run: ClaimRun) -> str:
    """Fig. 5's verdict on `run` in words, from its numbers (notebook 08 and docs/decoders.md print it for the
    decoder): per model, task and λ ranking, which comparisons fail beyond Holm's correction and by how much, which
    hold, which are undecided and how close they lie, what was not run or not read, and the fractions where λ scores
    below every head constant; "" where nothing was compared."""
    comparisons = selection_comparisons(run)
    if not comparisons:
        return ""
    reading = read_fig5(run)
    members = {m.name: m for p in reading.parts for m in p.members}
    groups: dict[tuple, list[SelectionComparison]] = {}
    for c in comparisons:
        groups.setdefault((c.model, c.task, c.profile), []).append(c)
    models = {c.model for c in comparisons}
    who = ("the decoder" if len(models) == 1 else "the decoders") if run.decoders else "the encoders"
    family = max((m.test.family for m in members.values() if m.test is not None), default=0)
    head = f"Fig. 5 {reading.verdict_text} on {who}" + (
        f" (Holm's correction over its {family} comparisons read)." if family else ".")
    return " ".join([head, *(_group_sentence(run, group, members, len(models)) for group in groups.values())])


def _group_sentence(run: ClaimRun, group: list[SelectionComparison], members: dict[str, Part], models: int) -> str:
    """`fig5_sentence` on one (model, task, λ ranking): its comparisons by verdict, then λ against every head
    constant, then what was not run or not read."""
    first = group[0]
    where = part_label(first.model, first.task, models) + (
        "" if first.profile is None else f", λ of the {first.profile} profile")
    unit = " nats" if first.task in OBJECTIVE_TASKS else ""
    labels = sorted({c.fraction for c in group}, key=lambda label: -as_fraction(label))
    pairs: dict[tuple[str, str], list[SelectionComparison]] = {}
    for c in group:
        if not c.gate:
            pairs.setdefault((c.kind, c.method), []).append(c)
    clauses = []
    named = (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE)
    others = sorted({members[c.name].verdict for found in pairs.values() for c in found} - set(named))
    for verdict in (*named, *others):
        for (kind, method), found in pairs.items():
            mine = sorted((c for c in found if members[c.name].verdict == verdict),
                          key=lambda c: -as_fraction(c.fraction))
            if mine:
                clauses.append(_verdict_clause(kind, method, verdict, mine, unit))
    sentences = [f"On {where}, " + "; ".join(clauses) + "."] if clauses else []
    below = _below_every_head(run, first, labels) if pairs else []  # a gated ranking's order is not read
    if below:
        constant = below[0][2]
        sentences.append(f"At {_joined([label for label, _, _ in below])} λ scores below every head constant "
                         f"({constant:.3f}{unit}): λ − every head constant "
                         + _joined([f"{d.text(3)}{unit} at {label}" for label, d, _ in below])
                         + ", so keeping those heads input-dependent in λ order does worse than replacing them all.")
    gated = sorted({c.point for c in group if c.gate})
    if gated:
        sentences.append(("Not read" if sentences else f"On {where}, not read")
                         + f" at {len(gated)} points ({next(c.gate for c in group if c.gate)}).")
    if pairs and not any(kind == ABOVE_REVERSED for kind, _ in pairs):
        sentences.append("Reversed λ was not run, so 'reversed λ is the worst' is not read.")
    return " ".join(sentences)


def _verdict_clause(kind: str, method: str, verdict: str, found: list[SelectionComparison], unit: str) -> str:
    """One (kind, method)'s comparisons of one verdict, e.g. "λ scores below random at 1/2 (λ − random -2.388
    [-3.438, -1.337] nats) and 1/16 (-0.124 [-0.167, -0.082] nats)"."""
    other = SELECTION_NAMES.get(method, method)
    if kind == LAMBDA_BEATS:
        subject, versus, difference = "λ", other, f"λ − {other}"
    else:
        subject, versus, difference = other, "reversed λ", f"{other} − reversed λ"
    verb = {DOES_NOT_HOLD: f"scores below {versus}", HOLDS: f"beats {versus}",
            INCONCLUSIVE: f"is undecided against {versus}"}.get(verdict, f"is {verdict} against {versus}")
    points = [f"{c.fraction} ({difference + ' ' if i == 0 else ''}{c.estimate.text(3)}{unit})"
              for i, c in enumerate(found)]
    text = f"{subject} {verb} at {_joined(points)}"
    if verdict == INCONCLUSIVE and len(found) > 1:
        text += f": within {max(abs(c.estimate.value) for c in found):.3f}{unit} of it"
    return text


def _below_every_head(run: ClaimRun, c: SelectionComparison, labels: list[str]) -> list[tuple[str, Estimate, float]]:
    """The fractions among `labels` where λ (`c`'s ranking, pooled over its draws) scores below every head replaced
    by constants, beyond the 95% interval of their paired difference: (fraction, λ − every head constant, the
    latter's mean)."""
    constant = run.scores(c.model, c.task, "average", "task", NONE, "0")
    found = []
    for label in labels:
        draws = run.draws(c.model, c.task, "lambda", label, profile=c.profile)
        if constant is None or not draws:
            continue
        d = order_contrast(list(draws.values()), [constant])
        if d.interval()[1] < 0:
            found.append((label, d, float(constant.values.mean())))
    return found


def _joined(items: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
