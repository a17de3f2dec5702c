"""Fig. 2's and Fig. 3's claims (notebook 02): no major drop at 1/2 in λ order and "sometimes improves", the
average and largest relative drop with every head constant, and better models losing more."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DATA_FREE_KINDS, NONE
from papa.paper.claims.rules import (AVERAGE_MARGIN, EVERY_HEAD, FIG3_MODELS, HALF_MARGIN, RANKINGS, ClaimReading, Part,
                                     claim_reading, compared_part, control, not_read_claim, tally_part, unread_part)
from papa.paper.claims.scores import ClaimRun, drawn_numbers, model_count, order_contrast, part_label
from papa.paper.paper_numbers import PAPER_AVERAGE_RELATIVE_DROP, PAPER_MAX_RELATIVE_DROP
from papa.paper.sections import short_model
from papa.runs.statistics import (ALPHA, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, Estimate, Outcome, above,
                                  at_most, estimate, mean_of, spearman_test, within)


def read_fig2_half(run: ClaimRun) -> ClaimReading:
    """Per task: no major drop at 1/2 in λ order, over the grid's λ rankings; "sometimes improves" across the tasks.
    A ranking learned by another profile (``lambda@full``) is another quantity, not another task: its parts are its
    own, gated by its own draws."""
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
    """The share of the score lost: of |original| (the paper's relative drop), or with `chance` of the margin the
    original has over chance (the same scale for a perplexity and an accuracy)."""
    return (original - replaced) / (np.abs(original) if chance is None else (original - chance))


def task_average_drop(run: ClaimRun, model: str, label: str = "0", selection: str = NONE, *, normalise: bool = False,
                      constants: tuple[str, str] = ("average", "task")
                      ) -> tuple[Estimate | None, list[str], list, Callable]:
    """A model's drop at fraction `label` (heads replaced in `selection` order; at 0: every head) averaged over its
    downstream tasks (Fig. 3's x-axis at 0), relative or (`normalise`) of the margin over chance, paired per seed;
    the tasks, their (original, replaced) scores, and the average as a function of those scores' means. `constants`:
    the (kind, corpus) of the constant matrices (e.g. ("uniform", "none"), a data-free kind)."""
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
    """Fig. 2's claim at 0 on `run`: with every head constant, the relative drop is about 8% on average and never
    over 20% on a model's average."""
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
    """The control of "never over 20% on average": the same task-averaged relative drop with the data-free matrix
    that drops most (its point estimate) on the same tasks; the bound could have failed only where the probes can
    show a drop beyond it."""
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
    """The paper's 8% and the margin, and which side of 8% the interval lies on where it excludes it."""
    low, high = mean.interval()
    paper = PAPER_AVERAGE_RELATIVE_DROP
    side = (f"lower than the paper's {paper:.0%}" if high < paper else f"higher than the paper's {paper:.0%}"
            if low > paper else f"the paper's {paper:.0%} inside the interval")
    return f"{side}; margin {paper - AVERAGE_MARGIN:.0%} to {paper + AVERAGE_MARGIN:.0%}"


def read_fig3(run: ClaimRun) -> ClaimReading:
    """Fig. 3's claim on `run`: over models, the better the original score, the larger the relative drop."""
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
