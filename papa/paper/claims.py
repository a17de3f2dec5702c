"""The paper's claims read off a run's results: per claim a verdict, the rule behind it, our numbers and the figure
(or table) that shows it. `papa reproduce` ends with `format_claims` of what it just computed.

Each claim is the paper's sentence (`papa.paper.paper_numbers.CLAIMS`) cut into the parts it asserts; every part is
read on the rows of ``<out>/results.csv`` with the paired statistics of `papa.runs.statistics` (runs with the same
seed compared seed by seed; the evaluation examples resampled where the run stored its predictions) and gets one of
three verdicts: **holds** (the 95% interval lies on the claim's side of its bound), **does not hold** (it lies on the
other side), **inconclusive** (it straddles the bound). A part the run cannot read (too few models, trained constants
sized apart from the rest, an unstable λ ranking) is **not read** and named. A claim holds when every part it reads
holds, does not hold when one part does not, and is inconclusive otherwise; `RULES` states each claim's rule in one
line, and the margins below say where "no major drop", "alike" and "close" end.

The margins are read off the paper's own numbers (`papa.paper.paper_numbers`). Its Table 1 (RoBERTa-base) has the
all-constant model lose 34% of CoLA's MCC but 0–12% elsewhere, 9.5% on average over the six tasks (RoBERTa-large,
Table 4: 36% and 12.1%): so "8% on average, never more than 20%" (Sec. 4.2) is about a model's relative drop
averaged over its tasks (Fig. 3's x-axis), averaged again over the six models, not a bound per task.
"""
from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as _scipy_stats

from papa.core.vocabulary import (DATA_FREE_KINDS, DECODER_LAYOUT, DEFAULT_DTYPE, NONE, PAPER_BASE, PAPER_LARGE,
                                  RANKED, SELECTION_METHODS)
from papa.paper.paper_numbers import (CLAIMS, PAPER_AVERAGE_RELATIVE_DROP, PAPER_DIAGONAL_SHARE,
                                      PAPER_MAX_RELATIVE_DROP, PAPER_SPECIAL_SHARE)
from papa.paper.patterns import pattern_summary
from papa.paper.sections import (DOWNSTREAM_TASKS, LEARNS_TABLES, RANKING_STABILITY_TABLE, short_model,
                                  split_learning)
from papa.runs.compare import RunScores
from papa.runs.statistics import (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, VERDICTS, Estimate, Scores, above,
                                  all_of, any_of, at_most, difference, estimate, within)

