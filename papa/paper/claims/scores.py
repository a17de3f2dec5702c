"""A run's numbers as the claims read them (`ClaimRun`), the draws of a head order, and paired contrasts of them.

Where a head order was drawn more than once (``lambda@part1``, ``random@2``), a part averages over the draws and its
interval holds their spread; another profile's ranking (``lambda@full``) is read in parts of its own.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import pandas as pd

from papa.core.errors import CorruptArtifactError
from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.method.selection import parse_selection
from papa.paper.tables import DOWNSTREAM_TASKS, short_model
from papa.runs.compare import RunScores
from papa.runs.stability import AGREEMENT_COLUMNS, draw_name, draw_order, gate_reason
from papa.runs.statistics import Estimate, Scores, difference, estimate, over_orders


class ClaimRun(RunScores):
    """The rows of the encoders, or of the causal LMs, with the λ rankings' stability and the chance levels."""

    def __init__(self, results: pd.DataFrame, folder: RunFolder | None,
                 stability: pd.DataFrame | None, chance: pd.DataFrame | None = None, *, decoders: bool = False,
                 left_out: pd.DataFrame | None = None):
        super().__init__(results, folder)
        self.stability = agreement_pairs(stability)
        self.chance_levels = chance
        self.decoders = decoders
        self.left_out = left_out if left_out is not None else results.iloc[:0]

    def not_run(self, what: str, ran: Callable[[pd.DataFrame], pd.Series]) -> str:
        """Why nothing of `what` is read: not run, or run (rows `ran` selects) only on tasks whose probe does not
        beat its majority class."""
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
        """Why the λ rankings behind `selections` (learned by `profile`; None: the grid's) cannot be read, or None:
        every pair of their draws must be measured and pass `papa.runs.stability.gate_reason`; one draw cannot."""
        pairs = self._pairs(model, task, profile)
        drawn = {draw_name(s.seed, s.part) for s in map(parse_selection, selections)}
        names = sorted(drawn | set(pairs.a) | set(pairs.b), key=draw_order)
        whose = f"{task}'s λ ranking" + ("" if profile is None else f" of the {profile} profile")
        theirs = f"{task}'s " + ("" if profile is None else f"{profile}-profile ") + "λ rankings"
        if len(names) < 2:
            return f"{whose}: stability not measured (one draw: no second seed's or training part's ranking)"
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if not (((pairs.a == a) & (pairs.b == b)) | ((pairs.a == b) & (pairs.b == a))).any():
                    return f"{whose}: stability not measured (draws {a} and {b} not compared)"
        return gate_reason(pairs, theirs)

    def _pairs(self, model: str, task: str, profile: str | None) -> pd.DataFrame:
        """The agreement rows of (`model`, `task`)'s rankings learned by `profile` (None: the grid's)."""
        table = self.stability
        if table is None or table.empty:
            return pd.DataFrame(columns=list(AGREEMENT_COLUMNS))
        wanted = {profile} if profile is not None else set(self.rows(model, task).profile)
        named = table.profile.isin(wanted) | (table.profile.isna() & (profile is None))
        return table[(table.model == model) & (table.task == task) & named]

    def chance(self, model: str, task: str) -> float | None:
        """`task`'s chance level on `model` where the run wrote it: ``context_free`` where finite, else ``chance``."""
        level = _cell(self.chance_levels, model, task, "context_free" if self._context_free(model, task) else "chance")
        return None if level is None else float(level)

    def chance_source(self, model: str, task: str) -> tuple[str, str]:
        """What `chance` of (`model`, `task`) is and how the run made it ("" where it did not say)."""
        strongest = self._context_free(model, task)
        how = _cell(self.chance_levels, model, task, "context_free_how" if strongest else "how")
        kind = "the strongest predictor that needs no model" if strongest else "chance"
        return kind, "" if how is None else str(how)

    def _context_free(self, model: str, task: str) -> bool:
        """Whether the run wrote a finite context-free level of (`model`, `task`), the stronger baseline."""
        strongest = _cell(self.chance_levels, model, task, "context_free")
        return strongest is not None and math.isfinite(strongest)

    def beats_chance(self, model: str, task: str, original: Scores) -> str | None:
        """Why a probe over the vocabulary is not read (None: it is): the lower end of its original score's 95%
        interval must lie above `chance`, as a classifier's must above its majority class."""
        level = self.chance(model, task)
        if level is None:
            return None
        low = estimate(lambda o: o, original).interval()[0]
        if math.isfinite(low) and low > level:
            return None
        how = str(_cell(self.chance_levels, model, task, "context_free_how") or "the strongest context-free predictor")
        own = _cell(self.chance_levels, model, task, "same_tokens")
        beside = (f"; the unigram of its own training tokens scores {own:.2f} nats"
                  if own is not None and math.isfinite(own) and own != level else "")
        return (f"the probe ({estimate(lambda o: o, original).text(2)} nats) does not beat the strongest predictor "
                f"that needs no model ({level:.2f} nats, {how}) by its interval{beside}: what it scores is mostly "
                "token frequency")

    def all_heads_drop(self, model: str, task: str) -> Estimate | None:
        """original − every head replaced by average constants, paired by seed (None: not run); the usual control."""
        original, constant = self.scores(model, task), self.scores(model, task, "average", "task", NONE, "0")
        return None if original is None or constant is None else difference(constant, original)

    def ranking_profiles(self, model: str, task: str) -> list[str]:
        """The other profiles whose λ rankings ran on (`model`, `task`) (selections such as ``lambda@full``)."""
        names = set(self.rows(model, task).selection) - {NONE}
        return sorted({p for p in (parse_selection(n).profile for n in names) if p is not None})

    def draws(self, model: str, task: str, method: str, label: str, *, profile: str | None = None
              ) -> dict[str, Scores]:
        """The `Scores` of every draw of `method`'s order at (`model`, `task`, `label`) with average constants, by
        selection name; with `profile`, the draws of that profile's ranking instead."""
        rows = self.rows(model, task, constants="average", constants_corpus="task", fraction_label=label)
        drawn = {n: parse_selection(n) for n in set(rows.selection) - {NONE}}
        names = sorted(n for n, s in drawn.items() if (s.method, s.profile) == (method, profile))
        found = {n: self.scores(model, task, "average", "task", n, label) for n in names}
        return {n: f for n, f in found.items() if f is not None}


