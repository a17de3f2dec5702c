"""The module of the data-dependence section's notebook (05, Table 2): constants of the task's own data against
another corpus's, and the claim that they do alike."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims
from papa.paper.claims.reading import read_each
from papa.paper.claims.rules import (ALIKE_MARGIN, EVERY_HEAD, ClaimReading, claim_reading, compared_part, control,
                                     not_read_claim)
from papa.paper.claims.run_tables import RunTables
from papa.paper.claims.scores import ClaimRun, model_count, part_label
from papa.paper.grids import Grids, available_corpus, run
from papa.paper.paper_numbers import CLAIMS
from papa.paper.paper_numbers import data_dependence as paper_table
from papa.paper.tables import listed, pivot_cells, save_table, setup
from papa.runs.results import aggregate
from papa.runs.statistics import difference, within
from papa.tasks.registry import corpus_label


def grids(models: Sequence[str], tasks: Sequence[str], other_corpus: str | None = None,
          data_dir: str | None = None) -> dict[str, Grids]:
    """Every head replaced by average constants of the task's own data ("own") and of `other_corpus` ("other";
    None: MNLI where its data is, else WikiText)."""
    corpus = other_corpus or available_corpus(data_dir=data_dir)
    return {"own": Grids.of(models, tasks, fractions=["0"]),
            "other": Grids.of(models, tasks, fractions=["0"], constants_corpus=corpus)}


def data_dependence_table(results: pd.DataFrame, other_corpus: str) -> pd.DataFrame:
    """Table 2 for every model: average constants of the task's own data vs `other_corpus`'s, at fraction 0."""
    r = results
    rows = r[(r.constants == "average") & (r.fraction == 0.0) & r.constants_corpus.isin(["task", other_corpus])]
    table = pivot_cells(aggregate(rows), "constants_corpus", ["task", other_corpus])
    return table.rename(index=corpus_label, level="constants_corpus") if len(table) else table


def read_table2(run: ClaimRun) -> ClaimReading:
    """Table 2's claim on `run`."""
    where = ("table2", "Table 2", "05_data_dependence", RunFolder.table_file("table2_data_dependence"))
    rows = run.results[(run.results.constants == "average") & (run.results.fraction_label == "0")]
    others = sorted(set(rows.constants_corpus) - {"task", NONE})
    if not others:
        return not_read_claim(*where, "constants from another corpus were not run beside the task's own")
    other = others[0]
    corpus = corpus_label(other)  # the page names the text, not the task
    pairs = run.models_tasks()
    k = model_count(pairs)
    parts = []
    for model, task in pairs:
        own = run.scores(model, task, "average", "task", NONE, "0")
        theirs = run.scores(model, task, "average", other, NONE, "0")
        if own is not None and theirs is not None:
            d = difference(own, theirs)
            # Which constants replace the heads cannot matter by more than replacing them costs at all.
            gate = control(EVERY_HEAD, run.all_heads_drop(model, task), ALIKE_MARGIN, either_side=True)
            parts.append(compared_part(f"{corpus}'s constants alike ({part_label(model, task, k)})",
                                       within(d, -ALIKE_MARGIN, ALIKE_MARGIN), d.text(), gate))
    if not parts:
        return not_read_claim(*where, f"no task was run with both its own and {corpus}'s constants")
    return claim_reading(*where, parts)


def read(run: RunTables) -> list[ClaimReading]:
    """Table 2's claim read on a run's tables."""
    return read_each(run, {"table2": read_table2})


claims = SectionClaims("05_data_dependence", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["CLAIMS", "check_table", "claims", "corpus_label", "data_dependence_table", "grids", "listed",
           "paper_table", "read", "read_table2", "run", "save_table", "setup"]
