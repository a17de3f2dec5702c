"""The paper's sections as tables: what each notebook computes from its runs, kept out of the notebooks.

What each section runs is declared in `papa.paper.grids` (and run there); the functions here select a section's
rows from the shared results table and aggregate them over seeds (mean, 95% interval).

Conventions of the results table (see `papa.runs.experiment`): fraction 1 is recorded with constants and selection
``none`` (nothing replaced), fraction 0 with selection ``none`` (every head replaced, no selection involved).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from papa.core.artifacts import write_table
from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.core.vocabulary import PAPER_BASE, PAPER_FRACTIONS, PAPER_LARGE, PAPER_TASKS, TRAINABLE_KINDS
from papa.paper.grids import Grids
from papa.runs.results import GROUP_KEYS, aggregate, relative_drop
from papa.tasks.registry import TASKS

# Tasks whose metric lies in [0, 1] (Fig. 3 averages them); MLM's negative log perplexity is shown on its own.
DOWNSTREAM_TASKS = PAPER_TASKS
#: The pretraining-like objectives, whose targets are the vocabulary (MLM, a decoder's LM and LM probe), in registry
#: order: scored by -log perplexity, never averaged with the downstream tasks.
OBJECTIVE_TASKS = tuple(name for name, spec in TASKS.items() if spec.vocabulary_targets)
#: The task columns of the tables, in order: the downstream tasks, then the objectives.
TABLE_TASKS = (*DOWNSTREAM_TASKS, *OBJECTIVE_TASKS)
_ORDER = {label: i for i, label in enumerate(PAPER_FRACTIONS)}
#: How figures and pages name the tasks, the head orders and the metrics.
TASK_NAMES = {"sst2": "SST-2", "cola": "CoLA", "pos": "POS", "ner": "NER", "mrpc": "MRPC", "mnli": "MNLI",
              "mlm": "MLM", "lm": "LM", "lm_probe": "LM probe"}
SELECTION_NAMES = {"lambda": "λ", "random": "random", "first_to_last": "first → last",
                   "last_to_first": "last → first", "reversed_lambda": "reversed λ"}
METRIC_NAMES = {"accuracy": "accuracy", "f1": "F1", "matthews_correlation": "MCC", "seqeval_f1": "F1 (seqeval)",
                "neg_log_perplexity": "−log perplexity"}
#: Names of the `probes_learn` tables under ``<out>/tables/``: notebook 02 writes the first (encoders), notebook 08
#: the second (decoders); the claims read both.
LEARNS_TABLE = "probes_vs_majority"
DECODER_LEARNS_TABLE = "decoder_probes_vs_majority"
LEARNS_TABLES = (LEARNS_TABLE, DECODER_LEARNS_TABLE)
#: The tables of the λ rankings' seed-to-seed agreement under ``<out>/tables/`` (`ranking_stability`): notebook 02
#: writes the first (encoders), notebook 08 the second (decoders); the claims read a task's λ-dependent parts only
#: where its rankings agree.
RANKING_STABILITY_TABLE = "ranking_stability"
DECODER_RANKING_STABILITY_TABLE = "decoder_ranking_stability"
RANKING_STABILITY_TABLES = (RANKING_STABILITY_TABLE, DECODER_RANKING_STABILITY_TABLE)
#: The table of each task's chance level on a model (`chance_levels`; notebook 08 writes it for its decoder): the
#: claims put a drop on a scale from chance with it.
DECODER_CHANCE_TABLE = "decoder_chance_levels"
CHANCE_TABLES = (DECODER_CHANCE_TABLE,)
#: The seeds whose λ rankings `ranking_stability` compares: the grids' own (0) and one more.
STABILITY_SEEDS = (0, 1)


def setup(profile: str, folder: RunFolder | str | os.PathLike, *, data_dir: str | None = None, device: str = "cpu",
          force: bool = False) -> RunSettings:
    """A section notebook's first step, from its parameters: the run's settings as one object (`RunSettings`), the
    tables' display width, and the lines saying which run made the outputs below (`outputs_note`, printed)."""
    pd.set_option("display.width", 160)
    settings = RunSettings(profile, folder, data_dir, device, force)
    print(outputs_note(profile, settings.folder))
    return settings


