"""The module of the head-selection section's notebook (06, Fig. 5): the selection methods, how λ settled, and the
claim that λ order beats every other order and reversed λ is the worst."""
from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE, RANKED, SELECTION_METHODS
from papa.method.selection import as_fraction
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims
from papa.paper.claims.reading import claim_runs, profile_rows, read_each
from papa.paper.claims.rules import (RANKINGS, ClaimReading, Part, claim_reading, compared_part, not_read_claim,
                                     tally_part, unread_part)
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.scores import DRAWN_ORDERS, ClaimRun, drawn_numbers, order_contrast, part_label
from papa.paper.figures import fraction_axis, fraction_curves, fraction_labels, save_figure, x_shifts
from papa.paper.grids import Grids, learned_grids, methods_drawn_again, mid_fractions, run, run_orders
from papa.paper.paper_numbers import CLAIMS
from papa.paper.read_marks import ReadMarks
from papa.paper.tables import (OBJECTIVE_TASKS, SELECTION_NAMES, curve_cells, curves_over_orders, listed, means,
                               orders_run, save_table, setup, short_model)
from papa.runs.statistics import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, VERDICTS, Estimate, above


def grids(models: Sequence[str], tasks: Sequence[str], methods: Sequence[str],
          ranking_draws: Sequence[str] = (), random_draws: int = 0, other_rankings: Sequence[str] = (),
          folder: RunFolder | None = None) -> dict[str, Grids]:
    """The profile's fractions under each of `methods`; the orders drawn again (`ranking_draws`, `random_draws`)
    and `other_rankings` saved under `folder` at the fractions between 0 and 1."""
    declared = {"results": Grids.of(models, tasks, selections=list(methods))}
    draws = methods_drawn_again(methods, ranking_draws, random_draws)
    if draws:
        declared["draws"] = Grids.of(models, tasks, fractions=mid_fractions(), selections=draws)
    ranked = [m for m in methods if m in RANKED]
    return {**declared, **learned_grids(ranked, models, tasks, other_rankings, folder, fractions=mid_fractions(),
                                        draws=ranking_draws)}


#: The profile whose λ ranking is learned as the paper learns it (the whole training set, Table 3's epochs).
PAPER_STEPS_PROFILE = "full"


#: The fractions at which two rankings' kept heads are compared.
AGREEMENT_FRACTIONS = ("1/2", "1/8", "1/16")


def lambda_settling(folder: RunFolder, model: str, task: str,
                    profile: str = PAPER_STEPS_PROFILE) -> pd.DataFrame | None:
    """`papa.probing.convergence.settling_curve` of `profile`'s λ ranking of `model` on `task`, one row per record;
    None where it is not saved under `folder`."""
    from papa.paper.grids import saved_ranking_path
    from papa.probing.convergence import settling_curve
    from papa.runs.lambda_curves import curve_path, load_curve

    curve = curve_path(saved_ranking_path(folder, model, task, profile))
    if not curve.is_file():
        return None
    trace, _ = load_curve(curve)
    return pd.DataFrame(settling_curve(trace, fractions=AGREEMENT_FRACTIONS))


def rankings_agreement(folder: RunFolder, model: str, task: str,
                       reference: str = PAPER_STEPS_PROFILE, profile: str = "cpu",
                       draws: Sequence[tuple[int, int]] | None = None) -> pd.DataFrame | None:
    """How each saved draw ((seed, part) of `draws`) of `profile`'s and `reference`'s λ rankings agrees with
    `reference`'s: ρ, heads kept in common, steps and λ spread; None where the reference is not saved."""
    from papa.method.rankings import load_ranking
    from papa.paper.grids import saved_ranking_path
    from papa.probing.convergence import lambda_movement, ranking_agreement
    from papa.runs.stability import RANKING_DRAWS

    draws = RANKING_DRAWS if draws is None else draws
    reference_path = saved_ranking_path(folder, model, task, reference)
    if not reference_path.is_file():
        return None
    ref = load_ranking(reference_path)
    rows = []
    compared = [(profile, d) for d in draws] + [(reference, d) for d in draws if d != (0, 0)]
    for whose, (seed, part) in compared:
        path = saved_ranking_path(folder, model, task, whose, seed=seed, part=part)
        if not path.is_file():
            continue
        other = load_ranking(path)
        agreement = ranking_agreement(other.lambdas, ref.lambdas, fractions=AGREEMENT_FRACTIONS)
        rows.append({"profile": whose, "seed": seed, "part": part, "steps": other.metadata.get("steps"),
                     "examples": other.metadata.get("examples"),
                     "lambda_spread": lambda_movement(other.lambdas)["lambda_spread"],
                     "spearman": agreement["spearman"],
                     **{f"kept_in_common_{f}": agreement[f"overlap_kept_{f}"] for f in AGREEMENT_FRACTIONS}})
    rows.append({"profile": reference, "seed": 0, "part": 0, "steps": ref.metadata.get("steps"),
                 "examples": ref.metadata.get("examples"),
                 "lambda_spread": lambda_movement(ref.lambdas)["lambda_spread"], "spearman": 1.0,
                 **{f"kept_in_common_{f}": 1.0 for f in AGREEMENT_FRACTIONS}})
    return pd.DataFrame(rows)


