"""The module of the alternative-matrices section's notebook (04, Table 1): every constants kind with all heads
replaced, and Table 1's claim on them."""
from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DATA_FREE_KINDS, NONE, TRAINABLE_KINDS
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims
from papa.paper.claims.reading import read_each
from papa.paper.claims.rules import (CLOSE_MARGIN, EVERY_HEAD, ClaimReading, claim_reading, compared_part, control,
                                     not_read_claim, tally_part, unread_part)
from papa.paper.claims.run_tables import RunTables
from papa.paper.claims.scores import ClaimRun, model_count, part_label
from papa.paper.grids import Grids, run
from papa.paper.paper_numbers import CLAIMS
from papa.paper.paper_numbers import alternative_matrices as paper_table
from papa.paper.tables import TABLE_TASKS, listed, pivot_cells, save_table, setup, short_model
from papa.runs.results import aggregate
from papa.runs.statistics import NOT_READ, VERDICTS, above, difference, within


def grids(models: Sequence[str], tasks: Sequence[str], kinds: Sequence[str]) -> dict[str, Grids]:
    """Every constants kind in `kinds` with all heads replaced, beside the original model."""
    return {"results": Grids.of(models, tasks, fractions=["1", "0"], constants=list(kinds))}


#: The column `alternatives_table` adds: why a row is no reproduction of the paper's ("" where it is one).
NOTE_COLUMN = "note"


def alternatives_table(results: pd.DataFrame, kinds: Sequence[str]) -> pd.DataFrame:
    """Table 1 for every model: rows (model, kind; ``none`` the original), columns tasks, cells mean ± 95%
    interval, and `NOTE_COLUMN` from `trained_size_notes`."""
    r = results
    rows = pd.concat([r[(r.constants == "none") & (r.fraction == 1.0)],
                      r[r.constants.isin(kinds) & (r.fraction == 0.0) & r.constants_corpus.isin(["task", "none"])]])
    table = pivot_cells(aggregate(rows), "constants", ["none", *[k for k in kinds if k != "none"]])
    if table.empty:
        return table
    notes = trained_size_notes(results)
    return table.assign(**{NOTE_COLUMN: [notes.get(key, "") for key in table.index]})


def _sizes(results: pd.DataFrame) -> pd.Series:
    """Each row's training size, (examples, epochs) as its ``extra`` recorded them (None where it did not)."""
    extra = results["extra"] if "extra" in results else pd.Series("", index=results.index)
    parsed = extra.map(lambda text: json.loads(text) if isinstance(text, str) and text else {})
    return pd.Series([(e.get("train_examples"), e.get("epochs")) for e in parsed], index=results.index, dtype=object)


def _size_text(sizes: Sequence[tuple[int, int]]) -> str:
    """``200 examples, 1 epoch``; a range where the tasks differ (``500–3000 examples, 4–15 epochs``)."""
    def span(values: list[int], unit: str) -> str:
        low, high = min(values), max(values)
        return f"{low}{'' if low == high else f'–{high}'} {unit}{'' if high == 1 else 's'}"
    return f"{span([s[0] for s in sizes], 'example')}, {span([s[1] for s in sizes], 'epoch')}"