def outputs_note(profile: str, folder: RunFolder | str | os.PathLike) -> str:
    """The lines a notebook prints first: which profile made the outputs below, into which folder, and how to run it
    again (cached, from scratch, or the quick smoke run)."""
    from papa.runs.profiles import builtin_base, get_profile

    prof = get_profile(profile)
    if builtin_base(prof) == "quick":
        made = (f"Outputs below: profile {prof.name}, a smoke run on small subsets whose numbers show that everything "
                "runs, not the paper's results. The notebooks in git show the CPU-scale run (profile cpu, "
                "artifacts/cpu), and the Results page (docs/results.md) reads its claims.")
    else:
        sizes = prof.sizes_text()
        made = f"Outputs below: profile {prof.name}, {sizes[:1].lower() + sizes[1:]}, run into {folder}."
    return (f"{made}\nTo run again: Run All reads the probe runs, rankings and constants cached in {folder} and "
            f"computes only what is missing; `papa reproduce --profile {prof.name} --out <new folder>` runs it all "
            "from scratch; `make reproduce` is the quick smoke run (into artifacts/quick).")


def listed(name: str, value: object) -> list[str]:
    """A notebook parameter that takes names (models, tasks) as papermill may pass it: a list as it is; a string
    (``papermill -p tasks ...``) holding a list literal (``'["sst2", "cola"]'``) or names separated by commas
    (``sst2,cola``) parsed into one. Anything else is refused in one line that says how to pass it."""
    import ast

    if isinstance(value, str):
        text = value.strip()
        try:
            value = ast.literal_eval(text) if text.startswith(("[", "(")) else [v.strip() for v in text.split(",")]
        except (ValueError, SyntaxError):
            value = None
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise ValueError(f"parameter {name} takes a list of names, e.g. papermill -p {name} sst2,cola (or "
                     f"-y '{{{name}: [sst2, cola]}}'); got {value!r}")


def save_table(table: pd.DataFrame, folder: RunFolder | str | os.PathLike, name: str) -> Path:
    """Write `table` as table `name` of the run folder `folder` (``<folder>/tables/<name>.csv``,
    `papa.core.artifacts.write_table`: atomically, floats to 10 significant digits, so that a rerun on another CPU, or
    whose sums land in another order, writes the same bytes); returns the path."""
    return write_table(table, RunFolder.at(folder).table(name))


def short_model(name: str) -> str:
    """The last part of a hub id or path (``sentence-transformers/all-MiniLM-L6-v2`` -> ``all-MiniLM-L6-v2``)."""
    return str(name).rstrip("/").split("/")[-1]


def _sorted(agg: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("model", "task", "constants", "constants_corpus", "selection") if c in agg.columns]
    agg = agg.assign(_order=agg["fraction_label"].map(_ORDER).fillna(99))
    return agg.sort_values([*keys, "_order"], kind="stable").drop(columns="_order").reset_index(drop=True)


def main_curves(results: pd.DataFrame, *, selection: str = "lambda", constants: str = "average",
                constants_corpus: str = "task") -> pd.DataFrame:
    """Fig. 2 / 6: per model and task, mean and 95% interval at every fraction, for one constants kind and method.

    Fractions 1 and 0 come from the shared rows (constants/selection ``none``); the result has
    constants = `constants` and selection = `selection` on every row.
    """
    r = results
    base = r[(r.constants == "none") & (r.selection == "none")]
    zero = r[(r.constants == constants) & (r.constants_corpus == constants_corpus) & (r.selection == "none")]
    mid = r[(r.constants == constants) & (r.constants_corpus == constants_corpus) & (r.selection == selection)]
    rows = pd.concat([base, zero, mid], ignore_index=True)
    if rows.empty:
        return aggregate(rows)
    rows = rows.assign(constants=constants, constants_corpus=constants_corpus, selection=selection)
    return _sorted(aggregate(rows))


def selection_curves(results: pd.DataFrame, methods: Sequence[str], *, constants: str = "average") -> pd.DataFrame:
    """Fig. 5: `main_curves` for each selection method, stacked (the end points 1 and 0 are shared by all)."""
    frames = [main_curves(results, selection=m, constants=constants) for m in methods]
    return pd.concat(frames, ignore_index=True)


def pooled_orders(results: pd.DataFrame) -> pd.DataFrame:
    """`results` with every draw of a head order under its order's name, as the claims pool them: ``lambda@part1``,
    ``lambda@seed1`` -> ``lambda``, ``random@3`` -> ``random``, another profile's draws (``lambda@full-part1``) ->
    ``lambda@full``; the draw's own name kept in ``draw``."""
    from papa.method.selection import parse_selection

    names = {n: parse_selection(n) for n in results.selection.unique() if n != "none"}
    order = {n: s.method if s.profile is None else f"{s.method}@{s.profile}" for n, s in names.items()}
    return results.assign(draw=results.selection, selection=results.selection.map(lambda n: order.get(n, n)))


