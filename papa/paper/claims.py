"""The paper's claims read off a run's results: per claim a verdict, the rule behind it, our numbers and the figure
(or table) that shows it. `papa reproduce` ends with `format_claims` of what it just computed, and the docs' claim
pages are generated from it (`papa.paper.claim_pages`).

Each claim is the paper's sentence (`papa.paper.paper_numbers.CLAIMS`) cut into the parts it asserts; every part is
read on the rows of ``<out>/results.csv`` with the paired statistics of `papa.runs.statistics` (runs with the same
seed compared seed by seed; the evaluation examples resampled where the run stored its predictions) and gets one of
three verdicts: **holds** (the 95% interval lies on the claim's side of its bound), **does not hold** (it lies on the
other side), **inconclusive** (it straddles the bound). A part the run cannot read (too few models, trained constants
sized apart from the rest, a λ ranking with one draw, or with a pair of draws that disagree) is **not read** and
named.

Where the run drew a head order more than once (λ rankings of other seeds or disjoint training parts, random
permutations of other seeds: selections ``lambda@part1``, ``random@2``, ...), Fig. 2's and Fig. 5's parts average
over the draws and their intervals hold the order's own spread (`papa.runs.statistics.over_orders`); a ranking
learned by another profile (``lambda@full``: the paper's step count) is read in parts of its own.

A claim holds when every part holds; it does not hold when one part does not, with Holm's correction across every
comparison of the claim read, whatever its own verdict (any one of them decides it); it is **partly read (k of m
parts)** when the parts read all hold but others could not be read, and inconclusive otherwise. "Sometimes" (Fig. 2)
holds when one task improves, Holm-corrected across the tasks. Fig. 4's shares are **descriptive**: a share of heads with a bootstrap interval over
the corpus sentences, beside the paper's, with no verdict. `RULES` states each claim's rule in one line, and the
margins below say where "no major drop", "alike" and "close" end.

The paper's claims are about encoders: each claim's verdict is read on the encoders' rows only. Causal LMs (beyond the
paper, notebook 08) get a line of their own under each claim they ran (`ClaimReading.decoder`), read by the same
rule, never part of the encoders' verdict.

The margins are read off the paper's own numbers (`papa.paper.paper_numbers`). Its Table 1 (RoBERTa-base) has the
all-constant model lose 34% of CoLA's MCC but 0–12% elsewhere, 9.5% on average over the six tasks (RoBERTa-large,
Table 4: 36% and 12.1%): so "8% on average, never more than 20%" (Sec. 4.2) is about a model's relative drop
averaged over its tasks (Fig. 3's x-axis), averaged again over the six models, not a bound per task.
"""
from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from papa.core.vocabulary import (DATA_FREE_KINDS, DECODER_LAYOUT, DEFAULT_DTYPE, NONE, PAPER_BASE, PAPER_LARGE,
                                  RANKED, SELECTION_METHODS)
from papa.method.selection import parse_selection
from papa.paper.paper_numbers import (CLAIMS, PAPER_AVERAGE_RELATIVE_DROP, PAPER_DIAGONAL_SHARE,
                                      PAPER_MAX_RELATIVE_DROP, PAPER_SPECIAL_SHARE)
from papa.paper.patterns import pattern_summary
from papa.paper.sections import (CHANCE_TABLES, DOWNSTREAM_TASKS, LEARNS_TABLES, OBJECTIVE_TASKS,
                                  RANKING_STABILITY_TABLES, short_model, split_learning)
from papa.runs.compare import RunScores
from papa.runs.stability import AGREEMENT_COLUMNS, draw_name
from papa.runs.statistics import (ALPHA, DESCRIPTIVE, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, PARTLY_READ,
                                  VERDICTS, Estimate, Outcome, Scores, above, all_of, any_of, at_most, corrected,
                                  difference, estimate, mean_of, over_orders, spearman_test, within)

__all__ = ["VERDICTS", "RULES", "ClaimReading", "Part", "read_claims", "run_claims", "read_learns", "learns_tables",
           "format_claims", "smoke_run_note", "smoke_run_first", "read_tables",
           "profile_claims", "section_claims", "headed_claims", "uncertainty_note", "profile_uncertainty_note",
           "stability_note"]

# "No major drop" at 1/2 (Fig. 2): the drop's interval below this many points of the metric (0.02 = 2 points).
HALF_MARGIN = 0.02
# "8% on average": the model-average relative drop within this many percentage points of 8% (Table 1 and 4's own
# averages, 9.5% and 12.1%, are within 4.1 of it).
AVERAGE_MARGIN = 0.05
# Table 2's "as well as": the difference within ± this (the paper's Tables 2 and 5 differ by at most 0.01).
ALIKE_MARGIN = 0.02
# Table 1's "close to trained average-initialised": within ± this (Tables 1 and 4 differ by at most 0.03).
CLOSE_MARGIN = 0.03
# "Spread over several tokens rather than one" (Fig. 4): median normalised row entropy at least this.
SPREAD_THRESHOLD = 0.5
# A λ ranking is read only where every pair of its draws (seeds and disjoint training parts) agrees at least this much
# (Spearman's ρ).
STABLE_RHO = 0.8
#: The fewest models whose exact Spearman test can reach `ALPHA`: its smallest one-sided p is 1/n! (1/4! = 0.042).
FIG3_MODELS = next(n for n in range(3, 10) if 1 / math.factorial(n) < ALPHA)
# The claims with parts that rest on a λ ranking (the heads kept at a fraction strictly between 0 and 1).
LAMBDA_CLAIMS = ("fig2_half", "fig5", "fig6")
# How a part names the draws of a λ ranking it averages over (`_numbers`).
RANKINGS = "λ rankings"

#: Each claim's rule, in one line.
RULES = {
    "fig2_half": f"per task whose probe learns: original − (λ, 1/2) below {HALF_MARGIN} (upper end of its 95% "
                 "interval; over every λ ranking the run drew, their spread in the interval; read only where every "
                 f"pair of the ranking's draws agrees at Spearman's ρ ≥ {STABLE_RHO}); 'sometimes improves': on some "
                 "task (λ, 1/2) − original above 0 (Holm over every task read); another profile's ranking in parts of "
                 "its own",
    "fig2_all": f"per model, the relative drop at 0 averaged over its tasks: the mean over models within "
                f"{PAPER_AVERAGE_RELATIVE_DROP:.0%} ± {AVERAGE_MARGIN * 100:.0f} points and every model's below "
                f"{PAPER_MAX_RELATIVE_DROP:.0%}",
    "fig3": "over models: Spearman's ρ of original score and relative drop above 0, one-sided p < "
            f"{ALPHA:.3g} (exact over every permutation below 10 models; read from {FIG3_MODELS} models, the fewest "
            "whose exact test can reach it)",
    "fig4_diagonal": "descriptive: the share of diagonal heads with a 95% bootstrap interval over the corpus "
                     f"sentences, beside the paper's about {PAPER_DIAGONAL_SHARE:.0%}",
    "fig4_special": "descriptive: the share of heads mostly on special tokens with a 95% bootstrap interval over the "
                    f"corpus sentences, beside the paper's about {PAPER_SPECIAL_SHARE:.0%}",
    "fig4_spread": "descriptive: the median normalised row entropy (0 = one token, 1 = uniform) with a 95% bootstrap "
                   f"interval over the corpus sentences; 'spread' where at least {SPREAD_THRESHOLD}",
    "table1": f"at 0, per task: average − each data-free kind above 0; average − trained Toeplitz above 0; |average − "
              f"trained average| within {CLOSE_MARGIN} (trained rows read only at the others' training size)",
    "table2": f"at 0, per task: other corpus's constants − the task's own within ±{ALIKE_MARGIN}",
    "fig5": "per task and fraction strictly between 0 and 1: λ − each other method above 0; each method − reversed λ "
            f"above 0 (read only where every pair of the λ ranking's draws agrees at Spearman's ρ ≥ {STABLE_RHO}; over "
            "every λ ranking and random permutation the run drew, their spread in the interval; '(1 order)' where "
            "an order was drawn once); another profile's ranking in parts of its own",
    "fig6": "per model: its own objective's drop at 0 − the mean of its downstream tasks' above 0, as relative drops "
            "and as shares of the margin over chance, the strongest predictor that needs no model (the majority class; "
            "for the LM a unigram model of the training tokens) (MLM probe for MLM-pretrained encoders; for decoders "
            "the LM with its own head, also at 1/2, 1/8 and 1/16 in λ order with the random order beside it, and an "
            "LM probe trained from scratch, read only where it beats the unigram model by its interval); the paper's "
            "nats and ELECTRA read only where such models ran, 'partly read' where they cannot be",
}


