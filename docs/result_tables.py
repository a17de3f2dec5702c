"""The tables of docs/results.md that restate a run's own tables (Tables 1 and 2, which probes learn, MRPC's learning
curve), drawn from the tables the notebooks wrote under ``<out>/tables/`` beside the paper's numbers, so that the page
and the run have one owner (docs/gen_measurements.py writes them between their markers; a test fails when they
differ). The tables the claims read too (which probes learn) come from the run's one read, `RunTables`."""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.method.models import DEFAULT_MODEL
from papa.paper import paper_numbers
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.tables import LEARNS_TABLE, TASK_NAMES
from papa.tasks.registry import corpus_label

#: The page's order of the encoder's tasks.
PAGE_TASKS = ("cola", "sst2", "ner", "pos", "mrpc")
#: Each task's metric as the page's tables name it.
SHORT_METRICS = {"cola": "MCC", "sst2": "acc.", "ner": "F1", "pos": "F1", "mrpc": "F1"}
#: The encoder whose rows the page's tables show, as the learns table names it: the offline default.
PAGE_MODEL = DEFAULT_MODEL


def _minus(text: str) -> str:
    return text.replace("-", "−")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(cells: Sequence[str]) -> list[str]:
    return [_row(cells), "|" + "---|" * len(cells)]


def _learns(run: RunTables, model: str) -> pd.DataFrame:
    """Which probes of `model` learn, by task: the run's learns tables as `RunTables` read them."""
    if run.learns is None:
        raise FileNotFoundError(f"no table of which probes learn in {run.folder} (notebook 02 writes "
                                f"{RunFolder.table_file(LEARNS_TABLE)})")
    return run.learns.xs(model, level="model")


def _table(run: RunTables, name: str) -> Path:
    """The csv of table `name` in the folder `run` was read from."""
    if run.folder is None:
        raise ValueError(f"table {name} is read from a run folder; this run was built in memory")
    return run.folder.table(name)


