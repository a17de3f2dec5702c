"""The module of the main-results section's notebook (02, Fig. 2 and 3): λ-ordered replacement at every fraction,
and the claims on the drop at 1/2 and at 0 and on better models losing more."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.core.vocabulary import DATA_FREE_KINDS, NONE
from papa.paper.baselines import majority_baselines
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims, unread_rankings
from papa.paper.claims.reading import read_each
from papa.paper.claims.rules import (AVERAGE_MARGIN, EVERY_HEAD, FIG3_MODELS, HALF_MARGIN, RANKINGS, ClaimReading,
                                     Part, claim_reading, compared_part, control, not_read_claim, tally_part,
                                     unread_part)
from papa.paper.claims.run_tables import RunTables
from papa.paper.claims.scores import ClaimRun, drawn_numbers, model_count, order_contrast, part_label
from papa.paper.figures import PAPER_STYLE, fraction_curves, learning_curves, legend_outside, save_figure
from papa.paper.grids import Grids, learned_grids, order_draws, run, run_orders
from papa.paper.paper_numbers import (CLAIMS, PAPER_AVERAGE_RELATIVE_DROP, PAPER_MAX_RELATIVE_DROP,
                                      performance_vs_drop_points)
from papa.paper.read_marks import ReadMarks
from papa.paper.tables import (DOWNSTREAM_TASKS, LEARNS_TABLE, RANKING_STABILITY_TABLE, curve_cells,
                               curves_over_orders, fraction_claims, listed, means, probes_learn, save_table, setup,
                               short_model, split_learning)
from papa.runs.results import aggregate, relative_drop
from papa.runs.statistics import (ALPHA, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, Estimate, Outcome, above,
                                  at_most, estimate, mean_of, spearman_test, within)


def grids(models: Sequence[str], tasks: Sequence[str], ranking_draws: Sequence[str] = (),
          other_rankings: Sequence[str] = (), folder: RunFolder | None = None) -> dict[str, Grids]:
    """λ-selected average constants at the profile's fractions and the probe's learning curves; at 1/2 also the λ
    rankings of `ranking_draws` and those `other_rankings` saved under `folder`."""
    declared = {"results": Grids.of(models, tasks), "sizes": Grids.of(models, tasks, runner="curves")}
    if ranking_draws:
        declared["draws"] = Grids.of(models, tasks, fractions=["1/2"], selections=order_draws("lambda", ranking_draws))
    return {**declared, **learned_grids(["lambda"], models, tasks, other_rankings, folder, fractions=["1/2"],
                                        draws=ranking_draws)}


#: The seeds whose λ rankings `ranking_stability` compares: the grids' own (0) and one more.
STABILITY_SEEDS = (0, 1)


def performance_vs_drop(curves: pd.DataFrame, tasks: Sequence[str] = DOWNSTREAM_TASKS,
                        learns: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fig. 3: per model, the original score and relative drop at 0 averaged over the tasks at both fractions
    (``tasks``), leaving out those `learns` says do not beat their majority class."""
    agg, _ = split_learning(curves[curves.task.isin(tasks)], learns)
    drops = relative_drop(agg, 1, 0, match=("model", "task", "profile", "metric")).dropna(subset=["relative_drop"])
    if drops.empty:
        return pd.DataFrame(columns=["model", "original", "relative_drop", "max_relative_drop", "tasks"])
    out = drops.groupby("model").agg(original=("baseline", "mean"), relative_drop=("relative_drop", "mean"),
                                     max_relative_drop=("relative_drop", "max"), tasks=("task", "count"))
    return out.reset_index()