def paper_steps_tables(folder: RunFolder, model: str, task: str, profile: str = "cpu",
                       reference: str = PAPER_STEPS_PROFILE) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """`lambda_settling` and `rankings_agreement`, each saved as a table; (None, None) where there is no ranking."""
    settling = lambda_settling(folder, model, task, reference)
    if settling is None:
        return None, None
    agreement = rankings_agreement(folder, model, task, reference, profile)
    save_table(settling, folder, f"lambda_settling_{task}")
    save_table(agreement, folder, f"lambda_rankings_agreement_{task}")
    return settling, agreement


def settling_note(folder: RunFolder, model: str, task: str,
                  profile: str = PAPER_STEPS_PROFILE) -> str:
    """A sentence on `profile`'s λ ranking: its steps, time and where it settled; or how to learn it."""
    from papa.probing.convergence import SETTLED_RHO, settled_at

    settling = lambda_settling(folder, model, task, profile)
    if settling is None:
        return (f"The {profile} profile's λ ranking of {short_model(model)} on {task} is not saved under {folder}: "
                f"learn it with `papa rank --task {task} --profile {profile} --out {folder}` (the whole training "
                "set, Table 3's epochs; it checkpoints itself and resumes where it stopped).")
    last = settling.iloc[-1]
    settled = settled_at(settling.to_dict("records"))
    where = (f"its ranking agreed with the final one at ρ ≥ {SETTLED_RHO} from step {settled:,} on"
             if settled is not None else f"its ranking did not stay within ρ ≥ {SETTLED_RHO} of the final one "
                                         "before the last step")
    return (f"The {profile} profile's λ ranking of {short_model(model)} on {task}: {int(last.step):,} optimizer "
            f"steps, {last.seconds / 3600:.1f} h of λ learning; {where}; λ spans {last.lambda_spread:.3f} at the "
            "end.")


def selection_differences(comparisons: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """Fig. 5 as its claim reads it: each `comparison_table` difference with its 95% interval, one column per task
    and λ ranking, one row per kind; unread points hollow, with the reason over their panel."""
    if comparisons.empty:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "no comparison to draw: no λ ranking and other order ran at a fraction between 0 and 1",
                ha="center", va="center", fontsize=9, wrap=True)
        return fig
    columns = list(dict.fromkeys(zip(comparisons["model"], comparisons["task"], comparisons["profile"].fillna(""))))
    several = comparisons["model"].nunique() > 1
    kinds = list(dict.fromkeys(comparisons["comparison"]))
    labels = fraction_labels(comparisons.rename(columns={"fraction": "fraction_label"}))
    methods = list(dict.fromkeys(comparisons["method"]))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    fig, axes = plt.subplots(len(kinds), len(columns), figsize=(4.8 * len(columns), 3.6 * len(kinds)),
                             squeeze=False, sharey="row")
    for col, (model, task, profile) in enumerate(columns):
        here = comparisons[(comparisons.model == model) & (comparisons.task == task)
                           & (comparisons.profile.fillna("") == profile)]
        gate = next((g for g in here["gate"].fillna("") if g), "")
        whose = f"λ of the {profile} profile" if profile else "the run's own λ"
        for row, kind in enumerate(kinds):
            ax = axes[row][col]
            rows = here[here.comparison == kind]
            shown = [m for m in methods if m in set(rows.method)]
            for method, shift in zip(shown, x_shifts(len(shown))):
                line = rows[rows.method == method].set_index("fraction").reindex(labels)
                x = [i + shift for i in range(len(labels))]
                yerr = [(line["difference"] - line["low"]).fillna(0), (line["high"] - line["difference"]).fillna(0)]
                read = not gate
                ax.errorbar(x, line["difference"], yerr=yerr, fmt="o", markersize=5, capsize=2.5,
                            color=colours[method], markerfacecolor=colours[method] if read else "white",
                            alpha=1.0 if read else 0.6, label=method.replace("_", " "))
            ax.axhline(0, color="0.3", linewidth=0.8)
            fraction_axis(ax, labels)
            ax.set_ylabel(kind, fontsize=9)
            if row == 0:
                why = "\n" + "\n".join(textwrap.wrap(f"not read: {gate}", 60)) if gate else ""
                ax.set_title(f"{short_model(model) + ', ' if several else ''}{task}, {whose}{why}", fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", linestyle="", color=colours[m], label=m.replace("_", " ")) for m in methods]
    if comparisons["gate"].fillna("").astype(bool).any():
        handles.append(Line2D([], [], marker="o", linestyle="", color="0.4", markerfacecolor="white",
                              label="hollow: not read\n(rankings unstable)"))
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9, frameon=False,
               title="other order")
    return fig