@dataclass(frozen=True)
class Part:
    """One part of a claim's sentence as this run reads it: one comparison (`test`), or a tally of comparisons
    (`members`, combined as "everywhere", or as "somewhere" with `anywhere`)."""

    name: str        # e.g. "no major drop at 1/2 (sst2)"
    verdict: str     # one of VERDICTS
    numbers: str     # the estimate behind it, e.g. "0.012 [-0.004, 0.028]"
    test: Outcome | None = None
    members: tuple["Part", ...] = ()
    anywhere: bool = False


def _compare(name: str, test: Outcome, numbers: str) -> Part:
    return Part(name, test.verdict, numbers, test)


def _unread(name: str, why: str) -> Part:
    return Part(name, NOT_READ, why, Outcome(NOT_READ))


def _tally(name: str, members: Sequence[Part], *, anywhere: bool = False, none: str = "") -> Part:
    """A part made of comparisons; its verdict and numbers are set when the claim is read (`_reading`), after
    Holm's correction. With no member, not read (`none` says why)."""
    if not members:
        return _unread(name, none or "nothing to compare")
    return Part(name, NOT_READ, "", None, tuple(members), anywhere)


@dataclass(frozen=True)
class ClaimReading:
    """One claim of the paper as this run reads it; `decoder` is the same claim read on the run's causal LMs."""

    claim: str       # key of `papa.paper.paper_numbers.CLAIMS`
    where: str       # the paper's figure or table
    notebook: str    # the section notebook that computes it
    verdict: str     # one of VERDICTS
    ours: str        # our numbers, one line
    evidence: str    # the figure (or table) behind it, relative to the run's output folder
    parts: tuple[Part, ...] = field(default=())
    decoder: "ClaimReading | None" = None
    ran: bool = True  # False: nothing of the claim ran at all

    @property
    def text(self) -> str:
        """The paper's claim."""
        return CLAIMS[self.claim]

    @property
    def rule(self) -> str:
        """How the verdict is read, in one line."""
        return RULES[self.claim]

    @property
    def unread(self) -> list[str]:
        """The parts of the claim this run could not read."""
        return [p.name for p in self.parts if p.verdict == NOT_READ]

    @property
    def verdict_text(self) -> str:
        """The verdict as printed: "partly read (k of m parts)" says how much was read."""
        if self.verdict != PARTLY_READ:
            return self.verdict
        read = sum(p.verdict != NOT_READ for p in self.parts)
        return f"{PARTLY_READ} ({read} of {len(self.parts)} parts)"


def _corrected(parts: Sequence[Part]) -> list[Part]:
    """The parts with Holm's correction applied: "somewhere" tallies across their members for "holds"; then every
    comparison of the claim (tallied or not) as one family for "does not hold", since any one of them decides it."""
    parts = [_settle_anywhere(p) if p.members and p.anywhere else p for p in parts]
    family = [(i, None) for i, p in enumerate(parts) if p.test is not None]
    family += [(i, j) for i, p in enumerate(parts) if p.members and not p.anywhere
               for j, m in enumerate(p.members) if m.test is not None]
    tests = [parts[i].test if j is None else parts[i].members[j].test for i, j in family]
    fixed = dict(zip(family, corrected(tests, "fails")))
    out = []
    for i, p in enumerate(parts):
        if (i, None) in fixed:
            p = replace(p, verdict=fixed[i, None].verdict, test=fixed[i, None])
        elif p.members and not p.anywhere:
            members = tuple(replace(m, verdict=fixed[i, j].verdict, test=fixed[i, j]) if (i, j) in fixed else m
                            for j, m in enumerate(p.members))
            verdict = all_of(m.verdict for m in members)
            p = replace(p, verdict=verdict, numbers=_tally_text(members, verdict), members=members)
        out.append(p)
    return out


def _settle_anywhere(part: Part) -> Part:
    """A "somewhere" tally: Holm across every member read for "holds"; it does not hold only where every member does
    not, so as one comparison of its claim it carries the largest of their p-values."""
    members = [replace(m, verdict=t.verdict, test=t)
               for m, t in zip(part.members, corrected([m.test or Outcome(m.verdict) for m in part.members], "holds"))]
    verdict = any_of(m.verdict for m in members)
    p_fails = max((m.test.p_fails for m in members if m.verdict != NOT_READ), default=math.nan)
    read = [m for m in members if m.verdict != NOT_READ]
    held = sum(m.verdict == HOLDS for m in members)
    smallest = min((m.test.p_adjusted for m in read), default=math.nan)
    holm = f"Holm over {len(read)}" + (f", smallest adjusted p {smallest:.3f}" if math.isfinite(smallest) else "")
    return replace(part, verdict=verdict, test=Outcome(verdict, math.nan, p_fails), members=tuple(members),
                   numbers=f"holds on {held} of {len(read)} ({holm})" + _example(members, verdict))


def _reading(claim: str, where: str, notebook: str, evidence: str, parts: Sequence[Part], ours: str = ""
             ) -> ClaimReading:
    parts = _corrected(parts)
    verdict = all_of(p.verdict for p in parts)
    shown = [p for p in parts if p.verdict != NOT_READ]
    line = ours or "; ".join(f"{p.name}: {p.numbers} ({p.verdict})" for p in shown)
    unread = [p for p in parts if p.verdict == NOT_READ]
    if unread and shown:
        line += "; not read: " + "; ".join(f"{p.name} ({p.numbers})" for p in unread)
    elif unread:
        line = "; ".join(f"{p.name}: {p.numbers}" for p in unread)
    return ClaimReading(claim, where, notebook, verdict, line, evidence, tuple(parts))


def _not_read(claim: str, where: str, notebook: str, evidence: str, why: str) -> ClaimReading:
    return ClaimReading(claim, where, notebook, NOT_READ, why, evidence, (_unread(claim, why),), ran=False)


# ---- the run's numbers ----------------------------------------------------------------------------------------