def alternatives_table(folder: RunFolder | str | os.PathLike, profile: str, model: str = "all-MiniLM-L6-v2",
                       tasks: Sequence[str] = PAGE_TASKS) -> str:
    """Table 1 as the run wrote it (``table1_alternative_matrices.csv``: mean ± 95% interval over the seeds) beside
    RoBERTa-base's, the trained rows labelled with the profile's training size."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    trained = f"({prof.trainable_limit} ex., {prof.trainable_epochs} epoch{'s' if prof.trainable_epochs != 1 else ''})"
    labels = {"none": "original attention", "identity": "identity", "toeplitz": "Toeplitz", "zeros": "zeros",
              "trainable_toeplitz": f"trained, Toeplitz init. {trained}",
              "trainable_average": f"trained, average init. {trained}", "average": "**average (PAPA)**"}
    ours = pd.read_csv(RunFolder.at(folder).table("table1_alternative_matrices"))
    ours = ours[ours.model == model].set_index("constants")
    paper = paper_numbers.alternative_matrices("base")
    lines = _header(["constants", *[c for t in tasks for c in (f"{TASK_NAMES[t]} ours", "paper")]])
    for kind, label in labels.items():
        if kind in ours.index:
            lines.append(_row([label, *[c for t in tasks for c in (ours.loc[kind, t], f"{paper.loc[kind, t]:.2f}")]]))
    return "\n".join(lines)


def data_dependence_table(folder: RunFolder | str | os.PathLike, model: str = "all-MiniLM-L6-v2",
                          tasks: Sequence[str] = PAGE_TASKS, other: str = "WikiText") -> str:
    """Table 2 as the run wrote it (``table2_data_dependence.csv``): constants from the task's own training inputs
    and from the `other` corpus (the MLM task's text), beside RoBERTa-base's with MNLI's."""
    ours = pd.read_csv(RunFolder.at(folder).table("table2_data_dependence"))
    ours = ours[ours.model == model].set_index("constants_corpus")
    paper = paper_numbers.data_dependence("base")
    lines = _header(["constants from", *[TASK_NAMES[t] for t in tasks]])
    own, text = corpus_label("task"), corpus_label("mlm")  # the rows as the notebook names them
    lines.append(_row(["the task (ours)", *[ours.loc[own, t] for t in tasks]]))
    lines.append(_row([f"{other} (ours)", *[ours.loc[text, t] for t in tasks]]))
    lines.append(_row(["the task (paper, RoBERTa-base)", *[f"{paper.loc['task', t]:.2f}" for t in tasks]]))
    lines.append(_row(["MNLI (paper, RoBERTa-base)", *[f"{paper.loc['mnli', t]:.2f}" for t in tasks]]))
    return "\n".join(lines)


def learns_table(run: RunLike, tasks: Sequence[str] = PAGE_TASKS, model: str = PAGE_MODEL) -> str:
    """Which probes of `model` learn (``probes_vs_majority.csv``, notebook 02, as `RunTables` reads it): the
    original attention's mean ± 95% interval over the seeds, the majority class, the interval's lower end above it."""
    table = _learns(RunTables.of(run), model)
    lines = _header(["task (metric)", "original attention", "majority-class baseline", "lower end − baseline",
                     "learns"])
    for task in tasks:
        row = table.loc[task]
        learns = "yes" if bool(row["learns"]) else "**no**"
        lines.append(_row([f"{TASK_NAMES[task]} ({SHORT_METRICS[task]})", f"{row['mean']:.3f} ± {row['ci95']:.3f}",
                           f"{row['majority']:.3f}", _minus(f"{row['margin']:+.3f}"), learns]))
    return "\n".join(lines)


def learning_curve_table(run: RunLike, task: str = "mrpc", grid_examples: int = 500, whole: int = 3668,
                         model: str = PAGE_MODEL) -> str:
    """A task's learning curve (``learning_curves.csv``, notebook 02) with the grid's own size among its points
    (`model`'s mean ± interval from ``probes_vs_majority.csv``, as `RunTables` reads it); `whole`: the size of the
    whole training set."""
    run = RunTables.of(run)
    curve = pd.read_csv(_table(run, "learning_curves"))
    curve = curve[curve.task == task]
    grid = _learns(run, model).loc[task]
    points = {int(r.train_examples): (r.mean, r.ci95) for r in curve.itertuples()}
    points[grid_examples] = (grid["mean"], grid["ci95"])
    sizes = sorted(points)
    heads = [f"all {n:,}" if n == whole else f"{n:,}" for n in sizes]
    lines = _header([f"{TASK_NAMES[task]} training pairs", *heads])
    lines.append(_row(["F1", *[f"{points[n][0]:.3f} ± {points[n][1]:.3f}" for n in sizes]]))
    return "\n".join(lines)


def ranking_stability_table(run: RunLike, tasks: Sequence[str] = PAGE_TASKS, model: str = PAGE_MODEL) -> str:
    """The run's λ rankings of seeds 0 and 1 (``ranking_stability.csv``, notebook 02): steps, seed 0's λ range, ρ and
    the heads the two put alike at 1/2 and 1/8; a task whose probe (`model`'s, as `RunTables` reads which learn) does
    not learn says so."""
    from papa.paper.tables import RANKING_STABILITY_TABLE

    run = RunTables.of(run)
    table = pd.read_csv(_table(run, RANKING_STABILITY_TABLE)).set_index("task")
    learns = _learns(run, model)["learns"]
    lines = _header(["task", "λ steps", "λ range (seed 0)", "Spearman's ρ, seeds 0 and 1",
                     "heads replaced at 1/2 in common", "heads kept at 1/8 in common"])
    for task in tasks:
        row = table.loc[task]
        name = TASK_NAMES[task] + ("" if bool(learns.get(task, True)) else " (does not learn)")
        lines.append(_row([name, f"{int(row['steps'])}",
                           f"{row['lambda_min_seed0']:.4f}–{row['lambda_max_seed0']:.4f}",
                           _minus(f"{row['spearman']:.3f}"), f"{row['overlap_replaced_1/2']:.2f}",
                           f"{row['overlap_kept_1/8']:.2f}"]))
    return "\n".join(lines)