def save_lambda_settling(settling: pd.DataFrame | None, folder: str | os.PathLike, task: str) -> list[Path]:
    """`lambda_settling`'s figure saved under `folder` ([] where there is no curve)."""
    if settling is None:
        return []
    return save_figure(plot_lambda_settling(settling, title=f"λ settling on {task} (learned as the paper learns it)"),
                       folder, f"lambda_settling_{task}")


def plot_lambda_settling(settling: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """How one λ ranking settled: agreement with the final ranking and λ's spread, against the optimizer step."""
    if settling.empty:
        raise ValueError("no learning curve to plot: learn the ranking with its curve first")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(settling.step, settling.spearman, marker=".", label="ρ with the final ranking")
    kept = "overlap_kept_1/8"
    if kept in settling:
        ax.plot(settling.step, settling[kept], marker=".", label="heads kept at 1/8 in common")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("agreement with the final ranking")
    ax.set_ylim(-0.05, 1.05)
    spread = ax.twinx()
    spread.plot(settling.step, settling.lambda_spread, color="grey", linestyle="--", label="λ spread (max − min)")
    spread.set_ylabel("λ spread")
    lines = ax.get_legend_handles_labels()
    more = spread.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="lower right")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


#: The two kinds of comparison the claim counts, and how a table or figure names each.
LAMBDA_BEATS, ABOVE_REVERSED = "lambda_beats", "above_reversed"


COMPARISON_NAMES = {LAMBDA_BEATS: "λ − other order (above 0: λ beats it)",
                    ABOVE_REVERSED: "other order − reversed λ (above 0: reversed λ is worse)"}


@dataclass(frozen=True)
class SelectionComparison:
    """One comparison Fig. 5's claim counts at one (model, task, fraction), positive where the claim holds."""

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
    """Every comparison Fig. 5's claim counts, per task, fraction between 0 and 1 and λ ranking: λ − each other
    order and each order − reversed λ, over every draw; unstable rankings carry the gate's reason."""
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
    """`selection_comparisons` as a table: difference, uncorrected 95% interval and ``gate`` ("" where read)."""
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
    """Fig. 5's claim on `run`; another profile's ranking is read in parts of its own."""
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
    """Fig. 5's verdict on `run` in words: per model, task and λ ranking, the comparisons by verdict, where λ
    scores below every head constant, and what was not read; "" where nothing was compared."""
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
    """One (kind, method)'s comparisons of one verdict, e.g. "λ scores below random at 1/2 (λ − random ...)"."""
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
    """(fraction, λ − every head constant, the latter's mean) where λ scores below it beyond the 95% interval."""
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


def profile_selection_comparisons(run: RunLike, profile: str | Path) -> pd.DataFrame:
    """`comparison_table` of the encoders of a run of `profile`."""
    return comparison_table(selection_comparisons(claim_runs(profile_rows(run, profile))[0]))


def read(run: RunTables) -> list[ClaimReading]:
    """Fig. 5's claim read on a run's tables."""
    return read_each(run, {"fig5": read_fig5})


claims = SectionClaims("06_head_selection", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["ABOVE_REVERSED", "AGREEMENT_FRACTIONS", "CLAIMS", "COMPARISON_NAMES", "LAMBDA_BEATS", "PAPER_STEPS_PROFILE",
           "ReadMarks", "RunTables", "SelectionComparison", "VERDICTS", "check_table", "claims", "comparison_table",
           "curve_cells", "curves_over_orders", "fig5_sentence", "fraction_curves", "grids", "lambda_settling",
           "listed", "means", "orders_run", "paper_steps_tables", "plot_lambda_settling",
           "profile_selection_comparisons", "rankings_agreement", "read", "read_fig5", "run", "run_orders",
           "save_figure", "save_lambda_settling", "save_table", "selection_comparisons", "selection_differences",
           "settling_note", "setup"]