class _Run(RunScores):
    """The rows of one kind of model (the encoders, or the causal LMs) as `RunScores`, with what the claims read
    beside them: the λ rankings' stability and each task's chance level."""

    def __init__(self, results: pd.DataFrame, out_dir: str | Path | None, stability: pd.DataFrame | None,
                 chance: pd.DataFrame | None = None, *, decoders: bool = False, left_out: pd.DataFrame | None = None):
        super().__init__(results, out_dir)
        self.stability = _agreement(stability)
        self.chance_levels = chance
        self.decoders = decoders
        self.left_out = left_out if left_out is not None else results.iloc[:0]

    def not_run(self, what: str, ran: Callable[[pd.DataFrame], pd.Series]) -> str:
        """Why nothing of `what` (e.g. "λ and another selection method at a fraction between 0 and 1") is read:
        it was not run, or (the rows `ran` selects among the tasks left out) it ran only on tasks whose probe does
        not beat its majority class."""
        rows = self.left_out[ran(self.left_out)] if len(self.left_out) else self.left_out
        if rows.empty:
            return f"{what}: not run"
        return (f"{what}: run only on {', '.join(dict.fromkeys(rows.task))}, whose probe does not beat its majority "
                "class, so no claim reads it")

    def models_tasks(self, tasks: Sequence[str] = DOWNSTREAM_TASKS) -> list[tuple[str, str]]:
        """(model, task) pairs that ran one of `tasks`."""
        r = self.results[self.results.task.isin(tasks)]
        return sorted(set(zip(r.model, r.task)), key=lambda mt: (mt[0], list(tasks).index(mt[1])))

    def unstable(self, model: str, task: str, selections: Sequence[str] = ("lambda",), profile: str | None = None
                 ) -> str | None:
        """Why the λ rankings behind `selections` (draws of `task`'s λ order on `model`, learned by `profile`; None:
        the grid's) cannot be read, or None where they can: every pair of the draws they average over and of the other
        draws learned alike (seeds and disjoint training parts, `papa.runs.stability.draw_agreement`) must agree at
        Spearman's ρ ≥ `STABLE_RHO`; one draw alone has nothing to be measured against."""
        pairs = self._pairs(model, task, profile)
        drawn = {draw_name(s.seed, s.part) for s in map(parse_selection, selections)}
        names = sorted(drawn | set(pairs.a) | set(pairs.b), key=_draw_order)
        whose = f"{task}'s λ ranking" + ("" if profile is None else f" of the {profile} profile")
        if len(names) < 2:
            return f"{whose}: stability not measured (one draw: no second seed's or training part's ranking)"
        rhos = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                found = pairs[((pairs.a == a) & (pairs.b == b)) | ((pairs.a == b) & (pairs.b == a))].spearman
                if found.empty:
                    return f"{whose}: stability not measured (draws {a} and {b} not compared)"
                rhos[a, b] = float(found.min())
        low = min(rhos.values())
        if low >= STABLE_RHO:
            return None
        if len(rhos) == 1:
            return f"{whose}s of two draws ({', '.join(names)}) agree at ρ = {low:.2f} < {STABLE_RHO}"
        return (f"{whose}s of {len(names)} draws ({', '.join(names)}) agree at ρ {low:.2f} to "
                f"{max(rhos.values()):.2f}: some pair below {STABLE_RHO}")

    def _pairs(self, model: str, task: str, profile: str | None) -> pd.DataFrame:
        """The agreement rows of (`model`, `task`)'s rankings learned by `profile` (None: the grid's profile, and
        the rows of a table that records none)."""
        table = self.stability
        if table is None or table.empty:
            return pd.DataFrame(columns=list(AGREEMENT_COLUMNS))
        wanted = {profile} if profile is not None else set(self.rows(model, task).profile)
        named = table.profile.isin(wanted) | (table.profile.isna() & (profile is None))
        return table[(table.model == model) & (table.task == task) & named]

    def chance(self, model: str, task: str) -> float | None:
        """`task`'s chance level on `model`, if the run wrote it: the strongest predictor that needs no model
        (``context_free``: the majority class, or a unigram model of the training tokens), else the table's
        ``chance`` (majority class, or uniform over the vocabulary)."""
        strongest = _value(self.chance_levels, model, task, "context_free") \
            if self.chance_levels is not None and "context_free" in self.chance_levels else None
        if strongest is not None and math.isfinite(strongest):
            return strongest
        return _value(self.chance_levels, model, task, "chance")

    def beats_chance(self, model: str, task: str, original: Scores) -> str | None:
        """Why a probe of a task over the vocabulary is not read (None: it is): the lower end of its original score's
        95% interval must lie above `chance`, the rule a task's probe must pass against its majority class."""
        level = self.chance(model, task)
        if level is None:
            return None
        low = estimate(lambda o: o, original).interval()[0]
        if math.isfinite(low) and low > level:
            return None
        return (f"the probe ({estimate(lambda o: o, original).text(2)} nats) does not beat a context-free predictor "
                f"({level:.2f} nats, a unigram model of its training tokens) by its interval: what it scores is "
                "mostly token frequency")

    def ranking_profiles(self, model: str, task: str) -> list[str]:
        """The other profiles whose λ rankings ran on (`model`, `task`) (selections such as ``lambda@full``)."""
        names = set(self.rows(model, task).selection) - {NONE}
        return sorted({p for p in (parse_selection(n).profile for n in names) if p is not None})

    def draws(self, model: str, task: str, method: str, label: str, *, profile: str | None = None
              ) -> dict[str, Scores]:
        """The `Scores` of every draw of `method`'s head order run at (`model`, `task`, `label`) with the task's
        average constants, by selection name: the plain method's and its variants' (λ rankings of other seeds and
        training parts, random permutations of other seeds), in name order; with `profile`, the draws of that
        profile's ranking (e.g. "full": λ learned at the paper's step count) instead."""
        rows = self.rows(model, task, constants="average", constants_corpus="task", fraction_label=label)
        names = sorted(n for n in set(rows.selection) if n != NONE and _draw_of(n, method, profile))
        found = {n: self.scores(model, task, "average", "task", n, label) for n in names}
        return {n: f for n, f in found.items() if f is not None}


def _agreement(table: pd.DataFrame | None) -> pd.DataFrame | None:
    """A table of the λ rankings' agreement as `papa.runs.stability.draw_agreement` writes it (one row per pair of
    draws); a table of two seeds' agreement per (model, task) (notebooks 02 and 08, ``spearman``) stands for the
    pair seed0, seed1 of the profile it records (None: the grid's)."""
    if table is None:
        return None
    table = table.reset_index()
    if not {"a", "b"} <= set(table.columns):
        table = table.assign(a=draw_name(0), b=draw_name(1))
    if "profile" not in table:
        table = table.assign(profile=None)
    return table[["model", "task", "profile", "a", "b", "spearman"]]


def _draw_order(name: str) -> tuple[int, int]:
    """`papa.runs.stability.draw_name`s in the order (part, seed): seed0, seed1, part1, part2, ..."""
    part = int(name.split("part")[1].split("-")[0]) if name.startswith("part") else 0
    seed = int(name.split("seed")[1]) if "seed" in name else 0
    return part, seed


def _draw_of(name: str, method: str, profile: str | None) -> bool:
    """Whether selection `name` is a draw of `method`'s order learned by `profile` (None: the grid's own)."""
    selection = parse_selection(name)
    return selection.method == method and selection.profile == profile


def _contrast(plus: Sequence[Scores], minus: Sequence[Scores]) -> Estimate:
    """The mean over `plus`'s draws of the order minus the mean over `minus`'s, paired over seeds and examples, with
    the orders' own spread added (`over_orders`): each side is one setting's draws of its order (one, for a fixed
    order or the original model)."""
    k = len(plus)
    joint = estimate(lambda *means: sum(means[:k]) / k - sum(means[k:]) / len(minus), *plus, *minus)
    return over_orders(joint, [s.values.mean() for s in plus], [s.values.mean() for s in minus])


#: The head orders that are drawn (a λ ranking learned from data and a seed, a random permutation); the layer
#: orders are fixed and never drawn.
DRAWN_ORDERS = ("lambda", "reversed_lambda", "random")