def grid_points(results: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """The grid's own original-attention probe on each learning curve: its mean and interval at its training size."""
    keep = (results.fraction == 1.0) & (results.constants == "none") & results.task.isin(set(curves.get("task", ())))
    rows = results[keep & results.model.isin(set(curves.get("model", ())))]
    if rows.empty:
        return curves.iloc[0:0]
    sizes = rows.groupby(["model", "task"])["extra"].agg(lambda s: max(json.loads(t)["train_examples"] for t in s))
    agg = aggregate(rows, by=["model", "task", "metric"])
    agg["train_examples"] = [int(sizes[(m, t)]) for m, t in zip(agg["model"], agg["task"])]
    return agg[list(curves.columns)]


def ranking_stability(models: Sequence[str], tasks: Sequence[str], settings: RunSettings) -> pd.DataFrame:
    """How much each model's λ ranking on each task depends on its seed: `papa.runs.stability.ranking_stability` of
    `STABILITY_SEEDS`, one row per model and task."""
    from papa.runs.stability import ranking_stability as stability_row

    if not models or not tasks:
        raise ValueError("give at least one model and one task")
    rows = []
    for model in models:
        for task in tasks:
            [cfg] = Grids((model,), (task,)).configs(settings)
            start = time.perf_counter()
            row = stability_row(cfg, seeds=STABILITY_SEEDS, progress=settings.progress)
            rows.append({**row, "seeds": " ".join(map(str, row["seeds"]))})
            if settings.progress:
                print(f"{short_model(model)} {task}: λ rankings of seeds {STABILITY_SEEDS} agree at "
                      f"ρ = {row['spearman']:.2f} ({time.perf_counter() - start:.0f}s)", flush=True)
    return pd.DataFrame(rows).set_index(["model", "task"])


def plot_performance_vs_drop(summary: pd.DataFrame, *, paper: bool = True) -> plt.Figure:
    """Fig. 3: original average performance vs mean relative drop at 0, per model; with `paper`, the paper's
    RoBERTa-base and -large beside them."""
    fig, ax = plt.subplots(figsize=(4.5, 3.6))
    if summary.empty:
        ax.text(0.5, 0.5, "no model has a task whose probe beats its\nmajority baseline at fractions 1 and 0",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    ax.scatter(summary["relative_drop"] * 100, summary["original"], label="this run", zorder=3)
    for row in summary.itertuples():
        ax.annotate(short_model(row.model), (row.relative_drop * 100, row.original), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    if paper:
        for (model, row), marker in zip(performance_vs_drop_points().iterrows(), "s^"):
            ax.plot([row["relative_drop"] * 100], [row["original"]], marker=marker,
                    label=f"paper, {model} ({row['source']})", **PAPER_STYLE)
    ax.set_xlabel("relative drop with no input-dependent heads (%)")
    ax.set_ylabel("original average performance")
    ax.grid(alpha=0.3)
    if len(summary) == 1:  # the paper's figure relates models: one point shows one model, no relation
        ax.set_title(f"one model ({short_model(summary['model'].iloc[0])}): no relation to read", fontsize=9)
    fig.tight_layout()
    legend_outside(fig, [ax], last=[f"paper, {m} ({r})" for m, r in performance_vs_drop_points()["source"].items()])
    return fig


def read_fig2_half(run: ClaimRun) -> ClaimReading:
    """Fig. 2's claim at 1/2 on `run`; another profile's ranking is read in parts of its own."""
    where = ("fig2_half", "Fig. 2", "02_main_results", RunFolder.figure_file("fig2_main_results"))
    drops: dict[str | None, list[Part]] = {}
    improves: dict[str | None, list[Part]] = {}
    pairs = run.models_tasks()
    k = model_count(pairs)
    for model, task in pairs:
        original = run.scores(model, task)
        gate = None  # the control, read once per task for every ranking's part
        for profile in (None, *run.ranking_profiles(model, task)):
            half = run.draws(model, task, "lambda", "1/2", profile=profile)
            if original is None or not half:
                continue
            label = part_label(model, task, k) + ("" if profile is None else f", λ of the {profile} profile")
            why = run.unstable(model, task, list(half), profile)
            if why:
                drops.setdefault(profile, []).append(unread_part(f"drop at 1/2 ({label})", why))
                continue
            arms = [(RANKINGS, list(half.values()))]
            drop = order_contrast([original], list(half.values()))  # original − half
            # Half the heads cannot drop more than a margin the all-heads drop itself stays under.
            gate = gate or control(EVERY_HEAD, run.all_heads_drop(model, task), HALF_MARGIN)
            drops.setdefault(profile, []).append(
                compared_part(f"drop at 1/2 ({label})", at_most(drop, HALF_MARGIN), drawn_numbers(drop, arms), gate))
            gain = order_contrast(list(half.values()), [original])
            improves.setdefault(profile, []).append(compared_part(f"improves ({label})", above(gain), drawn_numbers(gain, arms)))
    if not drops:
        return not_read_claim(*where, run.not_run("fractions 1 and 1/2", lambda r: r.fraction_label == "1/2"))
    parts = []
    for profile in sorted(drops, key=lambda p: (p is not None, p or "")):
        whose = "" if profile is None else f", λ of the {profile} profile"
        unread = next((p.numbers for p in drops[profile] if p.verdict == NOT_READ), "")
        parts += [*drops[profile], tally_part(f"sometimes improves{whose}", improves.get(profile, []), anywhere=True,
                                              none=f"no task's λ ranking could be read ({unread})" if unread else "")]
    return claim_reading(*where, parts)


def drop_share(original, replaced, chance: float | None):
    """The share of the score lost: of |original|, or with `chance` of the margin over chance."""
    return (original - replaced) / (np.abs(original) if chance is None else (original - chance))


def task_average_drop(run: ClaimRun, model: str, label: str = "0", selection: str = NONE, *, normalise: bool = False,
                      constants: tuple[str, str] = ("average", "task")
                      ) -> tuple[Estimate | None, list[str], list, Callable]:
    """A model's drop at `label` averaged over its downstream tasks, relative or (`normalise`) of the margin over
    chance, paired per seed; with the tasks, their (original, replaced) scores, and the average as a function."""
    settings, tasks, chances = [], [], []
    for m, task in run.models_tasks():
        if m != model:
            continue
        original, replaced = run.scores(model, task), run.scores(model, task, *constants, selection, label)
        if original is None or replaced is None or original.values.mean() == 0:
            continue  # a score of 0 (a probe that learnt nothing) has no relative drop
        chance = run.chance(model, task) if normalise else None
        if normalise and chance is None:
            return None, [], [], lambda *means: math.nan
        settings += [original, replaced]
        tasks.append(task)
        chances.append(chance)
    t = len(tasks)

    def average(*means):
        return sum(drop_share(means[2 * i], means[2 * i + 1], chances[i]) for i in range(t)) / t
    if not settings:
        return None, [], [], average
    return estimate(average, *settings), tasks, settings, average


def read_fig2_all(run: ClaimRun) -> ClaimReading:
    """Fig. 2's claim at 0 on `run`."""
    where = ("fig2_all", "Fig. 2", "02_main_results", RunFolder.figure_file("fig2_main_results"))
    models = sorted({m for m, _ in run.models_tasks()})
    per_model = {m: task_average_drop(run, m)[:2] for m in models}
    per_model = {m: v for m, v in per_model.items() if v[0] is not None}
    if not per_model:
        return not_read_claim(*where, "no task with a non-zero original score was run at fractions 1 and 0")
    mean = mean_of([e for e, _ in per_model.values()])
    k = len(per_model)
    average = compared_part(f"average relative drop over {k} model(s)",
                            within(mean, PAPER_AVERAGE_RELATIVE_DROP - AVERAGE_MARGIN,
                                   PAPER_AVERAGE_RELATIVE_DROP + AVERAGE_MARGIN),
                            f"{mean.text(percent=True)} ({_beside_paper(mean)})", estimate=mean)
    bounds = [compared_part(f"never over {PAPER_MAX_RELATIVE_DROP:.0%} on average"
                            + (f" ({short_model(m)}, mean over {len(tasks)} tasks)" if k > 1
                               else f" (mean over {', '.join(tasks)})"),
                            at_most(e, PAPER_MAX_RELATIVE_DROP), e.text(percent=True), _data_free_control(run, m, tasks))
              for m, (e, tasks) in per_model.items()]
    return claim_reading(*where, [average, *bounds])


def _data_free_control(run: ClaimRun, model: str, tasks: list[str]):
    """The control of "never over 20% on average": the same drop with the data-free matrix that drops most."""
    found = []
    for kind in DATA_FREE_KINDS:
        e, theirs, _, _ = task_average_drop(run, model, constants=(kind, NONE))
        if e is not None and theirs == tasks:
            found.append((e.value, kind, e))
    name = "every head a data-free matrix"
    if not found:
        return control(f"{name} (not run on {', '.join(tasks)})", None, PAPER_MAX_RELATIVE_DROP, percent=True)
    _, kind, e = max(found, key=lambda f: f[0])
    return control(f"every head {kind} (the data-free matrix that drops most)", e, PAPER_MAX_RELATIVE_DROP,
                   percent=True)


def _beside_paper(mean: Estimate) -> str:
    """Which side of the paper's 8% the interval lies on, and the margin."""
    low, high = mean.interval()
    paper = PAPER_AVERAGE_RELATIVE_DROP
    side = (f"lower than the paper's {paper:.0%}" if high < paper else f"higher than the paper's {paper:.0%}"
            if low > paper else f"the paper's {paper:.0%} inside the interval")
    return f"{side}; margin {paper - AVERAGE_MARGIN:.0%} to {paper + AVERAGE_MARGIN:.0%}"


def read_fig3(run: ClaimRun) -> ClaimReading:
    """Fig. 3's claim on `run`."""
    where = ("fig3", "Fig. 3", "02_main_results", RunFolder.figure_file("fig3_performance_vs_drop"))
    models = sorted({m for m, _ in run.models_tasks()})
    points = []
    for m in models:
        e, tasks, _, _ = task_average_drop(run, m)
        if e is not None:
            original = np.mean([run.scores(m, t).values.mean() for t in tasks])
            points.append((original, e.value))
    if len(points) < FIG3_MODELS:
        return not_read_claim(*where, f"{len(points)} model(s): the exact test of a rank correlation cannot reach one-sided "
                                 f"p < {ALPHA:.3g} with fewer than {FIG3_MODELS} models (its smallest p is 1/n!) "
                                 "(the full profile runs six)")
    rho, p_more, p_less = spearman_test([o for o, _ in points], [d for _, d in points])
    test = Outcome(HOLDS if p_more < ALPHA else DOES_NOT_HOLD if p_less < ALPHA else INCONCLUSIVE, p_more, p_less)
    how = "exact" if len(points) < 10 else "t approximation"
    return claim_reading(*where, [compared_part(f"better models lose more ({len(points)} models)", test,
                                                f"Spearman's ρ {rho:+.2f}, one-sided p = {p_more:.3f} ({how})")])


def read(run: RunTables) -> list[ClaimReading]:
    """Fig. 2's and Fig. 3's claims read on a run's tables."""
    return read_each(run, {"fig2_half": read_fig2_half, "fig2_all": read_fig2_all, "fig3": read_fig3})


claims = SectionClaims("02_main_results", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["CLAIMS", "LEARNS_TABLE", "RANKING_STABILITY_TABLE", "ReadMarks", "RunTables", "STABILITY_SEEDS",
           "check_table", "claims", "curve_cells", "curves_over_orders", "drop_share", "fraction_claims",
           "fraction_curves", "grid_points", "grids", "learning_curves", "listed", "majority_baselines", "means",
           "performance_vs_drop", "plot_performance_vs_drop", "probes_learn", "ranking_stability", "read",
           "read_fig2_all", "read_fig2_half", "read_fig3", "run", "run_orders", "save_figure", "save_table", "setup",
           "task_average_drop", "unread_rankings"]
