"""A run's results as the sections' tables: a notebook's setup, curves over fractions and head orders, their cells.

In the results table fraction 1 has constants and selection ``none``, and fraction 0 has selection ``none``.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from papa.core.artifacts import write_table
from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.core.vocabulary import PAPER_BASE, PAPER_FRACTIONS, PAPER_LARGE, PAPER_TASKS
from papa.runs.results import GROUP_KEYS, aggregate
from papa.tasks.registry import TASKS

# Tasks whose metric lies in [0, 1] (Fig. 3 averages them); MLM's negative log perplexity is shown on its own.
DOWNSTREAM_TASKS = PAPER_TASKS
#: The objectives over the vocabulary (MLM, LM, LM probe): scored by -log perplexity, never averaged with tasks.
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
#: The `probes_learn` tables: notebook 02's (encoders) and notebook 08's (decoders).
LEARNS_TABLE = "probes_vs_majority"
DECODER_LEARNS_TABLE = "decoder_probes_vs_majority"
LEARNS_TABLES = (LEARNS_TABLE, DECODER_LEARNS_TABLE)
#: The tables of the λ rankings' seed-to-seed agreement: notebook 02's (encoders) and notebook 08's (decoders).
RANKING_STABILITY_TABLE = "ranking_stability"
DECODER_RANKING_STABILITY_TABLE = "decoder_ranking_stability"
RANKING_STABILITY_TABLES = (RANKING_STABILITY_TABLE, DECODER_RANKING_STABILITY_TABLE)
#: The table of each task's chance level on notebook 08's decoder.
DECODER_CHANCE_TABLE = "decoder_chance_levels"
CHANCE_TABLES = (DECODER_CHANCE_TABLE,)


def setup(profile: str, folder: str | os.PathLike, *, data_dir: str | None = None, device: str = "cpu",
          force: bool = False, models: Sequence[str] = (), tasks: Sequence[str] = ()) -> RunSettings:
    """A section notebook's `RunSettings` from its parameters, checked before any data or model is read; prints
    `outputs_note`."""
    from papa.core.vocabulary import SPLITS
    from papa.runs.context import RunContext, check_run_context

    check_run_context(RunContext(models=tuple(models), data_dir=data_dir, reads=tuple((t, SPLITS) for t in tasks),
                                 out=folder, device=device))
    pd.set_option("display.width", 160)
    settings = RunSettings(profile, folder, data_dir, device, force)
    print(outputs_note(profile, settings.folder))
    return settings


def outputs_note(profile: str, folder: RunFolder) -> str:
    """The lines a notebook prints first: which profile made its outputs, where, and how to run it again."""
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
    """A notebook parameter of names as a list: a list, a list literal or ``sst2,cola``; else ValueError."""
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


def save_table(table: pd.DataFrame, folder: RunFolder, name: str) -> Path:
    """Write `table` to ``<folder>/tables/<name>.csv`` (`papa.core.artifacts.write_table`); returns the path."""
    return write_table(table, folder.table(name))


def short_model(name: str) -> str:
    """The last part of a hub id or path (``sentence-transformers/all-MiniLM-L6-v2`` -> ``all-MiniLM-L6-v2``)."""
    return str(name).rstrip("/").split("/")[-1]


def _sorted(agg: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("model", "task", "constants", "constants_corpus", "selection") if c in agg.columns]
    agg = agg.assign(_order=agg["fraction_label"].map(_ORDER).fillna(99))
    return agg.sort_values([*keys, "_order"], kind="stable").drop(columns="_order").reset_index(drop=True)


def main_curves(results: pd.DataFrame, *, selection: str = "lambda", constants: str = "average",
                constants_corpus: str = "task") -> pd.DataFrame:
    """Fig. 2 / 6: per model and task, mean and 95% interval at every fraction for one constants kind and method
    (fractions 1 and 0 from the shared ``none`` rows)."""
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
    """`results` with each draw under its order's name (``lambda@part1`` -> ``lambda``, ``lambda@full-part1`` ->
    ``lambda@full``), the draw's own name in ``draw``."""
    from papa.method.selection import parse_selection

    names = {n: parse_selection(n) for n in results.selection.unique() if n != "none"}
    order = {n: s.method if s.profile is None else f"{s.method}@{s.profile}" for n, s in names.items()}
    return results.assign(draw=results.selection, selection=results.selection.map(lambda n: order.get(n, n)))