def _numbers(e: Estimate, arms: Sequence[tuple[str, Sequence[Scores]]]) -> str:
    """The estimate's text, and over how many draws of each drawn order it is taken (e.g. "over 4 λ rankings,
    5 random orders"); "(1 order)" where every order behind it was drawn once, so its interval holds no spread of
    the order."""
    counts = [(what, len(draws)) for what, draws in arms]
    if not counts:
        return e.text()
    if all(n == 1 for _, n in counts):
        return e.text() + " (1 order)"
    return e.text() + " over " + ", ".join(f"{n} {what if n > 1 else _singular(what)}" for what, n in counts)


def _singular(what: str) -> str:
    """"λ rankings" -> "λ ranking", "random orders" -> "random order"."""
    return " ".join(w[:-1] if w in ("rankings", "orders") else w for w in what.split(" "))


def _value(table: pd.DataFrame | None, model: str, task: str, column: str) -> float | None:
    """`column` of the (model, task) row of a run's table (None: no table, or no such row)."""
    if table is None:
        return None
    table = table.reset_index()
    row = table[(table.model == model) & (table.task == task)]
    return None if row.empty else float(row[column].iloc[0])


def _label(model: str, task: str, models: int) -> str:
    return task if models < 2 else f"{task}, {short_model(model)}"


def _count(models_tasks) -> int:
    return len({m for m, _ in models_tasks})


# ---- Fig. 2 and 3 -----------------------------------------------------------------------------------------------

def _fig2_half(run: _Run) -> ClaimReading:
    """Per task: no major drop at 1/2 in λ order, over the grid's λ rankings; "sometimes improves" across the tasks.
    A ranking learned by another profile (``lambda@full``) is another quantity, not another task: its parts are its
    own, gated by its own draws."""
    where = ("fig2_half", "Fig. 2", "02_main_results", "figures/fig2_main_results.png")
    drops: dict[str | None, list[Part]] = {}
    improves: dict[str | None, list[Part]] = {}
    pairs = run.models_tasks()
    k = _count(pairs)
    for model, task in pairs:
        original = run.scores(model, task)
        for profile in (None, *run.ranking_profiles(model, task)):
            half = run.draws(model, task, "lambda", "1/2", profile=profile)
            if original is None or not half:
                continue
            label = _label(model, task, k) + ("" if profile is None else f", λ of the {profile} profile")
            why = run.unstable(model, task, list(half), profile)
            if why:
                drops.setdefault(profile, []).append(_unread(f"drop at 1/2 ({label})", why))
                continue
            arms = [(RANKINGS, list(half.values()))]
            drop = _contrast([original], list(half.values()))  # original − half
            drops.setdefault(profile, []).append(
                _compare(f"drop at 1/2 ({label})", at_most(drop, HALF_MARGIN), _numbers(drop, arms)))
            gain = _contrast(list(half.values()), [original])
            improves.setdefault(profile, []).append(_compare(f"improves ({label})", above(gain), _numbers(gain, arms)))
    if not drops:
        return _not_read(*where, run.not_run("fractions 1 and 1/2", lambda r: r.fraction_label == "1/2"))
    parts = []
    for profile in sorted(drops, key=lambda p: (p is not None, p or "")):
        whose = "" if profile is None else f", λ of the {profile} profile"
        unread = next((p.numbers for p in drops[profile] if p.verdict == NOT_READ), "")
        parts += [*drops[profile], _tally(f"sometimes improves{whose}", improves.get(profile, []), anywhere=True,
                                          none=f"no task's λ ranking could be read ({unread})" if unread else "")]
    return _reading(*where, parts)


def _drop(original, replaced, chance: float | None):
    """The share of the score lost: of |original| (the paper's relative drop), or with `chance` of the margin the
    original has over chance (the same scale for a perplexity and an accuracy)."""
    return (original - replaced) / (np.abs(original) if chance is None else (original - chance))


def _task_average_drop(run: _Run, model: str, label: str = "0", selection: str = NONE, *, normalise: bool = False
                       ) -> tuple[Estimate | None, list[str], list, Callable]:
    """A model's drop at fraction `label` (heads replaced in `selection` order; at 0: every head) averaged over its
    downstream tasks (Fig. 3's x-axis at 0), relative or (`normalise`) of the margin over chance, paired per seed;
    the tasks, their (original, replaced) scores, and the average as a function of those scores' means."""
    settings, tasks, chances = [], [], []
    for m, task in run.models_tasks():
        if m != model:
            continue
        original, replaced = run.scores(model, task), run.scores(model, task, "average", "task", selection, label)
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
        return sum(_drop(means[2 * i], means[2 * i + 1], chances[i]) for i in range(t)) / t
    if not settings:
        return None, [], [], average
    return estimate(average, *settings), tasks, settings, average


def _fig2_all(run: _Run) -> ClaimReading:
    where = ("fig2_all", "Fig. 2", "02_main_results", "figures/fig2_main_results.png")
    models = sorted({m for m, _ in run.models_tasks()})
    per_model = {m: _task_average_drop(run, m)[:2] for m in models}
    per_model = {m: v for m, v in per_model.items() if v[0] is not None}
    if not per_model:
        return _not_read(*where, "no task with a non-zero original score was run at fractions 1 and 0")
    mean = mean_of([e for e, _ in per_model.values()])
    k = len(per_model)
    average = _compare(f"average relative drop over {k} model(s)",
                       within(mean, PAPER_AVERAGE_RELATIVE_DROP - AVERAGE_MARGIN,
                              PAPER_AVERAGE_RELATIVE_DROP + AVERAGE_MARGIN),
                       f"{mean.text(percent=True)} (paper {PAPER_AVERAGE_RELATIVE_DROP:.0%})")
    bounds = [_compare(f"never over {PAPER_MAX_RELATIVE_DROP:.0%}"
                       + (f" ({short_model(m)}, {len(tasks)} tasks)" if k > 1 else f" ({', '.join(tasks)})"),
                       at_most(e, PAPER_MAX_RELATIVE_DROP), e.text(percent=True))
              for m, (e, tasks) in per_model.items()]
    return _reading(*where, [average, *bounds])


def _fig3(run: _Run) -> ClaimReading:
    where = ("fig3", "Fig. 3", "02_main_results", "figures/fig3_performance_vs_drop.png")
    models = sorted({m for m, _ in run.models_tasks()})
    points = []
    for m in models:
        e, tasks, _, _ = _task_average_drop(run, m)
        if e is not None:
            original = np.mean([run.scores(m, t).values.mean() for t in tasks])
            points.append((original, e.value))
    if len(points) < FIG3_MODELS:
        return _not_read(*where, f"{len(points)} model(s): the exact test of a rank correlation cannot reach one-sided "
                                 f"p < {ALPHA:.3g} with fewer than {FIG3_MODELS} models (its smallest p is 1/n!) "
                                 "(the full profile runs six)")
    rho, p_more, p_less = spearman_test([o for o, _ in points], [d for _, d in points])
    test = Outcome(HOLDS if p_more < ALPHA else DOES_NOT_HOLD if p_less < ALPHA else INCONCLUSIVE, p_more, p_less)
    how = "exact" if len(points) < 10 else "t approximation"
    return _reading(*where, [_compare(f"better models lose more ({len(points)} models)", test,
                                      f"Spearman's ρ {rho:+.2f}, one-sided p = {p_more:.3f} ({how})")])


# ---- Fig. 4 -----------------------------------------------------------------------------------------------------

#: Fig. 4's claims: the pattern share each describes (`papa.paper.patterns.pattern_summary`), and the paper's value.
FIG4 = {"fig4_diagonal": ("diagonal", "diagonal heads", PAPER_DIAGONAL_SHARE),
        "fig4_special": ("special", "heads mostly on special tokens", PAPER_SPECIAL_SHARE),
        "fig4_spread": ("median_spread", "median row spread", None)}