def agreement_pairs(table: pd.DataFrame | None) -> pd.DataFrame | None:
    """A λ rankings' agreement table as one row per pair of draws (a seed-to-seed table reads as seed0, seed1);
    raises `CorruptArtifactError` without ``heads``, which the gate needs."""
    if table is None:
        return None
    table = table.reset_index()
    missing = [c for c in ("model", "task", "spearman", "heads") if c not in table]
    if missing:
        raise CorruptArtifactError(f"a table of the λ rankings' agreement lacks the column(s) {', '.join(missing)} "
                                   f"(it has {', '.join(map(str, table.columns))}): the gate reads ρ's interval over "
                                   "the heads; rerun the notebook that wrote it (02 or 08) or `papa report` on the "
                                   "run folder")
    for column, draw in (("a", draw_name(0)), ("b", draw_name(1))):  # the rows of a table of two seeds
        table[column] = table[column].fillna(draw) if column in table else draw
    if "profile" not in table:
        table = table.assign(profile=None)
    return table[["model", "task", "profile", "a", "b", "spearman", "heads"]]


def order_contrast(plus: Sequence[Scores], minus: Sequence[Scores]) -> Estimate:
    """Mean over `plus`'s draws minus mean over `minus`'s, paired over seeds and examples, plus the orders' spread."""
    k = len(plus)
    joint = estimate(lambda *means: sum(means[:k]) / k - sum(means[k:]) / len(minus), *plus, *minus)
    return over_orders(joint, [s.values.mean() for s in plus], [s.values.mean() for s in minus])


#: The head orders that are drawn; the layer orders are fixed.
DRAWN_ORDERS = ("lambda", "reversed_lambda", "random")


def drawn_numbers(e: Estimate, arms: Sequence[tuple[str, Sequence[Scores]]]) -> str:
    """The estimate's text and its draws ("over 4 λ rankings, 5 random orders"; "(1 order)" where each was one)."""
    counts = [(what, len(draws)) for what, draws in arms]
    if not counts:
        return e.text()
    if all(n == 1 for _, n in counts):
        return e.text() + " (1 order)"
    return e.text() + " over " + ", ".join(f"{n} {what if n > 1 else _singular(what)}" for what, n in counts)


def _singular(what: str) -> str:
    """"λ rankings" -> "λ ranking", "random orders" -> "random order"."""
    return " ".join(w[:-1] if w in ("rankings", "orders") else w for w in what.split(" "))


def _cell(table: pd.DataFrame | None, model: str, task: str, column: str):
    """`column` of the (model, task) row of a run's table (None: no table, column, row or value)."""
    if table is None or column not in table:
        return None
    table = table.reset_index()
    row = table[(table.model == model) & (table.task == task)]
    return None if row.empty or pd.isna(row[column].iloc[0]) else row[column].iloc[0]


def part_label(model: str, task: str, models: int) -> str:
    """How a part names its (model, task): the task alone where the run read one model (`models` < 2)."""
    return task if models < 2 else f"{task}, {short_model(model)}"


def model_count(models_tasks: Iterable[tuple[str, str]]) -> int:
    """How many models the (model, task) pairs `models_tasks` hold."""
    return len({m for m, _ in models_tasks})