def curves_over_orders(results: pd.DataFrame, methods: Sequence[str], *, constants: str = "average"
                       ) -> pd.DataFrame:
    """`selection_curves` over every draw of each order (`pooled_orders`), with ``orders``, how many draws a point
    pools (1 at fractions 1 and 0). Where an order was drawn more than once, a point is the mean of its draws' means
    over seeds (n = orders) and its interval the one the claims give such a mean (`orders_interval`): the seeds'
    variance and the order's own spread over its draws; elsewhere the mean and interval over seeds."""
    pooled = pooled_orders(results)
    if pooled.empty:
        return selection_curves(pooled, methods, constants=constants).assign(orders=pd.Series(dtype="int64"))
    keys = [*GROUP_KEYS, "fraction_label"]
    orders = pooled.groupby(keys, dropna=False).draw.transform("nunique")
    draw_means = (pooled[orders > 1].groupby([*keys, "draw"], dropna=False).value.mean().reset_index())
    curves = selection_curves(pd.concat([pooled[orders == 1], draw_means], ignore_index=True), methods,
                              constants=constants)
    counts = pooled.assign(orders=orders).groupby(["model", "task", "selection", "fraction_label"]).orders.max()
    curves = curves.merge(counts.reset_index(), on=["model", "task", "selection", "fraction_label"], how="left")
    ends = curves.fraction_label.isin(["1", "0"])
    curves = curves.assign(orders=curves.orders.where(~ends, 1).fillna(1).astype("int64"))
    point = list(GROUP_KEYS)  # a curve's point: the keys its rows share, the draw and the seed aside
    half = {key: orders_interval(group) for key, group in pooled[orders > 1].fillna({k: "" for k in point})
            .groupby(point, sort=False)}
    keys = curves[point].fillna({k: "" for k in point}).itertuples(index=False, name=None)
    ci95 = pd.Series([half.get(k, c) for k, c in zip(keys, curves.ci95)], index=curves.index, dtype="float64")
    return curves.assign(ci95=ci95, low=curves["mean"] - ci95, high=curves["mean"] + ci95)


def orders_interval(draws: pd.DataFrame) -> float:
    """The half-width of the 95% interval the claims give the mean over an order's draws (`papa.runs.statistics`:
    `estimate` of the draws' mean paired over the seeds they share, with `over_orders` adding the spread of the
    draws' means), from result rows of one point with ``draw``, ``seed`` and ``value``; NaN without an interval
    (one seed). Draws that share no seed give the spread of their means alone."""
    from papa.runs.statistics import LEVEL, estimate, over_orders, scores

    by_draw = [scores(dict(zip(g.seed, g.value))) for _, g in draws.groupby("draw", sort=True)]
    means = [float(s.values.mean()) for s in by_draw]
    if not set.intersection(*(set(s.seeds) for s in by_draw)):
        agg = aggregate(pd.DataFrame({"model": "m", "value": means}), by=["model"])
        return float(agg["ci95"].iloc[0])
    low, high = over_orders(estimate(lambda *xs: sum(xs) / len(xs), *by_draw), means).interval(LEVEL)
    return (high - low) / 2