def _pattern_readings(patterns: dict[str, pd.DataFrame], intervals: dict[str, pd.DataFrame]) -> list[ClaimReading]:
    """Fig. 4's three claims described from the pattern table of the first task that has one, with the bootstrap
    interval of `papa.paper.pattern_intervals` where the run wrote it (constants have no seeds to test with)."""
    if not patterns:
        return [_not_read(c, "Fig. 4", "03_constant_patterns", "figures/fig4_constant_matrices_<task>.png",
                          "no pattern table in this run") for c in FIG4]
    task = sorted(patterns)[0]
    summary = pattern_summary(patterns[task])
    interval = intervals.get(task)
    figure = f"figures/fig4_constant_matrices_{task}.png"
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


# ---- Tables 1 and 2 ---------------------------------------------------------------------------------------------

def _train_examples(run: _Run, model: str, task: str, kind: str, corpus: str) -> set:
    """The training-set sizes the rows of a setting recorded (None: not recorded)."""
    rows = run.rows(model, task, constants=kind, constants_corpus=corpus, selection=NONE, fraction_label="0")
    if "extra" not in rows:
        return {None}
    return {json.loads(x).get("train_examples") if isinstance(x, str) and x else None for x in rows.extra}


def _table1(run: _Run) -> ClaimReading:
    where = ("table1", "Table 1", "04_alternative_matrices", "tables/table1_alternative_matrices.csv")
    pairs = run.models_tasks()
    k = _count(pairs)
    beats, trained_toeplitz, trained_average = [], [], []
    for model, task in pairs:
        average = run.scores(model, task, "average", "task", NONE, "0")
        if average is None:
            continue
        label = _label(model, task, k)
        for kind in DATA_FREE_KINDS:
            other = run.scores(model, task, kind, NONE, NONE, "0")
            if other is not None:
                d = difference(other, average)
                beats.append(_compare(f"beats {kind} ({label})", above(d), d.text()))
        size = _train_examples(run, model, task, "average", "task")
        for kind, out in (("trainable_toeplitz", trained_toeplitz), ("trainable_average", trained_average)):
            other = run.scores(model, task, kind, "task", NONE, "0")
            if other is None:
                continue
            trained = _train_examples(run, model, task, kind, "task")
            if trained != size:
                out.append(_unread(f"{kind} ({label})", f"trained on {_examples(trained)} examples, the others' "
                                                        f"probes on {_examples(size)}"))
                continue
            d = difference(other, average)
            out.append(_compare(f"{'beats' if kind == 'trainable_toeplitz' else 'close to'} {kind} ({label})",
                                above(d) if kind == "trainable_toeplitz" else within(d, -CLOSE_MARGIN, CLOSE_MARGIN),
                                d.text()))
    if not beats:
        return _not_read(*where, "average and data-free constants were not all run with every head replaced")
    parts = [_tally(f"beats every data-free matrix ({len(beats)} comparisons)", beats)]
    for name, found in (("beats trained Toeplitz-initialised", trained_toeplitz),
                        ("close to trained average-initialised", trained_average)):
        if not found:
            parts.append(_unread(name, "not run"))
        elif all(p.verdict == NOT_READ for p in found):
            parts.append(_unread(name, found[0].numbers))
        else:
            parts.append(_tally(name, [p for p in found if p.verdict != NOT_READ]))
    return _reading(*where, parts)


def _examples(sizes: set) -> str:
    return "/".join(str(s) for s in sorted(sizes, key=str)) or "?"


def _example(parts: Sequence[Part], verdict: str) -> str:
    """One member that illustrates a tally's `verdict` (a partly read tally's: one that holds): where it holds, the
    member nearest to failing it (largest p of holding); otherwise the first member with that verdict. "" where none
    has it."""
    verdict = HOLDS if verdict == PARTLY_READ else verdict
    alike = [p for p in parts if p.verdict == verdict]
    if not alike:
        return ""
    if verdict == HOLDS:
        shown = max(alike, key=lambda p: p.test.p_holds if p.test is not None and math.isfinite(p.test.p_holds)
                    else -1.0)
    else:
        shown = alike[0]
    return f" (e.g. {shown.name} {shown.numbers})"


def _tally_text(parts: Sequence[Part], verdict: str) -> str:
    """e.g. "holds on 10 of 12, inconclusive on 2 (e.g. beats zeros (ner) -0.004 [-0.020, +0.012])": the count per
    verdict, and one comparison that illustrates the tally's `verdict`."""
    counts = [(v, sum(p.verdict == v for p in parts)) for v in (HOLDS, INCONCLUSIVE, DOES_NOT_HOLD, NOT_READ)]
    text = ", ".join(f"{v} on {n}" + (f" of {len(parts)}" if i == 0 else "") for i, (v, n) in enumerate(counts)
                     if n or i == 0)
    return text + _example(parts, verdict)


def _table2(run: _Run) -> ClaimReading:
    where = ("table2", "Table 2", "05_data_dependence", "tables/table2_data_dependence.csv")
    rows = run.results[(run.results.constants == "average") & (run.results.fraction_label == "0")]
    others = sorted(set(rows.constants_corpus) - {"task", NONE})
    if not others:
        return _not_read(*where, "constants from another corpus were not run beside the task's own")
    other = others[0]
    pairs = run.models_tasks()
    k = _count(pairs)
    parts = []
    for model, task in pairs:
        own = run.scores(model, task, "average", "task", NONE, "0")
        theirs = run.scores(model, task, "average", other, NONE, "0")
        if own is not None and theirs is not None:
            d = difference(own, theirs)
            parts.append(_compare(f"{other}'s constants alike ({_label(model, task, k)})",
                                  within(d, -ALIKE_MARGIN, ALIKE_MARGIN), d.text()))
    if not parts:
        return _not_read(*where, f"no task was run with both its own and {other}'s constants")
    return _reading(*where, parts)


# ---- Fig. 5 -----------------------------------------------------------------------------------------------------

def _fig5(run: _Run) -> ClaimReading:
    """Per task and fraction strictly between 0 and 1: λ beats every other order, and reversed λ is the worst, over
    every draw of the drawn orders; a ranking learned by another profile in parts of its own, gated by its own
    draws."""
    where = ("fig5", "Fig. 5", "06_head_selection", "figures/fig5_head_selection.png")
    methods = [m for m in SELECTION_METHODS if m in set(run.results.selection)]
    mid = run.results[run.results.selection.isin(methods) & (run.results.fraction > 0) & (run.results.fraction < 1)
                      & (run.results.constants == "average") & (run.results.constants_corpus == "task")]
    points = sorted(set(zip(mid.model, mid.task, mid.fraction_label)))
    k = len({m for m, _, _ in points})
    best: dict[str | None, list[Part]] = {}
    worst: dict[str | None, list[Part]] = {}
    unstable: dict[str | None, list[Part]] = {}
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
            why = run.unstable(model, task, rankings, profile)
            name = f"{_label(model, task, k)} at {label}" + ("" if profile is None else f", λ of the {profile} "
                                                                                          "profile")
            if why:
                unstable.setdefault(profile, []).append(_unread(name, why))
                continue
            for m, draws in ran.items():
                if m not in RANKED:  # λ against the data-free orders
                    d = _contrast(ran["lambda"], draws)
                    arms = [(RANKINGS, ran["lambda"])] + [(f"{m} orders", draws)] * (m in DRAWN_ORDERS)
                    best.setdefault(profile, []).append(_compare(f"λ beats {m} ({name})", above(d),
                                                                 _numbers(d, arms)))
            if "reversed_lambda" in ran:
                for m, draws in ran.items():
                    if m != "reversed_lambda":
                        d = _contrast(draws, ran["reversed_lambda"])
                        arms = [(RANKINGS if m in RANKED else f"{m} orders", draws)] * (m in DRAWN_ORDERS) + [
                            (f"reversed {RANKINGS}", ran["reversed_lambda"])]
                        worst.setdefault(profile, []).append(_compare(f"{m} beats reversed λ ({name})", above(d),
                                                                      _numbers(d, arms)))
    profiles = sorted({*best, *unstable}, key=lambda p: (p is not None, p or ""))
    if not profiles:
        return _not_read(*where, run.not_run("λ and another selection method at a fraction between 0 and 1",
                                             lambda r: (r.fraction > 0) & (r.fraction < 1)
                                             & (r.selection != "lambda") & (r.selection != NONE)))
    parts = []
    for profile in profiles:
        whose = "" if profile is None else f", λ of the {profile} profile"
        none = "no λ ranking could be read" + (f" ({unstable[profile][0].numbers})" if unstable.get(profile) else "")
        parts += [_tally(f"λ beats every other method{whose}", best.get(profile, []), none=none),
                  _tally(f"reversed λ is the worst{whose}", worst.get(profile, []),
                         none="reversed λ not run" if best.get(profile) else none)]
        if unstable.get(profile) and best.get(profile):
            parts.append(_unread(f"{len(unstable[profile])} points{whose}", unstable[profile][0].numbers))
    return _reading(*where, parts)


