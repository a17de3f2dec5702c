"""Marks on the table rows and figure lines the claims do not read: a probe below its majority class, or an
unstable λ ranking, each with its reason."""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import pandas as pd

from papa.core.vocabulary import RANKED
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.tables import short_model

#: The column `ReadMarks.table` adds: "read", or "not read: <why>".
CLAIMS_COLUMN = "claims"


@dataclass(frozen=True)
class ReadMarks:
    """A run's unread parts: its own rankings' `profile`, `learns` (does each probe beat its majority class) and
    `unread` (profile -> task -> why its λ ranking is not read)."""

    profile: str
    learns: pd.DataFrame | None = None
    unread: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def of_run(cls, run: RunLike, models: Collection[str], profile: str,
               learns: pd.DataFrame | None = None) -> ReadMarks:
        """The marks of `run` for `models`: `learns` as given or as the run saved it, and the unread rankings of
        every profile whose rankings the run compared."""
        from papa.paper.claims import unread_rankings
        from papa.runs.profiles import get_profile

        tables = RunTables.of(run)
        own = get_profile(profile).name
        agreement = tables.agreement
        profiles = {own} | (set(agreement.profile) if agreement is not None and not agreement.empty else set())
        unread = {p: unread_rankings(tables, models, p) for p in sorted(profiles)}
        return cls(own, tables.learns if learns is None else learns, unread)

    def why(self, model: str, task: str, selection: str = "lambda") -> str:
        """Why the claims do not read `task` on `model` under head order `selection` ("" where they read it)."""
        reasons = []
        majority = self._below_majority(model, task)
        if majority is not None:
            reasons.append(f"probe ≤ majority class ({majority:.3f})")
        method, _, other = str(selection).partition("@")
        note = self.unread.get(other or self.profile, {}).get(task)
        if method in RANKED and note:  # an order that rests on a λ ranking
            whose = f"the {other} profile's λ ranking" if other else "λ ranking"
            reasons.append(f"{whose} unstable ({note.partition(': ')[2] or note})")
        return "; ".join(reasons)

    def _below_majority(self, model: str, task: str) -> float | None:
        if self.learns is None or self.learns.empty:
            return None
        table = self.learns.reset_index()
        rows = table[(table["task"] == task) & (table["model"].map(short_model) == short_model(model))]
        if rows.empty or rows["learns"].astype(bool).all():
            return None
        return float(rows["majority"].iloc[0])

    def table(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` (by ``model``, ``task`` and ``selection``) with `CLAIMS_COLUMN` last: "read" or "not read: why"."""
        keys = frame.index.to_frame(index=False) if "task" in (frame.index.names or ()) else frame
        marks = [self.why(m, t, s) for m, t, s in zip(keys["model"], keys["task"], keys["selection"])]
        return frame.assign(**{CLAIMS_COLUMN: [f"not read: {w}" if w else "read" for w in marks]})

    def lines(self, curves: pd.DataFrame, by: str = "selection") -> dict[tuple[str, str], str]:
        """(task, order) -> why, for the lines of a curve frame drawn `by` head order that the claims do not read."""
        keys = curves[["model", "task", by]].drop_duplicates().itertuples(index=False, name=None)
        return {(task, key): why for model, task, key in keys if (why := self.why(model, task, key))}
