"""A run's tables as the claims, their notes and the docs' pages read them, read once: `RunTables`."""
from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar, Union

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.paper.claims.decoders import in_layout, with_probe_inputs
from papa.paper.claims.scores import agreement_pairs
from papa.paper.tables import CHANCE_TABLES, LEARNS_TABLES, RANKING_STABILITY_TABLES

__all__ = ["RunTables", "RunLike", "read_tables", "learns_tables"]

T = TypeVar("T")


@dataclass(frozen=True, eq=False)  # one run read once: compared (and hashed) as that one read
class RunTables:
    """What the claims read of one run: `results`, Fig. 4's `patterns` and `intervals` by task, `learns`,
    `agreement` (every pair of draws of a λ ranking), `chance`, and `folder` (None: built in memory)."""

    results: pd.DataFrame
    folder: RunFolder | None = None
    patterns: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    intervals: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    learns: pd.DataFrame | None = None
    agreement: pd.DataFrame | None = None
    chance: pd.DataFrame | None = None
    # what `remembered` computed: a run's claims are computed once per read
    computed: dict = field(default_factory=dict, repr=False)

    @classmethod
    def read(cls, where: RunFolder | str | os.PathLike) -> RunTables:
        """The tables of the run folder `where`, read in one pass."""
        from papa.runs.results import ResultsTable

        out = RunFolder.at(where)
        learns = read_tables(out, LEARNS_TABLES)
        return cls(results=ResultsTable(out.results).read(), folder=out,
                   patterns=_tables_by_task(out, "fig4_patterns_"),
                   intervals=_tables_by_task(out, "fig4_pattern_intervals_"),
                   learns=None if learns is None else learns.set_index(["model", "task"]),
                   agreement=_agreement(out), chance=read_tables(out, CHANCE_TABLES))

    @classmethod
    def of(cls, run: RunLike) -> RunTables:
        """`run` as it is when already read, else `RunTables.read(run)`."""
        return run if isinstance(run, RunTables) else cls.read(run)

    def rows(self, profile: str | None = None, layout: str | None = None, dtype: str | None = None,
             probe_inputs: str | None = None) -> pd.DataFrame:
        """The results of `profile`, `layout` and `dtype` where given, whose probe read `probe_inputs` (None: each
        model's default)."""
        results = self.results
        for column, wanted in (("profile", profile), ("dtype", dtype)):
            if wanted is not None:
                results = results[results[column] == wanted]
        if layout is not None:
            results = results[in_layout(results, layout)]
        return results[with_probe_inputs(results, probe_inputs)]

    def keeping(self, results: pd.DataFrame) -> RunTables:
        """The same run with only `results` (rows of its own, e.g. `rows`'s) to read."""
        return replace(self, results=results, computed={})

    def remembered(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, computed once per `key` on this read of the run."""
        if key not in self.computed:
            self.computed[key] = compute()
        return self.computed[key]

    def of_profile(self, profile: str | os.PathLike) -> pd.DataFrame:
        """The rows a run of `profile` (a name or a profile file) made."""
        from papa.runs.profiles import get_profile

        return self.results[self.results.profile == get_profile(profile).name]


#: A run as the claims' readers take it: already read, or its folder.
RunLike = Union[RunTables, RunFolder, str, os.PathLike]


def read_tables(where: RunFolder | str | os.PathLike, names: Sequence[str]) -> pd.DataFrame | None:
    """The tables `names` under ``<where>/tables/`` that the run wrote, together (None: none)."""
    tables = [pd.read_csv(path) for name in names if (path := RunFolder.at(where).table(name)).is_file()]
    return pd.concat(tables, ignore_index=True) if tables else None


def learns_tables(where: RunFolder | str | os.PathLike) -> list[str]:
    """The `probes_learn` tables the run in `where` wrote, relative to it."""
    out = RunFolder.at(where)
    return [RunFolder.table_file(name) for name in LEARNS_TABLES if out.table(name).is_file()]


def _tables_by_task(out: RunFolder, prefix: str) -> dict[str, pd.DataFrame]:
    return {path.stem.removeprefix(prefix): pd.read_csv(path, index_col=0)
            for path in sorted(out.tables.glob(f"{prefix}*.csv"))}


def _agreement(out: RunFolder) -> pd.DataFrame | None:
    """Every pair of draws of the run's λ rankings: those under ``rankings/`` and the notebooks' seed-to-seed tables
    (None: neither)."""
    from papa.runs.stability import draw_agreement

    tables = [t for t in (draw_agreement(out.rankings) if out.rankings.is_dir() else None,
                          agreement_pairs(read_tables(out, RANKING_STABILITY_TABLES))) if t is not None and not t.empty]
    if not tables:
        return None
    # a pair both sources hold counts once, at the lower ρ
    both = pd.concat([t[["model", "task", "profile", "a", "b", "spearman", "heads"]] for t in tables],
                     ignore_index=True)
    return both.groupby(["model", "task", "profile", "a", "b"], dropna=False, sort=False).agg(
        spearman=("spearman", "min"), heads=("heads", "max")).reset_index()