# ---- Fig. 6 -----------------------------------------------------------------------------------------------------

# The pretraining objectives Fig. 6 compares with the downstream tasks (`sections.OBJECTIVE_TASKS`): an encoder's
# MLM (a probe trained on its features), a decoder's LM scored by its own frozen head (notebook 08) and by an LM probe
# trained from scratch. How each is named in a part:
OBJECTIVE_NAMES = {"mlm": "MLM", "lm": "LM (own head)", "lm_probe": "LM probe (from scratch)"}
# The paper's hypothesis is about a model's own pretraining objective: MLM is read for the paper's MLM-pretrained
# encoders only (not ELECTRA, pretrained on replaced-token detection, nor e.g. a sentence-embedding model without an
# MLM head), LM (with its head, or a probe) for every decoder.
MLM_PRETRAINED = tuple(short_model(m) for m in (*PAPER_BASE, *PAPER_LARGE))
# The paper's MLM numbers (Fig. 6): MLM-pretrained encoders lose 1–1.5 nats.
PAPER_MLM_NATS = (1.0, 1.5)
# A decoder's LM with its own head is read at every fraction the notebook runs it (heads replaced in λ order, as its
# probes), since nothing but the reading needs more: its score takes no training. The probes, the paper's at 0.
DECODER_POINTS = (("1/2", "lambda"), ("1/8", "lambda"), ("1/16", "lambda"), ("0", NONE))


def _own_objective(task: str, model: str, decoders: bool) -> bool:
    return task in ("lm", "lm_probe") if decoders else task == "mlm" and short_model(model) in MLM_PRETRAINED


def _random_too(run: _Run, model: str, task: str, label: str) -> str:
    """Where the run scored `task` at `label` in random order too (notebook 08's LM): its score, so that a size read
    in λ order is seen beside another order's ("" where it did not)."""
    random = run.draws(model, task, "random", label)
    if not random:
        return ""
    means = [s.values.mean() for s in random.values()]
    return (f"; in random order {np.mean(means):.2f} nats, "
            + (f"{len(means)} random orders" if len(means) > 1 else "1 order"))


def _fig6(run: _Run) -> ClaimReading:
    where = ("fig6", "Fig. 6", "07_mlm_electra", "figures/fig6_mlm_electra.png")
    objectives = run.models_tasks(OBJECTIVE_TASKS)
    own = [(m, t) for m, t in objectives if _own_objective(t, m, run.decoders)]
    others = sorted({short_model(m) for m, t in objectives if not _own_objective(t, m, run.decoders)})
    parts, nats = [], []
    models = sorted({m for m, _ in own})
    for model, task in own:
        original = run.scores(model, task)
        for label, selection in DECODER_POINTS if task == "lm" else (("0", NONE),):
            replaced = run.scores(model, task, "average", "task", selection, label)
            if original is None or replaced is None:
                continue
            name = OBJECTIVE_NAMES[task] + (f" at {label}" if run.decoders else "") + (
                f" ({short_model(model)})" if len(models) > 1 else "")
            unstable = [why for t in [task, *sorted({t for m, t in run.models_tasks() if m == model})]
                        if selection == "lambda" and (why := run.unstable(model, t))]
            if task == "lm_probe" and (why := run.beats_chance(model, task, original)):
                parts.append(_unread(f"{name} drops more", why))
                continue
            if unstable:
                parts.append(_unread(f"{name} drops more", unstable[0]))
                continue
            for normalise in (False, True):
                chance = run.chance(model, task) if normalise else None
                downstream, tasks, settings, average = _task_average_drop(run, model, label, selection,
                                                                          normalise=normalise)
                if normalise and (chance is None or downstream is None):
                    if run.decoders:  # the decoders' reading promises it: say that it is missing
                        parts.append(_unread(f"{name} drops more, normalised to chance",
                                             "the chance levels were not written (tables/decoder_chance_levels.csv)"))
                    continue
                if downstream is None:
                    continue
                gap = estimate(lambda o, z, *rest: _drop(o, z, chance) - average(*rest),  # noqa: B023
                               original, replaced, *settings)
                scale = "share of the margin over chance lost" if normalise else "relative drop"
                ordered = ("" if selection == NONE else
                           f" (λ order: 1 order{_random_too(run, model, task, label)})")
                parts.append(_compare(f"{name} drops more than {', '.join(tasks)}"
                                      + (", normalised to chance" if normalise else ""), above(gap),
                                      f"{original.values.mean():.2f} -> {replaced.values.mean():.2f} nats{ordered}; "
                                      f"{scale} minus the tasks' {gap.text(percent=True)}"))
        if task == "mlm" and original is not None:
            replaced = run.scores(model, task, "average", "task", NONE, "0")
            if replaced is not None:
                d = difference(replaced, original)
                nats.append(_compare(f"loses 1-1.5 nats ({short_model(model)})", within(d, *PAPER_MLM_NATS),
                                     d.text(2)))
    if not parts:
        why = ("a model's own pretraining objective (MLM for the paper's MLM-pretrained encoders, LM for a decoder) "
               "and a downstream task whose probe learns were not both run at fractions 1 and 0")
        if others:
            why += f" (MLM probes of {', '.join(others)} are not read: not pretrained with MLM)"
        return _not_read(*where, why)
    if run.decoders:  # the sentence's other parts are of MLM-pretrained encoders and ELECTRA: say so, never drop them
        parts += [_unread("MLM-pretrained encoders lose 1-1.5 nats", "a decoder is not pretrained with MLM"),
                  _unread("ELECTRA", "a decoder is not ELECTRA")]
    else:
        parts.append(_tally("MLM-pretrained encoders lose 1-1.5 nats", nats, none="no MLM-pretrained encoder"))
        electra = [m for m, t in objectives if "electra" in m.lower() and t == "mlm"]
        parts.append(_unread("ELECTRA", "ELECTRA's MLM was run: read it in notebook 07's figure" if electra
                             else "no ELECTRA model run"))
        if others:
            parts.append(_unread(f"MLM probes of {', '.join(others)}", "not pretrained with MLM"))
    return _reading(*where, parts)


