"""A run read again with one evaluation example left out: a perturbation under which no claim's verdict may move.

Results, learns tables and majority-class chance levels are scored again on the examples kept; what reads no
evaluation example (rankings, Fig. 4's tables, unigram levels) is copied as it is.
"""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd

from papa.core.artifacts import atomic_path
from papa.core.errors import CorruptArtifactError, InputError
from papa.core.run_folder import RunFolder
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.tables import CHANCE_TABLES, LEARNS_TABLES, probes_learn, save_table
from papa.probing.predictions import EvalPredictions, metric_on
from papa.runs.predictions_store import load_run_predictions, save_run_predictions, stores_predictions
from papa.runs.results import aggregate

__all__ = ["leave_one_out"]

MAJORITY = "majority class of the training subset"  # how the chance table names a majority-class row
CLOSEST = 1e-3  # how far a stored majority-class level may lie from its constant label's score on the predictions


def leave_one_out(run: RunLike, index: int, into: RunFolder) -> RunTables:
    """`run` read again with evaluation example `index` left out of every run, written into the empty folder `into`."""
    source = RunTables.of(run)
    if source.folder is None or not stores_predictions(source.folder):
        raise InputError("leaving an evaluation example out needs a run folder that stores its runs' predictions "
                         "(predictions/): this run has none, so its rows cannot be scored again")
    if not into.is_empty():
        raise InputError(f"{into} is not empty: leave_one_out writes a whole run folder; give it a new one")
    found = load_run_predictions(source.folder, list(source.results.run_id))
    kept: dict[str, EvalPredictions] = {}
    for run_id, predictions in found.items():
        n = predictions.num_examples
        if not -n <= index < n:
            raise InputError(f"example {index} is outside run {run_id}'s {n} evaluation examples")
        kept[run_id] = predictions.keeping(np.delete(np.arange(n), index % n))
    # what the claims read that no evaluation example enters
    for there, here in ((source.folder.rankings, into.rankings), (source.folder.tables, into.tables)):
        if there.is_dir():
            shutil.copytree(there, here)
    results = source.results.assign(value=[metric_on(kept[r], m) for r, m in zip(source.results.run_id,
                                                                                  source.results.metric)])
    for run_id, predictions in kept.items():
        meta = {k: v for k, v in predictions.metadata.items() if k not in ("run_id", "created", "made_by")}
        save_run_predictions(into, run_id, predictions, **meta)
    with atomic_path(into.results) as tmp:  # as `ResultsTable.append` writes it, every row at once
        results.to_csv(tmp, index=False)
    for name in LEARNS_TABLES:
        if into.table(name).is_file():
            save_table(_learns_again(pd.read_csv(source.folder.table(name)), source.results, results, found, kept),
                       into, name)
    for name in CHANCE_TABLES:
        if into.table(name).is_file():
            save_table(_chance_again(pd.read_csv(source.folder.table(name)), source.results, found, kept), into, name)
    return RunTables.read(into)


def _learns_again(table: pd.DataFrame, before: pd.DataFrame, after: pd.DataFrame,
                  full: dict[str, EvalPredictions], kept: dict[str, EvalPredictions]) -> pd.DataFrame:
    """A learns table read again on the rows `after`, each row's runs found in `before` by the mean it records."""
    curves, baselines = [], []
    for row in table.itertuples():
        group = _original_runs(before, row.model, row.task, row.mean, row.n)
        curves.append(aggregate(after[after.run_id.isin(group)]).assign(fraction=1.0))
        majority = _majority_again(row.majority, full[group[0]], kept[group[0]], row.task)
        baselines.append({"model": row.model, "task": row.task, "majority": majority})
    curves = pd.concat(curves, ignore_index=True)[["model", "task", "fraction", "mean", "ci95", "n"]]
    learns = probes_learn(curves, pd.DataFrame(baselines).drop(columns="model").drop_duplicates("task"))
    return learns.reset_index()[list(table.columns)]


def _original_runs(results: pd.DataFrame, model: str, task: str, mean: float, n: int) -> list[str]:
    """The run ids of the one original-attention setting of `model` on `task` whose `n` seeds average `mean`."""
    rows = results[(results.model == model) & (results.task == task) & (results.fraction == 1.0)]
    matches = []
    for _, group in rows.groupby(["profile", "layout", "dtype", "probe_inputs", "precision", "execution",
                                  "batch_order", "constants", "selection"]):
        seeds = group.drop_duplicates("seed", keep="last")
        if len(seeds) == n and np.isclose(seeds.value.mean(), mean, rtol=0, atol=1e-9):
            matches.append(list(seeds.run_id))
    if len(matches) != 1:
        raise CorruptArtifactError(f"{len(matches)} original-attention settings of {model} on {task} average the "
                                   f"learns table's mean {mean}: the table does not match results.csv")
    return matches[0]


def _majority_again(score: float, full: EvalPredictions, kept: EvalPredictions, task: str) -> float:
    """The majority class's `score` moved as leaving the example out moves the constant label that scores it (to
    within `CLOSEST`: a token task's predictions keep words up to the layout's length only)."""
    scored = _candidate_scores(full, score)
    distance = {label: abs(value - score) for label, value in scored.items()}
    best = min(distance.values())
    if best > CLOSEST:
        raise CorruptArtifactError(f"{task}: no constant label scores within {CLOSEST} of the stored majority-class "
                                   f"level {score} on the evaluation examples: the table is not this run's")
    moved = {round(_constant_score(kept, label) - scored[label], 12)
             for label, d in distance.items() if d <= best + 1e-12}
    if len(moved) != 1:
        raise CorruptArtifactError(f"{task}: the constant labels that score the stored majority-class level {score} "
                                   "move apart on the examples kept: which one is the majority is undecided")
    return score + moved.pop()


def _candidate_scores(predictions: EvalPredictions, score: float) -> dict[int, float]:
    """Each candidate majority label's constant score: the most frequent label alone where it lies within `CLOSEST`
    of `score` (a metric call can take seconds), else every label's."""
    frequent = int(np.argmax(np.bincount(predictions.reference)))
    first = _constant_score(predictions, frequent)
    if abs(first - score) <= CLOSEST:
        return {frequent: first}
    labels = sorted(set(range(len(predictions.label_names))) | set(np.unique(predictions.reference).tolist()))
    return {label: _constant_score(predictions, label) for label in labels}


def _constant_score(predictions: EvalPredictions, label: int) -> float:
    """`predictions`' metric when every example (or token) is predicted `label`."""
    arrays = {"predicted": np.full_like(predictions.reference, label), "reference": predictions.reference}
    if predictions.form == "sequences":
        arrays["offsets"] = predictions.offsets
    constant = EvalPredictions(predictions.kind, label_names=predictions.label_names, **arrays)
    return metric_on(constant, predictions.metadata["metric"])


def _chance_again(table: pd.DataFrame, before: pd.DataFrame, full: dict[str, EvalPredictions],
                  kept: dict[str, EvalPredictions]) -> pd.DataFrame:
    """A chance-level table with its majority-class levels scored on the examples kept."""
    table = table.copy()
    for i, row in table.iterrows():
        runs = list(before[(before.model == row.model) & (before.task == row.task)].run_id)
        for column in ("chance", "context_free", "same_tokens"):
            if row.get(f"{column}_how", row.get("how")) == MAJORITY and runs:
                table.loc[i, column] = _majority_again(row[column], full[runs[0]], kept[runs[0]], row.task)
    return table