__all__ = ["VERDICTS", "RULES", "ClaimReading", "Part", "read_claims", "run_claims", "read_learns", "learns_tables",
           "format_claims", "smoke_run_note", "smoke_run_first",
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
# A share of heads (Fig. 4) is "about" the paper's when within this of it.
SHARE_MARGIN = 0.15
# "Spread over several tokens rather than one" (Fig. 4): median normalised row entropy at least this.
SPREAD_THRESHOLD = 0.5
# A λ ranking is read only where rankings learned with two seeds agree at least this much (Spearman's ρ).
STABLE_RHO = 0.8
# The claims with parts that rest on a λ ranking (the heads kept at a fraction strictly between 0 and 1).
LAMBDA_CLAIMS = ("fig2_half", "fig5")

#: Each claim's rule, in one line.
RULES = {
    "fig2_half": f"per task whose probe learns: original − (λ, 1/2) below {HALF_MARGIN} (upper end of its 95% "
                 "interval); 'sometimes improves': on some task (λ, 1/2) − original above 0",
    "fig2_all": f"per model, the relative drop at 0 averaged over its tasks: the mean over models within "
                f"{PAPER_AVERAGE_RELATIVE_DROP:.0%} ± {AVERAGE_MARGIN * 100:.0f} points and every model's below "
                f"{PAPER_MAX_RELATIVE_DROP:.0%}",
    "fig3": "over models: Spearman's ρ of original score and relative drop above 0 (p < 0.05)",
    "fig4_diagonal": f"share of diagonal heads within ±{SHARE_MARGIN * 100:.0f} points of {PAPER_DIAGONAL_SHARE:.0%}",
    "fig4_special": f"share of heads mostly on special tokens within ±{SHARE_MARGIN * 100:.0f} points of "
                    f"{PAPER_SPECIAL_SHARE:.0%}",
    "fig4_spread": f"median normalised row entropy at least {SPREAD_THRESHOLD}",
    "table1": f"at 0, per task: average − each data-free kind above 0; average − trained Toeplitz above 0; |average − "
              f"trained average| within {CLOSE_MARGIN} (trained rows read only at the others' training size)",
    "table2": f"at 0, per task: other corpus's constants − the task's own within ±{ALIKE_MARGIN}",
    "fig5": "per task and fraction strictly between 0 and 1: λ − each other method above 0; each method − reversed λ "
            "above 0 (read only where two seeds' λ rankings agree)",
    "fig6": "per model: its own objective's relative drop at 0 − the mean of its downstream tasks' above 0 (MLM for "
            "MLM-pretrained encoders; LM for decoders, at 1/2, 1/8 and 1/16 in λ order too); the paper's nats and "
            "ELECTRA read only where such models ran",
}


@dataclass(frozen=True)
class Part:
    """One part of a claim's sentence as this run reads it."""

    name: str        # e.g. "no major drop at 1/2 (sst2)"
    verdict: str     # one of VERDICTS
    numbers: str     # the estimate behind it, e.g. "0.012 [-0.004, 0.028]"


@dataclass(frozen=True)
class ClaimReading:
    """One claim of the paper as this run reads it."""

    claim: str       # key of `papa.paper.paper_numbers.CLAIMS`
    where: str       # the paper's figure or table
    notebook: str    # the section notebook that computes it
    verdict: str     # one of VERDICTS
    ours: str        # our numbers, one line
    evidence: str    # the figure (or table) behind it, relative to the run's output folder
    parts: tuple[Part, ...] = field(default=())

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


def _reading(claim: str, where: str, notebook: str, evidence: str, parts: Sequence[Part], ours: str = "",
             combine=all_of) -> ClaimReading:
    verdict = combine(p.verdict for p in parts)
    shown = [p for p in parts if p.verdict != NOT_READ]
    line = ours or "; ".join(f"{p.name}: {p.numbers} ({p.verdict})" for p in shown)
    unread = [p for p in parts if p.verdict == NOT_READ]
    if unread and shown:
        line += "; not read: " + "; ".join(f"{p.name} ({p.numbers})" for p in unread)
    elif unread:
        line = "; ".join(f"{p.name}: {p.numbers}" for p in unread)
    return ClaimReading(claim, where, notebook, verdict, line, evidence, tuple(parts))


def _not_read(claim: str, where: str, notebook: str, evidence: str, why: str) -> ClaimReading:
    return ClaimReading(claim, where, notebook, NOT_READ, why, evidence, (Part(claim, NOT_READ, why),))


# ---- the run's numbers ----------------------------------------------------------------------------------------

class _Run(RunScores):
    """A run's `RunScores`, the tasks it ran, and whether its λ rankings can be read."""

    def __init__(self, results: pd.DataFrame, out_dir: str | Path | None, stability: pd.DataFrame | None):
        super().__init__(results, out_dir)
        self.stability = stability
        # Causal LMs are beyond the paper: only Fig. 6's reading, of a model's own objective beside its probes,
        # takes them.
        self.decoders = decoder_models(results)

    def models_tasks(self, tasks: Sequence[str] = DOWNSTREAM_TASKS, *, decoders: bool = False
                     ) -> list[tuple[str, str]]:
        """(model, task) pairs that ran one of `tasks`: the encoders', and with `decoders` the causal LMs' too."""
        r = self.results[self.results.task.isin(tasks)]
        if not decoders:
            r = r[~r.model.isin(self.decoders)]
        return sorted(set(zip(r.model, r.task)), key=lambda mt: (mt[0], list(tasks).index(mt[1])))

    def unstable(self, model: str, task: str) -> str | None:
        """Why `task`'s λ ranking on `model` cannot be read (None: it can, or its stability was not measured)."""
        if self.stability is None:
            return None
        table = self.stability.reset_index()
        row = table[(table.model == model) & (table.task == task)]
        if row.empty:
            return None
        rho = float(row["spearman"].iloc[0])
        return None if rho >= STABLE_RHO else f"λ rankings of two seeds agree at ρ = {rho:.2f} < {STABLE_RHO}"


def _label(model: str, task: str, models: int) -> str:
    return task if models < 2 else f"{task}, {short_model(model)}"


def _count(models_tasks) -> int:
    return len({m for m, _ in models_tasks})


# ---- Fig. 2 and 3 -----------------------------------------------------------------------------------------------

def _fig2_half(run: _Run) -> ClaimReading:
    where = ("fig2_half", "Fig. 2", "02_main_results", "figures/fig2_main_results.png")
    drops, improves = [], []
    pairs = run.models_tasks()
    k = _count(pairs)
    for model, task in pairs:
        original = run.scores(model, task)
        half = run.scores(model, task, "average", "task", "lambda", "1/2")
        if original is None or half is None:
            continue
        label = _label(model, task, k)
        why = run.unstable(model, task)
        if why:
            drops.append(Part(f"drop at 1/2 ({label})", NOT_READ, why))
            continue
        drop = difference(half, original)  # original − half
        drops.append(Part(f"drop at 1/2 ({label})", at_most(drop, HALF_MARGIN), drop.text()))
        improves.append(above(difference(original, half)))
    if not drops:
        return _not_read(*where, "no task was run at fractions 1 and 1/2")
    some = any_of(improves) if improves else NOT_READ
    parts = [*drops, Part("sometimes improves", some,
                          f"improves significantly on {improves.count(HOLDS)} of {len(improves)} tasks")]
    return _reading(*where, parts)


def _task_average_relative_drop(run: _Run, model: str, label: str = "0", selection: str = NONE
                                ) -> tuple[Estimate | None, list[str], list[Scores]]:
    """A model's relative drop at fraction `label` (heads replaced in `selection` order; at 0: every head) averaged
    over its tasks (Fig. 3's x-axis at 0), paired per seed; the tasks, and their (original, replaced) scores."""
    settings, tasks = [], []
    for m, task in run.models_tasks(decoders=True):
        if m != model:
            continue
        original, replaced = run.scores(model, task), run.scores(model, task, "average", "task", selection, label)
        if original is None or replaced is None or original.values.mean() == 0:
            continue  # a score of 0 (a probe that learnt nothing) has no relative drop
        settings += [original, replaced]
        tasks.append(task)
    if not settings:
        return None, [], []
    t = len(tasks)

    def average(*means):
        return sum((means[2 * i] - means[2 * i + 1]) / np.abs(means[2 * i]) for i in range(t)) / t
    return estimate(average, *settings), tasks, settings


def _fig2_all(run: _Run) -> ClaimReading:
    where = ("fig2_all", "Fig. 2", "02_main_results", "figures/fig2_main_results.png")
    models = sorted({m for m, _ in run.models_tasks()})
    per_model = {m: _task_average_relative_drop(run, m)[:2] for m in models}
    per_model = {m: v for m, v in per_model.items() if v[0] is not None}
    if not per_model:
        return _not_read(*where, "no task with a non-zero original score was run at fractions 1 and 0")
    estimates = [e for e, _ in per_model.values()]
    # The mean over models: each model's estimate is independent of the others', so their variances add.
    k = len(estimates)
    mean = Estimate(value=sum(e.value for e in estimates) / k,
                    se_seeds=math.sqrt(sum(e.se_seeds ** 2 for e in estimates)) / k,
                    se_examples=math.sqrt(sum(e.se_examples ** 2 for e in estimates)) / k,
                    seeds=min(e.seeds for e in estimates), examples=all(e.examples for e in estimates))
    average = Part(f"average relative drop over {k} model(s)",
                   within(mean, PAPER_AVERAGE_RELATIVE_DROP - AVERAGE_MARGIN,
                          PAPER_AVERAGE_RELATIVE_DROP + AVERAGE_MARGIN),
                   f"{mean.text(percent=True)} (paper {PAPER_AVERAGE_RELATIVE_DROP:.0%})")
    bounds = [Part(f"never over {PAPER_MAX_RELATIVE_DROP:.0%}"
                   + (f" ({short_model(m)}, {len(tasks)} tasks)" if k > 1 else f" ({', '.join(tasks)})"),
                   at_most(e, PAPER_MAX_RELATIVE_DROP), e.text(percent=True))
              for m, (e, tasks) in per_model.items()]
    return _reading(*where, [average, *bounds])


def _fig3(run: _Run) -> ClaimReading:
    where = ("fig3", "Fig. 3", "02_main_results", "figures/fig3_performance_vs_drop.png")
    models = sorted({m for m, _ in run.models_tasks()})
    points = []
    for m in models:
        e, tasks, _ = _task_average_relative_drop(run, m)
        if e is not None:
            original = np.mean([run.scores(m, t).values.mean() for t in tasks])
            points.append((original, e.value))
    if len(points) < 3:
        return _not_read(*where, f"{len(points)} model(s): a rank correlation over models needs at least 3 (the "
                                 "full profile runs six)")
    rho, p = _scipy_stats.spearmanr([o for o, _ in points], [d for _, d in points])
    verdict = (HOLDS if rho > 0 and p < 0.05 else DOES_NOT_HOLD if rho < 0 and p < 0.05 else INCONCLUSIVE)
    return _reading(*where, [Part(f"better models lose more ({len(points)} models)", verdict,
                                  f"Spearman's ρ {rho:+.2f}, p = {p:.3f}")])


# ---- Fig. 4 -----------------------------------------------------------------------------------------------------

def _pattern_readings(patterns: dict[str, pd.DataFrame]) -> list[ClaimReading]:
    """Fig. 4's three claims from the pattern table of the first task that has one (constants: no seeds)."""
    claims = ("fig4_diagonal", "fig4_special", "fig4_spread")
    if not patterns:
        return [_not_read(c, "Fig. 4", "03_constant_patterns", "figures/fig4_constant_matrices_<task>.png",
                          "no pattern table in this run") for c in claims]
    task = sorted(patterns)[0]
    summary = pattern_summary(patterns[task])
    figure = f"figures/fig4_constant_matrices_{task}.png"
    heads = int(summary["heads"])
    diagonal, special, spread = summary["diagonal"], summary["special"], summary["median_spread"]
    about = lambda share, paper: HOLDS if abs(share - paper) <= SHARE_MARGIN + 1e-12 else DOES_NOT_HOLD  # noqa: E731
    return [
        _reading("fig4_diagonal", "Fig. 4", "03_constant_patterns", figure, [Part(
            "diagonal heads", about(diagonal, PAPER_DIAGONAL_SHARE),
            f"{diagonal:.0%} of {heads} ({task} constants; paper about {PAPER_DIAGONAL_SHARE:.0%})")]),
        _reading("fig4_special", "Fig. 4", "03_constant_patterns", figure, [Part(
            "heads mostly on special tokens", about(special, PAPER_SPECIAL_SHARE),
            f"{special:.0%} of {heads} (paper about {PAPER_SPECIAL_SHARE:.0%})")]),
        _reading("fig4_spread", "Fig. 4", "03_constant_patterns", figure, [Part(
            "rows spread", HOLDS if spread >= SPREAD_THRESHOLD else DOES_NOT_HOLD,
            f"median row spread {spread:.2f} (0 = one token, 1 = uniform)")]),
    ]


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
                beats.append(Part(f"beats {kind} ({label})", above(d), d.text()))
        size = _train_examples(run, model, task, "average", "task")
        for kind, out in (("trainable_toeplitz", trained_toeplitz), ("trainable_average", trained_average)):
            other = run.scores(model, task, kind, "task", NONE, "0")
            if other is None:
                continue
            trained = _train_examples(run, model, task, kind, "task")
            if trained != size:
                out.append(Part(f"{kind} ({label})", NOT_READ, f"trained on {_examples(trained)} examples, the "
                                                                f"others' probes on {_examples(size)}"))
                continue
            d = difference(other, average)
            out.append(Part(f"{'beats' if kind == 'trainable_toeplitz' else 'close to'} {kind} ({label})",
                            above(d) if kind == "trainable_toeplitz" else within(d, -CLOSE_MARGIN, CLOSE_MARGIN),
                            d.text()))
    if not beats:
        return _not_read(*where, "average and data-free constants were not all run with every head replaced")
    data_free = Part(f"beats every data-free matrix ({len(beats)} comparisons)", all_of(p.verdict for p in beats),
                     _tally(beats))
    parts = [data_free]
    for name, found in (("beats trained Toeplitz-initialised", trained_toeplitz),
                        ("close to trained average-initialised", trained_average)):
        if not found:
            parts.append(Part(name, NOT_READ, "not run"))
        elif all(p.verdict == NOT_READ for p in found):
            parts.append(Part(name, NOT_READ, found[0].numbers))
        else:
            read = [p for p in found if p.verdict != NOT_READ]
            parts.append(Part(name, all_of(p.verdict for p in read), _tally(read)))
    return _reading(*where, parts)


def _examples(sizes: set) -> str:
    return "/".join(str(s) for s in sorted(sizes, key=str)) or "?"


def _tally(parts: Sequence[Part]) -> str:
    """e.g. "holds on 10 of 12, inconclusive on 2 (e.g. beats zeros (ner) -0.004 [-0.020, +0.012])": the count per
    verdict, and one comparison of the worst verdict."""
    counts = [(v, sum(p.verdict == v for p in parts)) for v in (HOLDS, INCONCLUSIVE, DOES_NOT_HOLD)]
    text = ", ".join(f"{v} on {n}" + (f" of {len(parts)}" if i == 0 else "") for i, (v, n) in enumerate(counts)
                     if n or i == 0)
    worst = next((p for v in (DOES_NOT_HOLD, INCONCLUSIVE) for p in parts if p.verdict == v), None)
    return text + (f" (e.g. {worst.name} {worst.numbers})" if worst else "")


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
            parts.append(Part(f"{other}'s constants alike ({_label(model, task, k)})",
                              within(d, -ALIKE_MARGIN, ALIKE_MARGIN), d.text()))
    if not parts:
        return _not_read(*where, f"no task was run with both its own and {other}'s constants")
    return _reading(*where, parts)


# ---- Fig. 5 -----------------------------------------------------------------------------------------------------

def _fig5(run: _Run) -> ClaimReading:
    where = ("fig5", "Fig. 5", "06_head_selection", "figures/fig5_head_selection.png")
    methods = [m for m in SELECTION_METHODS if m in set(run.results.selection)]
    mid = run.results[run.results.selection.isin(methods) & (run.results.fraction > 0) & (run.results.fraction < 1)
                      & (run.results.constants == "average") & (run.results.constants_corpus == "task")]
    points = sorted(set(zip(mid.model, mid.task, mid.fraction_label)))
    k = len({m for m, _, _ in points})
    best, worst, unstable = [], [], []
    for model, task, label in points:
        ran = {m: run.scores(model, task, "average", "task", m, label) for m in methods}
        ran = {m: s for m, s in ran.items() if s is not None}
        if "lambda" not in ran or len(ran) < 2:
            continue  # Fig. 2's tasks run λ alone
        why = run.unstable(model, task)
        name = f"{_label(model, task, k)} at {label}"
        if why:
            unstable.append(Part(name, NOT_READ, why))
            continue
        for m, s in ran.items():
            if m not in RANKED:  # λ against the data-free orders
                d = difference(s, ran["lambda"])
                best.append(Part(f"λ beats {m} ({name})", above(d), d.text()))
        if "reversed_lambda" in ran:
            for m, s in ran.items():
                if m != "reversed_lambda":
                    d = difference(ran["reversed_lambda"], s)
                    worst.append(Part(f"{m} beats reversed λ ({name})", above(d), d.text()))
    if not best and not unstable:
        return _not_read(*where, "λ and another selection method were not run at a fraction between 0 and 1")
    parts = [Part("λ beats every other method", all_of(p.verdict for p in best), _tally(best)) if best else
             Part("λ beats every other method", NOT_READ, "no stable λ ranking"),
             Part("reversed λ is the worst", all_of(p.verdict for p in worst), _tally(worst)) if worst else
             Part("reversed λ is the worst", NOT_READ, "reversed λ not run")]
    if unstable:
        parts.append(Part(f"{len(unstable)} points", NOT_READ, unstable[0].numbers))
    return _reading(*where, parts)


# ---- Fig. 6 -----------------------------------------------------------------------------------------------------

# The pretraining objectives Fig. 6 compares with the downstream tasks: an encoder's MLM (a probe trained on its
# features) and a decoder's LM (scored by its own frozen head, notebook 08).
OBJECTIVES = ("mlm", "lm")
# The paper's hypothesis is about a model's own pretraining objective: MLM is read for the paper's MLM-pretrained
# encoders only (not ELECTRA, pretrained on replaced-token detection, nor e.g. a sentence-embedding model without an
# MLM head), LM for every decoder.
MLM_PRETRAINED = tuple(short_model(m) for m in (*PAPER_BASE, *PAPER_LARGE))
# The paper's MLM numbers (Fig. 6): MLM-pretrained encoders lose 1–1.5 nats.
PAPER_MLM_NATS = (1.0, 1.5)


def _own_objective(task: str, model: str) -> bool:
    return task == "lm" or (task == "mlm" and short_model(model) in MLM_PRETRAINED)


# A decoder's LM is read at every fraction the notebook runs it (heads replaced in λ order, as its probes), since
# nothing but the reading needs more: its score takes no training.
DECODER_POINTS = (("1/2", "lambda"), ("1/8", "lambda"), ("1/16", "lambda"), ("0", NONE))


def _fig6(run: _Run) -> ClaimReading:
    where = ("fig6", "Fig. 6", "07_mlm_electra", "figures/fig6_mlm_electra.png")
    # read on decoders only: notebook 08 shows it
    decoder_only = ("fig6", "Fig. 6", "08_decoders", "figures/decoder_objective_vs_probes.png")
    objectives = [(m, t) for m, t in run.models_tasks(OBJECTIVES, decoders=True)]
    own = [(m, t) for m, t in objectives if _own_objective(t, m)]
    others = sorted({short_model(m) for m, t in objectives if not _own_objective(t, m)})
    parts, nats = [], []
    models = sorted({m for m, _ in own})
    for model, task in own:
        original = run.scores(model, task)
        for label, selection in DECODER_POINTS if task == "lm" else (("0", NONE),):
            replaced = run.scores(model, task, "average", "task", selection, label)
            downstream, tasks, settings = _task_average_relative_drop(run, model, label, selection)
            if original is None or replaced is None or downstream is None:
                continue
            n = len(tasks)

            def gap(o, z, *rest):  # own objective's relative drop − the downstream tasks' average
                mine = (o - z) / np.abs(o)
                return mine - sum((rest[2 * i] - rest[2 * i + 1]) / np.abs(rest[2 * i]) for i in range(n)) / n
            e = estimate(gap, original, replaced, *settings)
            name = (f"{task.upper()} drops more than {', '.join(tasks)}" + (f" at {label}" if task == "lm" else "")
                    + (f" ({short_model(model)})" if len(models) > 1 else ""))
            parts.append(Part(name, above(e), f"{original.values.mean():.2f} -> {replaced.values.mean():.2f} nats; "
                                              f"relative drop minus the tasks' {e.text(percent=True)}"))
            if task == "mlm":
                d = difference(replaced, original)
                nats.append(Part(f"loses 1-1.5 nats ({short_model(model)})", within(d, *PAPER_MLM_NATS), d.text(2)))
    if not parts:
        why = ("a model's own pretraining objective (MLM for the paper's MLM-pretrained encoders, LM for a decoder) "
               "and a downstream task whose probe learns were not both run at fractions 1 and 0")
        if others:
            why += f" (MLM probes of {', '.join(others)} are not read: not pretrained with MLM)"
        return _not_read(*where, why)
    if all(t == "lm" for _, t in own):
        where = decoder_only
    parts.append(Part("MLM-pretrained encoders lose 1-1.5 nats", all_of(p.verdict for p in nats), _tally(nats))
                 if nats else Part("MLM-pretrained encoders lose 1-1.5 nats", NOT_READ, "no MLM-pretrained encoder"))
    electra = [m for m, t in objectives if "electra" in m.lower() and t == "mlm"]
    parts.append(Part("ELECTRA", NOT_READ, "ELECTRA's MLM was run: read it in notebook 07's figure" if electra
                      else "no ELECTRA model run"))
    if others:
        parts.append(Part(f"MLM probes of {', '.join(others)}", NOT_READ, "not pretrained with MLM"))
    return _reading(*where, parts)


# ---- reading a run ----------------------------------------------------------------------------------------------

def read_claims(results: pd.DataFrame, patterns: dict[str, pd.DataFrame] | None = None,
                learns: pd.DataFrame | None = None, *, out_dir: str | Path | None = None,
                stability: pd.DataFrame | None = None) -> list[ClaimReading]:
    """Every claim of `papa.paper.paper_numbers.CLAIMS`, in the paper's order, read on `results` (rows of a results
    table, `papa.runs.results.ResultsTable.read`) and `patterns` (task -> `papa.paper.patterns.head_patterns`).

    With `learns` (`papa.paper.sections.probes_learn`), tasks whose probe does not beat its majority baseline are
    left out: whatever the attention, such a probe cannot tell one attention matrix from another. With `out_dir`,
    runs' stored predictions add the evaluation set's uncertainty; with `stability` (model, task, spearman), λ rankings
    whose seeds disagree are not read."""
    results, _ = split_learning(results, learns)
    run = _Run(results, out_dir, stability)
    readings = [_fig2_half(run), _fig2_all(run), _fig3(run), *_pattern_readings(patterns or {}), _table1(run),
                _table2(run), _fig5(run), _fig6(run)]
    order = list(CLAIMS)
    return sorted(readings, key=lambda r: order.index(r.claim))


def run_claims(out_dir: str | Path, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None, probe_inputs: str | None = None) -> list[ClaimReading]:
    """`read_claims` on a run's output folder (``results.csv``, ``tables/fig4_patterns_<task>.csv``, stored
    predictions, the λ rankings' stability table), keeping the rows of `profile`, `layout` and `dtype` when given (a
    folder may hold several runs' rows), and those whose probe read its inputs as `probe_inputs` (None: as each
    model's grids do by default, `papa.probing.standardize.probe_inputs_for`)."""
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
    stability_path = out / "tables" / f"{RANKING_STABILITY_TABLE}.csv"
    stability = pd.read_csv(stability_path) if stability_path.is_file() else None
    return read_claims(results, patterns, read_learns(out), out_dir=out, stability=stability)


def profile_claims(out_dir: str | Path, profile: str | Path,
                   notebooks: Collection[str] | None = None) -> list[ClaimReading]:
    """`run_claims` on the rows a run of `profile` (a name or a profile file) made in its layout at float32, the
    precision the notebooks run at; only the claims of `notebooks` (names such as "02_main_results") when given."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    readings = run_claims(out_dir, profile=prof.name, layout=prof.layout, dtype=DEFAULT_DTYPE)
    return [r for r in readings if notebooks is None or r.notebook in notebooks]


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
    if not missing:
        return ("Intervals hold the probe seeds' variance and the evaluation examples' (a bootstrap over them), "
                "paired by seed.")
    return (f"{missing} of {len(results)} runs were made before runs stored their predictions: their intervals "
            "hold the probe seeds' variance only, not the evaluation examples'.")


def stability_note(out_dir: str | Path) -> str:
    """One sentence on the run's λ rankings: each task's seed-to-seed Spearman's ρ from notebook 02's table and which
    fall below `STABLE_RHO` (their λ-dependent parts are not read), or that the table is missing."""
    path = Path(out_dir) / "tables" / f"{RANKING_STABILITY_TABLE}.csv"
    if not path.is_file():
        return ("The λ rankings' stability was not measured (no tables/ranking_stability.csv): the parts that rest on "
                "them are read as the rankings are.")
    table = pd.read_csv(path)
    many = table.model.nunique() > 1
    each = ", ".join(f"{_label(m, t, 2 if many else 1)} {rho:.2f}" for m, t, rho in
                     zip(table.model, table.task, table.spearman))
    below = [_label(m, t, 2 if many else 1) for m, t, rho in zip(table.model, table.task, table.spearman)
             if not rho >= STABLE_RHO]
    tail = (f"; below {STABLE_RHO}, not read where a part rests on them: {', '.join(below)}." if below
            else f", all at least {STABLE_RHO}.")
    return f"λ rankings of two seeds agree at Spearman's ρ {each}{tail}"


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
    tables = [pd.read_csv(Path(out_dir) / path) for path in learns_tables(out_dir)]
    return pd.concat(tables, ignore_index=True).set_index(["model", "task"]) if tables else None


def format_claims(readings: Sequence[ClaimReading], out_dir: str | Path, width: int = 116) -> str:
    """Per claim: where in the paper, the verdict and the claim; its rule; then our numbers and the file to look at
    (marked "not written" when the run did not write it). Lines are wrapped at `width`, never inside a path."""
    lines = []
    for r in readings:
        head = f"  {r.where:<8} {r.verdict:<14} "
        indent = " " * len(head)
        evidence = Path(out_dir) / r.evidence
        missing = "" if evidence.is_file() or r.verdict == NOT_READ else " (not written)"
        lines.append(textwrap.fill(r.text, width=width, initial_indent=head, subsequent_indent=indent))
        if r.verdict != NOT_READ:
            lines.append(textwrap.fill(f"rule: {r.rule}", width=width, initial_indent=indent,
                                       subsequent_indent=indent + "      "))
        lines.append(textwrap.fill(f"ours: {r.ours} -> {evidence}{missing}", width=width, initial_indent=indent,
                                   subsequent_indent=indent + "      ", break_long_words=False,
                                   break_on_hyphens=False))
    return "\n".join(lines)