# Where a claim read on the causal LMs is seen: notebook 08 and its figures.
DECODER_EVIDENCE = {"fig2_half": "figures/decoder_objective_vs_probes.png",
                    "fig2_all": "figures/decoder_objective_vs_probes.png",
                    "fig5": "figures/decoder_lm_selection.png",
                    "fig6": "figures/decoder_objective_vs_probes.png"}
DECODER_NOTEBOOK = "08_decoders"


# ---- reading a run ----------------------------------------------------------------------------------------------

def read_claims(results: pd.DataFrame, patterns: dict[str, pd.DataFrame] | None = None,
                learns: pd.DataFrame | None = None, *, out_dir: str | Path | None = None,
                stability: pd.DataFrame | None = None, chance: pd.DataFrame | None = None,
                intervals: dict[str, pd.DataFrame] | None = None) -> list[ClaimReading]:
    """Every claim of `papa.paper.paper_numbers.CLAIMS`, in the paper's order, read on the encoders' rows of
    `results` (a results table, `papa.runs.results.ResultsTable.read`), with the causal LMs' rows read apart as each
    claim's `decoder` line; Fig. 4 described from `patterns` (task -> `papa.paper.patterns.head_patterns`) and
    `intervals` (task -> `papa.paper.pattern_intervals.pattern_share_intervals`).

    With `learns` (`papa.paper.sections.probes_learn`), tasks whose probe does not beat its majority baseline are
    left out: whatever the attention, such a probe cannot tell one attention matrix from another. With `out_dir`,
    runs' stored predictions add the evaluation set's uncertainty. A λ ranking is read only where `stability`
    (model, task, spearman) has its row at ρ ≥ `STABLE_RHO`; `chance` (model, task, chance) puts drops on a scale
    from chance."""
    results, left_out = split_learning(results, learns)
    decoders = decoder_models(results) if len(results) else set()
    is_decoder, left_decoder = results["model"].isin(decoders), left_out["model"].isin(decoders)
    encoder_run = _Run(results[~is_decoder], out_dir, stability, chance, left_out=left_out[~left_decoder])
    decoder_run = _Run(results[is_decoder], out_dir, stability, chance, decoders=True,
                       left_out=left_out[left_decoder])
    readers = {"fig2_half": _fig2_half, "fig2_all": _fig2_all, "fig3": _fig3, "table1": _table1,
               "table2": _table2, "fig5": _fig5, "fig6": _fig6}
    readings = _pattern_readings(patterns or {}, intervals or {})
    for claim, read in readers.items():
        reading = read(encoder_run)
        if decoders:
            theirs = read(decoder_run)
            if theirs.ran:
                reading = replace(reading, decoder=replace(theirs, notebook=DECODER_NOTEBOOK,
                                                           evidence=DECODER_EVIDENCE.get(claim, theirs.evidence)))
        readings.append(reading)
    order = list(CLAIMS)
    return sorted(readings, key=lambda r: order.index(r.claim))


def read_tables(out_dir: str | Path, names: Sequence[str]) -> pd.DataFrame | None:
    """The tables `names` under ``<out_dir>/tables/`` that the run wrote, together (None: none)."""
    tables = [pd.read_csv(path) for name in names if (path := Path(out_dir) / "tables" / f"{name}.csv").is_file()]
    return pd.concat(tables, ignore_index=True) if tables else None


def run_claims(out_dir: str | Path, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None, probe_inputs: str | None = None) -> list[ClaimReading]:
    """`read_claims` on a run's output folder (``results.csv``, ``tables/fig4_patterns_<task>.csv`` and
    ``fig4_pattern_intervals_<task>.csv``, stored predictions, the λ rankings' stability tables, the chance levels),
    keeping the rows of `profile`, `layout` and `dtype` when given (a folder may hold several runs' rows), and those
    whose probe read its inputs as `probe_inputs` (None: as each model's grids do by default,
    `papa.probing.standardize.probe_inputs_for`)."""
    from papa.runs.results import ResultsTable

    out = Path(out_dir)
    results = ResultsTable(out / "results.csv").read()
    for column, wanted in (("profile", profile), ("dtype", dtype)):
        if wanted is not None:
            results = results[results[column] == wanted]
    if layout is not None:
        results = results[_in_layout(results, layout)]
    results = results[_with_probe_inputs(results, probe_inputs)]
    patterns = {path.stem.removeprefix("fig4_patterns_"): pd.read_csv(path, index_col=0)
                for path in sorted((out / "tables").glob("fig4_patterns_*.csv"))}
    intervals = {path.stem.removeprefix("fig4_pattern_intervals_"): pd.read_csv(path, index_col=0)
                 for path in sorted((out / "tables").glob("fig4_pattern_intervals_*.csv"))}
    return read_claims(results, patterns, read_learns(out), out_dir=out,
                       stability=run_agreement(out), chance=read_tables(out, CHANCE_TABLES),
                       intervals=intervals)


def run_agreement(out_dir: str | Path) -> pd.DataFrame | None:
    """Every pair of draws of the run's λ rankings that the claims gate on: the rankings under ``<out_dir>/rankings``
    compared pair by pair (`papa.runs.stability.draw_agreement`), and the seed-to-seed tables notebooks 02 and 08
    wrote (a run whose rankings are elsewhere); None where there is neither."""
    from papa.runs.stability import draw_agreement

    out = Path(out_dir)
    tables = [t for t in (draw_agreement(out / "rankings") if (out / "rankings").is_dir() else None,
                          _agreement(read_tables(out, RANKING_STABILITY_TABLES))) if t is not None and not t.empty]
    if not tables:
        return None
    # a pair the folder's files and a notebook's table both hold counts once (at the lower ρ, were they to differ)
    both = pd.concat([t[["model", "task", "profile", "a", "b", "spearman"]] for t in tables], ignore_index=True)
    return both.groupby(["model", "task", "profile", "a", "b"], dropna=False, sort=False).spearman.min().reset_index()


def profile_claims(out_dir: str | Path, profile: str | Path,
                   notebooks: Collection[str] | None = None) -> list[ClaimReading]:
    """`run_claims` on the rows a run of `profile` (a name or a profile file) made in its layout at float32, the
    precision the notebooks run at; only the claims of `notebooks` (names such as "02_main_results") when given: a
    claim whose decoder line notebook 08 computes belongs to it too."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    readings = run_claims(out_dir, profile=prof.name, layout=prof.layout, dtype=DEFAULT_DTYPE)
    return [r for r in readings if notebooks is None or r.notebook in notebooks
            or (r.decoder is not None and r.decoder.notebook in notebooks)]


#: Where the results of the CPU-scale run are, for a smoke run's readers.
CPU_RUN_RESULTS = ("artifacts/cpu/ (results.csv, tables, figures, executed notebooks), read claim by claim in "
                   "docs/results.md and the README's \"Results\"")


def smoke_run_note(profile: str | Path) -> str:
    """For a run of the quick profile (or a file based on it), the sentence that comes first wherever its claims are
    printed: its numbers are not results, and where the CPU-scale run's are; "" for any other profile."""
    from papa.runs.profiles import builtin_base, get_profile

    if builtin_base(profile) != "quick":
        return ""
    prof = get_profile(profile)
    return (f"THIS IS A SMOKE RUN, NOT A RESULT: profile {prof.name} trains on {prof.train_limit} examples per task "
            f"with {len(prof.seeds)} seeds, to show that every section runs; none of its numbers or verdicts is "
            f"evidence for or against the paper. The CPU-scale run's results are in {CPU_RUN_RESULTS} "
            "(`make reproduce PROFILE=cpu` reruns it).")


def smoke_run_first(profile: str | Path, text: str) -> str:
    """`text`, after `smoke_run_note` where `profile` is a smoke run."""
    return " ".join(filter(None, [smoke_run_note(profile), text]))