def trained_size_notes(results: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(short model, trained kind) -> "not reproduced: ..." where a trained kind's probes trained on another size
    than the original attention's on the same task (a profile may give them fewer)."""
    sized = results.assign(size=_sizes(results))
    notes = {}
    for model, rows in sized.groupby("model"):
        reference = rows[(rows.constants == "none") & (rows.fraction == 1.0)].groupby("task")["size"].agg(set)
        for kind in TRAINABLE_KINDS:
            own = rows[(rows.constants == kind) & (rows.fraction == 0.0)].groupby("task")["size"].agg(set)
            apart = [t for t in own.index if t in reference.index and own[t] != reference[t]
                     and all(None not in s for s in (*own[t], *reference[t]))]
            if apart:
                trained = [s for t in apart for s in own[t]]
                others = [s for t in apart for s in reference[t]]
                notes[(short_model(model), kind)] = (f"not reproduced: {_size_text(trained)} (the other rows: "
                                                     f"{_size_text(others)})")
    return notes


def training_sizes(results: pd.DataFrame) -> pd.DataFrame:
    """What each constants kind's probes trained on, per task: "examples × epochs"."""
    sizes = results.assign(size=[f"{'?' if n is None else n} × {'?' if e is None else e}" for n, e in _sizes(results)])
    table = sizes.pivot_table(index="constants", columns="task", values="size", aggfunc="first")
    return table[[t for t in TABLE_TASKS if t in table.columns]].fillna("—")


def _train_examples(run: ClaimRun, model: str, task: str, kind: str, corpus: str) -> set:
    """The training-set sizes the rows of a setting recorded (None: not recorded)."""
    rows = run.rows(model, task, constants=kind, constants_corpus=corpus, selection=NONE, fraction_label="0")
    return {examples for examples, _ in _sizes(rows)}


def read_table1(run: ClaimRun) -> ClaimReading:
    """Table 1's claim on `run`."""
    where = ("table1", "Table 1", "04_alternative_matrices", RunFolder.table_file("table1_alternative_matrices"))
    pairs = run.models_tasks()
    k = model_count(pairs)
    beats, trained_toeplitz, trained_average = [], [], []
    for model, task in pairs:
        average = run.scores(model, task, "average", "task", NONE, "0")
        if average is None:
            continue
        label = part_label(model, task, k)
        for kind in DATA_FREE_KINDS:
            other = run.scores(model, task, kind, NONE, NONE, "0")
            if other is not None:
                d = difference(other, average)
                beats.append(compared_part(f"beats {kind} ({label})", above(d), d.text()))
        size = _train_examples(run, model, task, "average", "task")
        for kind, out in (("trainable_toeplitz", trained_toeplitz), ("trainable_average", trained_average)):
            other = run.scores(model, task, kind, "task", NONE, "0")
            if other is None:
                continue
            trained = _train_examples(run, model, task, kind, "task")
            if trained != size:
                out.append(unread_part(f"{kind} ({label})", f"trained on {_examples(trained)} examples, the others' "
                                                        f"probes on {_examples(size)}"))
                continue
            d = difference(other, average)
            if kind == "trainable_toeplitz":
                out.append(compared_part(f"beats {kind} ({label})", above(d), d.text()))
                continue
            gate = control(EVERY_HEAD, run.all_heads_drop(model, task), CLOSE_MARGIN, either_side=True)
            out.append(compared_part(f"close to {kind} ({label})", within(d, -CLOSE_MARGIN, CLOSE_MARGIN), d.text(),
                                     gate))
    if not beats:
        return not_read_claim(*where, "average and data-free constants were not all run with every head replaced")
    parts = [tally_part(f"beats every data-free matrix ({len(beats)} comparisons)", beats)]
    for name, found in (("beats trained Toeplitz-initialised", trained_toeplitz),
                        ("close to trained average-initialised", trained_average)):
        if not found:
            parts.append(unread_part(name, "not run"))
        elif all(p.verdict == NOT_READ for p in found):
            parts.append(unread_part(name, found[0].numbers))
        else:
            parts.append(tally_part(name, [p for p in found if p.verdict != NOT_READ]))
    return claim_reading(*where, parts)


def _examples(sizes: set) -> str:
    return "/".join(str(s) for s in sorted(sizes, key=str)) or "?"


def read(run: RunTables) -> list[ClaimReading]:
    """Table 1's claim read on a run's tables."""
    return read_each(run, {"table1": read_table1})


claims = SectionClaims("04_alternative_matrices", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["CLAIMS", "NOTE_COLUMN", "RunTables", "VERDICTS", "alternatives_table", "check_table", "claims", "grids",
           "listed", "paper_table", "read", "read_table1", "run", "save_table", "setup", "trained_size_notes",
           "training_sizes"]