def orders_run(results: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """`methods` and, after them, each one's rankings learned by another profile that `results` ran
    (``lambda@full``): the orders `curves_over_orders` draws for a section."""
    pooled = set(pooled_orders(results).selection)
    return [*methods, *sorted(s for s in pooled if s.partition("@")[0] in methods and "@" in s)]


def performance_vs_drop(curves: pd.DataFrame, tasks: Sequence[str] = DOWNSTREAM_TASKS,
                        learns: pd.DataFrame | None = None) -> pd.DataFrame:
    """Fig. 3: per model, the original performance averaged over tasks and the mean relative drop at fraction 0.

    Only tasks present for the model at both fractions count; ``tasks`` lists how many were averaged. With `learns`
    (`probes_learn`), tasks whose probe does not beat its majority baseline are left out, as the claims leave them.
    """
    agg, _ = split_learning(curves[curves.task.isin(tasks)], learns)
    drops = relative_drop(agg, 1, 0, match=("model", "task", "profile", "metric")).dropna(subset=["relative_drop"])
    if drops.empty:
        return pd.DataFrame(columns=["model", "original", "relative_drop", "max_relative_drop", "tasks"])
    out = drops.groupby("model").agg(original=("baseline", "mean"), relative_drop=("relative_drop", "mean"),
                                     max_relative_drop=("relative_drop", "max"), tasks=("task", "count"))
    return out.reset_index()


def format_cell(mean: float, ci95: float, digits: int = 3, orders: int = 1) -> str:
    """``0.812 ± 0.010``, or ``0.781 ± 0.009 (4 orders)`` where the point pools `orders` draws of a head order
    (`curves_over_orders`); the interval is left out when there is only one seed."""
    if pd.isna(mean):
        return "—"
    pooled = f" ({int(orders)} orders)" if pd.notna(orders) and orders > 1 else ""
    return (f"{mean:.{digits}f}" if pd.isna(ci95) else f"{mean:.{digits}f} ± {ci95:.{digits}f}") + pooled


def curve_cells(curves: pd.DataFrame) -> pd.DataFrame:
    """A curve frame as it is printed wherever it appears (notebook, docs page): one row per (model, task,
    selection), one column per fraction, each cell `format_cell` of its mean, interval and the draws it pools."""
    if curves.empty:
        return pd.DataFrame()
    orders = curves["orders"] if "orders" in curves else pd.Series(1, index=curves.index)
    cells = curves.assign(model=curves.model.map(short_model),
                          cell=[format_cell(m, c, orders=k) for m, c, k in zip(curves["mean"], curves["ci95"], orders)])
    wide = cells.pivot_table(index=["model", "task", "selection"], columns="fraction_label", values="cell",
                             aggfunc="first", sort=False)
    return wide[[c for c in _ORDER if c in wide.columns]].fillna("—")


#: The column `alternatives_table` adds: why a row is no reproduction of the paper's ("" where it is one).
NOTE_COLUMN = "note"


def alternatives_table(results: pd.DataFrame, kinds: Sequence[str]) -> pd.DataFrame:
    """Table 1 for every model: rows (model, constants kind), columns tasks, cells mean ± 95% interval, and
    `NOTE_COLUMN`: "not reproduced: ..." on a trained kind whose probes trained on another size than the original
    attention's (`trained_size_notes`), "" elsewhere.

    ``none`` is the original model (fraction 1); every other kind is the attention-free model (fraction 0).
    """
    r = results
    rows = pd.concat([r[(r.constants == "none") & (r.fraction == 1.0)],
                      r[r.constants.isin(kinds) & (r.fraction == 0.0) & r.constants_corpus.isin(["task", "none"])]])
    table = _pivot(aggregate(rows), "constants", ["none", *[k for k in kinds if k != "none"]])
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
    """(short model, trained kind) -> "not reproduced: N examples, E epochs (the other rows: ...)" for Table 1's
    trained constants (`TRAINABLE_KINDS`) where their probes trained on another size than the original attention's
    on the same task (a profile may give them fewer: they run the backbone every step), from the sizes the rows
    recorded; a kind whose rows or reference rows recorded no size is not marked."""
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
    """What each constants kind's probes trained on, per task: "examples × epochs" (a profile may train Table 1's
    trained constants, which run the backbone every step, on fewer examples than the frozen rows)."""
    sizes = results.assign(size=[f"{'?' if n is None else n} × {'?' if e is None else e}" for n, e in _sizes(results)])
    table = sizes.pivot_table(index="constants", columns="task", values="size", aggfunc="first")
    return table[[t for t in TABLE_TASKS if t in table.columns]].fillna("—")


def data_dependence_table(results: pd.DataFrame, other_corpus: str) -> pd.DataFrame:
    """Table 2 for every model: average constants from the task's own training set vs `other_corpus`, fraction 0;
    each corpus named as the pages name it (`papa.tasks.registry.corpus_label`: ``mlm`` -> WikiText)."""
    from papa.tasks.registry import corpus_label

    r = results
    rows = r[(r.constants == "average") & (r.fraction == 0.0) & r.constants_corpus.isin(["task", other_corpus])]
    table = _pivot(aggregate(rows), "constants_corpus", ["task", other_corpus])
    return table.rename(index=corpus_label, level="constants_corpus") if len(table) else table


def _pivot(agg: pd.DataFrame, row_key: str, row_order: Sequence[str]) -> pd.DataFrame:
    if agg.empty:
        return pd.DataFrame()
    agg = agg.assign(model=agg.model.map(short_model), cell=[format_cell(m, c) for m, c in zip(agg["mean"],
                                                                                                 agg["ci95"])])
    table = agg.pivot_table(index=["model", row_key], columns="task", values="cell", aggfunc="first")
    tasks = [t for t in TABLE_TASKS if t in table.columns]
    order = {k: i for i, k in enumerate(row_order)}
    table = table[tasks].reset_index()
    table = table.assign(_o=table[row_key].map(order)).sort_values(["model", "_o"]).drop(columns="_o")
    return table.set_index(["model", row_key]).fillna("—")


def means(table_agg: pd.DataFrame) -> pd.DataFrame:
    """The numeric means behind a curve frame, wide: one row per (model, task, selection), one column per fraction."""
    wide = table_agg.assign(model=table_agg.model.map(short_model)).pivot_table(
        index=["model", "task", "selection"], columns="fraction_label", values="mean", aggfunc="first")
    return wide[[c for c in _ORDER if c in wide.columns]]


#: The paper's MLM-pretrained encoders, by short name: Fig. 6 reads MLM only on these.
MLM_PRETRAINED = tuple(short_model(m) for m in (*PAPER_BASE, *PAPER_LARGE))


def unread_objectives(models: list[str] | set[str]) -> dict[str, str]:
    """For Fig. 6's tables and figure: the MLM row's reason where none of the encoders `models` was pretrained with
    MLM (the claim reads MLM only for the paper's MLM-pretrained encoders); {} where one was."""
    others = sorted({short_model(m) for m in models} - set(MLM_PRETRAINED))
    if not others or len(others) < len(set(models)):
        return {}
    return {"mlm": f"not read: {', '.join(others)} not pretrained with MLM"}


#: The column `fraction_claims` adds where a row is a pretraining objective (`OBJECTIVE_TASKS`): "read", or "not
#: read: " and why (Fig. 6's claim reads MLM only for MLM-pretrained encoders); "—" on a downstream task.
OBJECTIVE_COLUMN = "objective"


def fraction_claims(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model and task: the original score, the drop at 1/2 in points, and the relative drop at 0 (Fig. 2).

    Where a row is a pretraining objective (a −log perplexity, `OBJECTIVE_TASKS`) its relative drop is NaN (a log
    perplexity's zero is arbitrary, so a share of it means nothing), and the table gains ``drop_at_0`` (original −
    at 0 in the metric's units: nats for an objective, points elsewhere) and `OBJECTIVE_COLUMN`."""
    wide = means(curves)
    out = pd.DataFrame(index=wide.index)
    out["original"] = wide.get("1")
    if "1/2" in wide:
        out["at_half"] = wide["1/2"]
        out["drop_at_half"] = wide["1"] - wide["1/2"]
    if "0" in wide:
        out["at_0"] = wide["0"]
        out["relative_drop_at_0"] = (wide["1"] - wide["0"]) / wide["1"].abs()
    objective = out.index.get_level_values("task").isin(OBJECTIVE_TASKS) if len(out) else []
    if not any(objective):
        return out
    if "0" in wide:
        out.insert(out.columns.get_loc("relative_drop_at_0"), "drop_at_0", wide["1"] - wide["0"])
        out.loc[objective, "relative_drop_at_0"] = float("nan")
    out[OBJECTIVE_COLUMN] = [unread_objectives([model]).get(task, "read") if task in OBJECTIVE_TASKS else "—"
                             for model, task, *_ in out.index]
    return out


def grid_points(results: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Where the grid's own original-attention probe sits on each learning curve of `curves`
    (`papa.paper.grids.run` of a "curves" declaration): its mean and interval at the training size it ran, in the
    curves' columns (empty where the grid did not run the task)."""
    keep = (results.fraction == 1.0) & (results.constants == "none") & results.task.isin(set(curves.get("task", ())))
    rows = results[keep & results.model.isin(set(curves.get("model", ())))]
    if rows.empty:
        return curves.iloc[0:0]
    sizes = rows.groupby(["model", "task"])["extra"].agg(lambda s: max(json.loads(t)["train_examples"] for t in s))
    agg = aggregate(rows, by=["model", "task", "metric"])
    agg["train_examples"] = [int(sizes[(m, t)]) for m, t in zip(agg["model"], agg["task"])]
    return agg[list(curves.columns)]


def probes_learn(curves: pd.DataFrame, baselines: pd.DataFrame) -> pd.DataFrame:
    """Per model and task: does the probe on the original attention beat the majority-class baseline, with the lower
    end of its 95% interval above it (one seed: its mean)? Tasks without a baseline are left out."""
    original = curves[curves.fraction == 1.0][["model", "task", "mean", "ci95", "n"]]
    table = original.merge(baselines[["task", "majority"]], on="task")
    low = table["mean"] - table["ci95"].fillna(0)
    table = table.assign(margin=low - table["majority"], learns=low > table["majority"] + 1e-12)
    return table.set_index(["model", "task"])


def not_learning(learns: pd.DataFrame | None) -> list[tuple[str, str]]:
    """(model, task) pairs whose probe does not beat its majority baseline (`probes_learn`)."""
    if learns is None or learns.empty:
        return []
    table = learns.reset_index()
    return [(m, t) for m, t, ok in zip(table["model"], table["task"], table["learns"]) if not bool(ok)]


def split_learning(frame: pd.DataFrame, learns: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`frame`'s rows (with ``model`` and ``task`` columns) whose probe learns or has no baseline, and the rows of
    the (model, task) pairs that `not_learning` names."""
    skip = set(not_learning(learns))
    out = pd.Series([(m, t) in skip for m, t in zip(frame["model"], frame["task"])], index=frame.index, dtype=bool)
    return frame[~out], frame[out]


def ranking_stability(models: Sequence[str], tasks: Sequence[str], settings: RunSettings) -> pd.DataFrame:
    """How much each model's λ ranking on each of `tasks` depends on the seed λ learned with: one row per model and
    task (`papa.runs.stability.ranking_stability` of `STABILITY_SEEDS`: Spearman's ρ, the heads in common at 1/2
    and 1/8, how far λ moved in each; ``model`` named as result rows name it). Seed 0's ranking is the one the
    grids use (learned or loaded); each other seed's is learned once and saved beside it."""
    from papa.runs.stability import ranking_stability as stability_row

    if not models or not tasks:
        raise ValueError("give at least one model and one task")
    rows = []
    for model in models:
        for task in tasks:
            [cfg] = Grids((model,), (task,)).configs(settings)
            start = time.perf_counter()
            row = stability_row(cfg, seeds=STABILITY_SEEDS, progress=settings.progress)
            rows.append({**row, "seeds": " ".join(map(str, row["seeds"]))})
            if settings.progress:
                print(f"{short_model(model)} {task}: λ rankings of seeds {STABILITY_SEEDS} agree at "
                      f"ρ = {row['spearman']:.2f} ({time.perf_counter() - start:.0f}s)", flush=True)
    return pd.DataFrame(rows).set_index(["model", "task"])


#: The profile whose λ ranking is learned as the paper learns it (the whole training set, Table 3's epochs:
#: ``papa rank --task <task> --profile full``), read beside the grid's own rankings.
PAPER_STEPS_PROFILE = "full"
#: The fractions at which two rankings' kept heads are compared.
AGREEMENT_FRACTIONS = ("1/2", "1/8", "1/16")


def lambda_settling(folder: RunFolder | str | os.PathLike, model: str, task: str,
                    profile: str = PAPER_STEPS_PROFILE) -> pd.DataFrame | None:
    """Where `profile`'s λ ranking of `model` on `task` settled: one row per record of its learning curve (the step,
    the seconds trained, λ's spread, and its agreement with the final ranking: ρ and the heads kept in common at
    `AGREEMENT_FRACTIONS`; `papa.probing.convergence.settling_curve`); None where that ranking or its curve is not
    saved under `folder`."""
    from papa.paper.grids import saved_ranking_path
    from papa.probing.convergence import settling_curve
    from papa.runs.lambda_curves import curve_path, load_curve

    curve = curve_path(saved_ranking_path(folder, model, task, profile))
    if not curve.is_file():
        return None
    trace, _ = load_curve(curve)
    return pd.DataFrame(settling_curve(trace, fractions=AGREEMENT_FRACTIONS))


def rankings_agreement(folder: RunFolder | str | os.PathLike, model: str, task: str,
                       reference: str = PAPER_STEPS_PROFILE, profile: str = "cpu",
                       draws: Sequence[tuple[int, int]] | None = None) -> pd.DataFrame | None:
    """How `profile`'s λ rankings of `model` on `task` (one row per saved draw of `draws`, (seed, part) pairs; None:
    `papa.runs.stability.RANKING_DRAWS`), and `reference`'s own other draws, agree with `reference`'s ranking:
    Spearman's ρ, the heads kept in common at
    `AGREEMENT_FRACTIONS` (chance: the fraction itself), and each one's steps and λ spread; None where the reference
    ranking is not saved."""
    from papa.method.rankings import load_ranking
    from papa.paper.grids import saved_ranking_path
    from papa.probing.convergence import lambda_movement, ranking_agreement
    from papa.runs.stability import RANKING_DRAWS

    draws = RANKING_DRAWS if draws is None else draws
    folder = RunFolder.at(folder)
    reference_path = saved_ranking_path(folder, model, task, reference)
    if not reference_path.is_file():
        return None
    ref = load_ranking(reference_path)
    rows = []
    compared = [(profile, d) for d in draws] + [(reference, d) for d in draws if d != (0, 0)]
    for whose, (seed, part) in compared:
        path = saved_ranking_path(folder, model, task, whose, seed=seed, part=part)
        if not path.is_file():
            continue
        other = load_ranking(path)
        agreement = ranking_agreement(other.lambdas, ref.lambdas, fractions=AGREEMENT_FRACTIONS)
        rows.append({"profile": whose, "seed": seed, "part": part, "steps": other.metadata.get("steps"),
                     "examples": other.metadata.get("examples"),
                     "lambda_spread": lambda_movement(other.lambdas)["lambda_spread"],
                     "spearman": agreement["spearman"],
                     **{f"kept_in_common_{f}": agreement[f"overlap_kept_{f}"] for f in AGREEMENT_FRACTIONS}})
    rows.append({"profile": reference, "seed": 0, "part": 0, "steps": ref.metadata.get("steps"),
                 "examples": ref.metadata.get("examples"),
                 "lambda_spread": lambda_movement(ref.lambdas)["lambda_spread"], "spearman": 1.0,
                 **{f"kept_in_common_{f}": 1.0 for f in AGREEMENT_FRACTIONS}})
    return pd.DataFrame(rows)


def paper_steps_tables(folder: RunFolder | str | os.PathLike, model: str, task: str, profile: str = "cpu",
                       reference: str = PAPER_STEPS_PROFILE) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """`lambda_settling` of `reference`'s ranking and `rankings_agreement` of `profile`'s with it, each saved under
    ``<out>/tables/`` (``lambda_settling_<task>``, ``lambda_rankings_agreement_<task>``) where the ranking is saved;
    (None, None) where it is not."""
    folder = RunFolder.at(folder)
    settling = lambda_settling(folder, model, task, reference)
    if settling is None:
        return None, None
    agreement = rankings_agreement(folder, model, task, reference, profile)
    save_table(settling, folder, f"lambda_settling_{task}")
    save_table(agreement, folder, f"lambda_rankings_agreement_{task}")
    return settling, agreement


def settling_note(folder: RunFolder | str | os.PathLike, model: str, task: str,
                  profile: str = PAPER_STEPS_PROFILE) -> str:
    """A sentence on `profile`'s λ ranking of `model` on `task`: its steps and time, and where it settled
    (`papa.probing.convergence.settled_at`); or how to learn it where it is not saved."""
    from papa.probing.convergence import SETTLED_RHO, settled_at

    settling = lambda_settling(folder, model, task, profile)
    if settling is None:
        return (f"The {profile} profile's λ ranking of {short_model(model)} on {task} is not saved under {folder}: "
                f"learn it with `papa rank --task {task} --profile {profile} --out {folder}` (the whole training "
                "set, Table 3's epochs; it checkpoints itself and resumes where it stopped).")
    last = settling.iloc[-1]
    settled = settled_at(settling.to_dict("records"))
    where = (f"its ranking agreed with the final one at ρ ≥ {SETTLED_RHO} from step {settled:,} on"
             if settled is not None else f"its ranking did not stay within ρ ≥ {SETTLED_RHO} of the final one "
                                         "before the last step")
    return (f"The {profile} profile's λ ranking of {short_model(model)} on {task}: {int(last.step):,} optimizer "
            f"steps, {last.seconds / 3600:.1f} h of λ learning; {where}; λ spans {last.lambda_spread:.3f} at the "
            "end.")