def curves_over_orders(results: pd.DataFrame, methods: Sequence[str], *, constants: str = "average"
                       ) -> pd.DataFrame:
    """`selection_curves` pooled over every draw of each order, with ``orders`` (draws a point pools); a pooled
    point is the mean of its draws' means, with `orders_interval` as its interval."""
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
    """Half-width of the 95% interval of the mean over an order's draws (one point's rows with ``draw``, ``seed``,
    ``value``): paired over shared seeds plus the draws' spread (`over_orders`); draws sharing no seed give their
    means' spread alone."""
    from papa.runs.statistics import LEVEL, estimate, over_orders, scores

    by_draw = [scores(dict(zip(g.seed, g.value))) for _, g in draws.groupby("draw", sort=True)]
    means = [float(s.values.mean()) for s in by_draw]
    if not set.intersection(*(set(s.seeds) for s in by_draw)):
        agg = aggregate(pd.DataFrame({"model": "m", "value": means}), by=["model"])
        return float(agg["ci95"].iloc[0])
    low, high = over_orders(estimate(lambda *xs: sum(xs) / len(xs), *by_draw), means).interval(LEVEL)
    return (high - low) / 2


def orders_run(results: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """`methods`, then each one's rankings learned by another profile that `results` ran (``lambda@full``)."""
    pooled = set(pooled_orders(results).selection)
    return [*methods, *sorted(s for s in pooled if s.partition("@")[0] in methods and "@" in s)]


def format_cell(mean: float, ci95: float, digits: int = 3, orders: int = 1) -> str:
    """``0.812 ± 0.010``, or ``0.781 ± 0.009 (4 orders)`` pooling draws; no interval for one seed."""
    if pd.isna(mean):
        return "—"
    pooled = f" ({int(orders)} orders)" if pd.notna(orders) and orders > 1 else ""
    return (f"{mean:.{digits}f}" if pd.isna(ci95) else f"{mean:.{digits}f} ± {ci95:.{digits}f}") + pooled


def curve_cells(curves: pd.DataFrame) -> pd.DataFrame:
    """A curve frame as printed: one row per (model, task, selection), one `format_cell` column per fraction."""
    if curves.empty:
        return pd.DataFrame()
    orders = curves["orders"] if "orders" in curves else pd.Series(1, index=curves.index)
    cells = curves.assign(model=curves.model.map(short_model),
                          cell=[format_cell(m, c, orders=k) for m, c, k in zip(curves["mean"], curves["ci95"], orders)])
    wide = cells.pivot_table(index=["model", "task", "selection"], columns="fraction_label", values="cell",
                             aggfunc="first", sort=False)
    return wide[[c for c in _ORDER if c in wide.columns]].fillna("—")


def pivot_cells(agg: pd.DataFrame, row_key: str, row_order: Sequence[str]) -> pd.DataFrame:
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
    """{"mlm": why} where none of `models` was pretrained with MLM (Fig. 6 reads MLM only there); {} else."""
    others = sorted({short_model(m) for m in models} - set(MLM_PRETRAINED))
    if not others or len(others) < len(set(models)):
        return {}
    return {"mlm": f"not read: {', '.join(others)} not pretrained with MLM"}


#: The column `fraction_claims` adds for objectives: "read", or "not read: why"; "—" on a downstream task.
OBJECTIVE_COLUMN = "objective"


def fraction_claims(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model and task: the original score, the drop at 1/2 in points, and the relative drop at 0 (Fig. 2).

    With an objective among the rows, its relative drop is NaN (a log perplexity's zero is arbitrary), and the table
    gains ``drop_at_0`` (in the metric's units) and `OBJECTIVE_COLUMN`."""
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


def probes_learn(curves: pd.DataFrame, baselines: pd.DataFrame) -> pd.DataFrame:
    """Per model and task: whether the original-attention probe beats its majority class, the lower end of its 95%
    interval (one seed: its mean) above it; tasks without a baseline are left out."""
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
    """`frame`'s rows whose probe learns (or has no baseline), and those of the pairs `not_learning` names."""
    skip = set(not_learning(learns))
    out = pd.Series([(m, t) in skip for m, t in zip(frame["model"], frame["task"])], index=frame.index, dtype=bool)
    return frame[~out], frame[out]