def section_claims(out_dir: str | Path, profile: str | Path, notebook: str) -> str:
    """What `papa reproduce` prints for the claims `notebook` reads (verdict, rule, paired numbers, file), with what
    their intervals hold and how stable the λ rankings are; for a notebook's last cell. A smoke run says so first
    (`smoke_run_note`)."""
    readings = profile_claims(out_dir, profile, [notebook])
    if not readings:
        return smoke_run_first(profile, f"No claim of the paper is read by {notebook}.")
    head = smoke_run_first(profile, profile_uncertainty_note(out_dir, profile))
    if any(r.claim in LAMBDA_CLAIMS for r in readings):
        head += " " + stability_note(out_dir)
    return headed_claims(head, readings, out_dir)


def headed_claims(head: str, readings: Sequence[ClaimReading], out_dir: str | Path) -> str:
    """`head` wrapped as a paragraph above `format_claims(readings, out_dir)`."""
    return "\n".join([textwrap.fill(head, width=116, break_on_hyphens=False), format_claims(readings, out_dir)])


def profile_uncertainty_note(out_dir: str | Path, profile: str | Path) -> str:
    """`uncertainty_note` on the rows a run of `profile` wrote to `out_dir`'s results.csv."""
    from papa.runs.profiles import get_profile
    from papa.runs.results import ResultsTable

    rows = ResultsTable(Path(out_dir) / "results.csv").read()
    return uncertainty_note(out_dir, rows[rows.profile == get_profile(profile).name])


def uncertainty_note(out_dir: str | Path, results: pd.DataFrame) -> str:
    """One sentence on what the intervals of a run's claims hold: the seeds' and the evaluation examples' variance,
    or the seeds' only for runs made before each run stored its predictions."""
    from papa.runs.predictions_store import PREDICTIONS_DIR

    stored = {p.stem for p in (Path(out_dir) / PREDICTIONS_DIR).glob("*.safetensors")}
    missing = sum(rid not in stored for rid in results["run_id"])
    drawn = sorted({n for n in set(results["selection"])
                    if n != NONE and parse_selection(n).is_variant and parse_selection(n).profile is None})
    orders = (f" Where a head order was drawn more than once ({', '.join(drawn)}), the intervals of Fig. 2's and "
              "Fig. 5's parts hold the variance over the draws too." if drawn else "")
    if not missing:
        return ("Intervals hold the probe seeds' variance and the evaluation examples' (a bootstrap over them), "
                f"paired by seed.{orders}")
    return (f"{missing} of {len(results)} runs were made before runs stored their predictions: their intervals "
            f"hold the probe seeds' variance only, not the evaluation examples'.{orders}")


def stability_note(out_dir: str | Path) -> str:
    """One sentence on the run's λ rankings: per task (and profile, where another's ranking ran) the range of
    Spearman's ρ over every pair of its draws (`run_agreement`), and which fall below `STABLE_RHO` on some pair
    (their λ-dependent parts are not read), or that no pair was measured."""
    table = run_agreement(out_dir)
    if table is None:
        return ("The λ rankings' stability was not measured (no second draw of a ranking beside it, no "
                "tables/ranking_stability.csv): the parts that rest on them are not read.")
    table = table.assign(profile=table.profile.astype(object).where(table.profile.notna(), ""))
    groups = table.groupby(["model", "task", "profile"], sort=False).spearman
    many = table.model.nunique() > 1
    each, below = [], []
    for (model, task, profile), rhos in groups:
        name = _label(model, task, 2 if many else 1) + (f" ({profile})" if profile else "")
        draws = len(set(table.a[rhos.index]) | set(table.b[rhos.index]))
        span = f"{rhos.min():.2f}" if len(rhos) == 1 else f"{rhos.min():.2f} to {rhos.max():.2f}"
        each.append(f"{name} {span} ({draws} draws)")
        if not rhos.min() >= STABLE_RHO:
            below.append(name)
    tail = (f"; some pair below {STABLE_RHO}, not read where a part rests on them: {', '.join(below)}." if below
            else f", all at least {STABLE_RHO}.")
    return (f"λ rankings, every pair of draws (seeds and disjoint training parts), Spearman's ρ: {', '.join(each)}"
            f"{tail} A ranking with one draw is not read.")


def _in_layout(results: pd.DataFrame, layout: str) -> pd.Series:
    """Rows made in `layout`, and the rows of causal LMs (`decoder_models`): a profile's layout applies to encoders,
    while a causal LM always reads left-aligned inputs (`papa.method.layout.layout_for`)."""
    return (results["layout"] == layout) | results["model"].isin(decoder_models(results))


def decoder_models(results: pd.DataFrame) -> set[str]:
    """The causal LMs among `results`' models: from the model's local config where it is on this machine, else
    from its rows (a causal LM runs in the decoder layout only)."""
    from papa.method.models import is_causal_model

    layouts = results.groupby("model")["layout"].agg(set)
    return {model for model, used in layouts.items()
            if (causal := is_causal_model(model)) or (causal is None and used == {DECODER_LAYOUT})}


def _with_probe_inputs(results: pd.DataFrame, probe_inputs: str | None) -> pd.Series:
    """Rows whose probe read `probe_inputs`, or (None) each model's default (`decoder_models` read standardised
    inputs); a task without a probe reads its inputs raw whatever was asked."""
    from papa.probing.standardize import probe_inputs_for
    from papa.tasks.registry import get_task

    decoders = decoder_models(results)
    trains = {task: get_task(task).trains_probe for task in set(results["task"])}
    wanted = [probe_inputs_for(model in decoders, probe_inputs if trains[task] else None,
                               trains_probe=trains[task]) for model, task in zip(results["model"], results["task"])]
    return pd.Series(np.asarray(wanted, dtype=object) == results["probe_inputs"].to_numpy(), index=results.index,
                     dtype=bool)


def learns_tables(out_dir: str | Path) -> list[str]:
    """The `papa.paper.sections.probes_learn` tables the run in `out_dir` wrote (notebook 02's, notebook 08's), as
    paths relative to it."""
    return [f"tables/{name}.csv" for name in LEARNS_TABLES if (Path(out_dir) / "tables" / f"{name}.csv").is_file()]


def read_learns(out_dir: str | Path) -> pd.DataFrame | None:
    """The run's `learns_tables`, together, or None."""
    table = read_tables(out_dir, LEARNS_TABLES)
    return None if table is None else table.set_index(["model", "task"])


def format_claims(readings: Sequence[ClaimReading], out_dir: str | Path, width: int = 116) -> str:
    """Per claim: where in the paper, the verdict and the claim; its rule; then our numbers and the file to look at
    (marked "not written" when the run did not write it), and the decoders' line where causal LMs ran. Lines are
    wrapped at `width`, never inside a path."""
    lines = []
    for r in readings:
        head = f"  {r.where:<8} {r.verdict_text:<14} "
        indent = " " * 26
        lines.append(textwrap.fill(r.text, width=width, initial_indent=head, subsequent_indent=indent))
        if r.verdict != NOT_READ:
            lines.append(textwrap.fill(f"rule: {r.rule}", width=width, initial_indent=indent,
                                       subsequent_indent=indent + "      "))
        for label, reading in (("ours", r), ("decoders", r.decoder)):
            if reading is None:
                continue
            evidence = Path(out_dir) / reading.evidence
            missing = "" if evidence.is_file() or reading.verdict == NOT_READ else " (not written)"
            verdict = f"{reading.verdict_text}: " if label == "decoders" else ""
            lines.append(textwrap.fill(f"{label}: {verdict}{reading.ours} -> {evidence}{missing}", width=width,
                                       initial_indent=indent, subsequent_indent=indent + "      ",
                                       break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)
