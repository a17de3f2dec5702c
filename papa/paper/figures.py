"""The paper's figures from papa's frames (matplotlib), and saving them as PNG and SVG.

Each function takes the frame a `papa.paper.sections` function returns and gives a `matplotlib.figure.Figure`; nothing
here computes results. The x-axis of the fraction plots is the paper's: 1, 1/2, 1/8, 1/16, 0 of the heads input-
dependent, evenly spaced.
"""
from __future__ import annotations

import io
import math
import os
import re
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure

from papa.core.artifacts import atomic_path
from papa.core.vocabulary import NONE, PAPER_FRACTIONS
from papa.paper.paper_numbers import (PAPER_DIAGONAL_SHARE, PAPER_SPECIAL_SHARE, paper_score,
                                      performance_vs_drop_points)
from papa.paper.sections import METRIC_NAMES, OBJECTIVE_TASKS, SELECTION_NAMES, short_model

FRACTION_ORDER = PAPER_FRACTIONS  # plotted from all heads input-dependent to none
#: The legend's name of the paper's scores marked on the fraction plots.
PAPER_TABLE1_LABEL = "paper, RoBERTa-base (Table 1)"
#: How the paper's numbers are drawn beside the run's: hollow, grey, no line.
_PAPER_STYLE = dict(linestyle="none", color="0.35", markerfacecolor="none", markeredgewidth=1.4, markersize=8)


def _grid(n: int, ncols: int = 3, size: float = 3.4) -> tuple[plt.Figure, list[plt.Axes]]:
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * 0.85 * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _fraction_axis(ax: plt.Axes, labels: Sequence[str]) -> None:
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("fraction of input-dependent heads")
    ax.grid(alpha=0.3)


def _curve(ax: plt.Axes, rows: pd.DataFrame, labels: Sequence[str], label: str, *, shift: float = 0.0,
           **style) -> None:
    """One line with its 95% interval as error bars, moved `shift` along x so that several lines' bars stay apart
    (translucent bands of five lines merge into one patch)."""
    rows = rows.set_index("fraction_label").reindex(labels)
    x = [i + shift for i in range(len(labels))]
    ax.errorbar(x, rows["mean"], yerr=rows["ci95"].fillna(0), marker="o", markersize=4, capsize=2.5, label=label,
                **style)


def _shifts(n: int, spread: float = 0.3) -> list[float]:
    """x offsets of `n` lines drawn at the same fractions, centred on each fraction."""
    return [0.0] if n == 1 else [spread * (i / (n - 1) - 0.5) for i in range(n)]


def _legend_outside(fig: plt.Figure, axes: Sequence[plt.Axes], extra: Sequence = (), last: Sequence[str] = ()) -> None:
    """One legend for every panel (each label once, whichever panel draws it), right of them, so that it covers no
    curve; `extra` handles (what the bars hold) after the panels' own, and the entries labelled `last` (the paper's)
    after all."""
    entries: dict = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    for handle in extra:
        entries.setdefault(handle.get_label(), handle)
    for label in last:
        if label in entries:
            entries[label] = entries.pop(label)
    if len(entries) > 1:
        fig.legend(list(entries.values()), list(entries), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9,
                   frameon=False)


def _labels(curves: pd.DataFrame) -> list[str]:
    present = set(curves["fraction_label"])
    return [f for f in FRACTION_ORDER if f in present] + sorted(present - set(FRACTION_ORDER))


def _metric_name(rows: pd.DataFrame) -> str:
    metric = rows["metric"].iloc[0] if "metric" in rows and len(rows) else ""
    return METRIC_NAMES.get(metric, metric)


def fraction_curves(curves: pd.DataFrame, *, by: str = "model", title: str = "", learns: pd.DataFrame | None = None,
                    unread: dict[str, str] | None = None,
                    unread_lines: Mapping[tuple[str, str], str] | None = None, paper: bool = True) -> plt.Figure:
    """Fig. 2 (and 5, 6): one panel per task, metric vs fraction with the 95% interval, one line per `by` value.
    With `learns` (`papa.paper.sections.probes_learn`), a task whose probe does not beat its majority class shows
    that class's score as a dashed line and says it is not read; `unread` gives a task's other reasons (task: why),
    over its panel; `unread_lines` ((task, `by` value): why, `papa.paper.read_marks.ReadMarks.lines`) marks single
    lines: dashed, hollow, their reason in the legend. A point pooled over several draws of its order (``orders``
    above 1, `sections.curves_over_orders`) is drawn as a square, and the legend says what every bar holds. With
    `paper`, a task the paper's Table 1 scores shows its RoBERTa-base scores at fractions 1 and 0 (`_paper_marks`)."""
    if curves.empty:
        raise ValueError("no results to plot: run the section's grid first")
    tasks = list(dict.fromkeys(curves["task"]))
    labels = _labels(curves)
    lines = list(dict.fromkeys(curves[by]))
    names = _line_labels(by, lines)
    fig, axes = _grid(len(tasks), size=4.6)
    for ax, task in zip(axes, tasks):
        rows = curves[curves.task == task]
        for key, shift in zip(lines, _shifts(len(lines))):
            group = rows[rows[by] == key]
            why = (unread_lines or {}).get((task, key))
            style = dict(linestyle="--", markerfacecolor="white") if why else {}
            label = names[key] + ("\n" + "\n".join(textwrap.wrap(f"not read: {why}", 44)) if why else "")
            if len(group):
                _curve(ax, group, labels, label, shift=shift, color=plt.get_cmap("tab10")(lines.index(key) % 10),
                       **style)
                _pooled_points(ax, group, labels, shift, plt.get_cmap("tab10")(lines.index(key) % 10),
                               style.get("markerfacecolor"))
        if paper:
            _paper_marks(ax, task, rows, labels)
        _fraction_axis(ax, labels)
        ax.set_title(task + _panel_note(learns, task, rows, unread, ax), fontsize=10)
        ax.set_ylabel(_metric_name(rows))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    _legend_outside(fig, axes, _bar_entries(curves), last=(PAPER_TABLE1_LABEL,))
    return fig


def _paper_marks(ax: plt.Axes, task: str, rows: pd.DataFrame, labels: Sequence[str]) -> None:
    """The paper's RoBERTa-base scores on `task` (Table 1) as hollow grey diamonds: the original model's at fraction
    1 and, at fraction 0, that of the constants kind the panel ran there (``constants``; average where the frame does
    not say); none where the table has no such task or row, or the axis no such fraction."""
    if "constants" in rows:
        kinds = set(rows.loc[rows["fraction_label"] == "0", "constants"].dropna())
        kind = kinds.pop() if len(kinds) == 1 else None
    else:
        kind = "average"
    points = [(labels.index(f), paper_score(task, k)) for f, k in (("1", NONE), ("0", kind)) if f in labels and k]
    points = [(x, y) for x, y in points if y is not None]
    if points:
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="D", label=PAPER_TABLE1_LABEL, zorder=3, **_PAPER_STYLE)


def _panel_note(learns: pd.DataFrame | None, task: str, rows: pd.DataFrame, unread: dict[str, str] | None,
                ax: plt.Axes) -> str:
    """What a panel's title adds under the task: every reason the claims do not read it (the majority class's
    score drawn dashed where the probe does not beat it), "" where they read it."""
    notes = [(unread or {}).get(task)]
    below = _below_majority(learns, task, set(rows["model"]))
    if below is not None:
        ax.axhline(below, color="0.45", linestyle="--", linewidth=1, label="majority class")
        notes.append(f"probe ≤ majority class ({below:.3f}): not read")
    return "".join("\n" + "\n".join(textwrap.wrap(n, 60)) for n in notes if n)


def _pooled_points(ax: plt.Axes, rows: pd.DataFrame, labels: Sequence[str], shift: float, color,
                   face: str | None = None) -> None:
    """Squares over the points that pool several draws of their order (their bars hold the draws' spread too)."""
    if "orders" not in rows:
        return
    pooled = rows[rows["orders"] > 1]
    if pooled.empty:
        return
    x = [labels.index(f) + shift for f in pooled["fraction_label"]]
    ax.plot(x, pooled["mean"], linestyle="none", marker="s", markersize=6, color=color, markerfacecolor=face or color)


def _bar_entries(curves: pd.DataFrame) -> list:
    """The legend's lines on the bars: what a 95% interval holds, and the squares' draws where any point pools some."""
    from matplotlib.lines import Line2D

    entries = [Line2D([], [], color="0.3", marker="|", markersize=10, linestyle="none",
                      label="bars: 95% interval over the seeds")]
    if "orders" in curves and (curves["orders"] > 1).any():
        k = ", ".join(str(v) for v in sorted(set(curves.loc[curves["orders"] > 1, "orders"])))
        entries.append(Line2D([], [], color="0.3", marker="s", linestyle="none",
                              label=f"square: mean over the order's draws\n({k} draws; bars: seeds and draws,\n"
                                    "as the claims read it)"))
    return entries


def _line_labels(by: str, keys: Sequence) -> dict:
    """How a legend names each line: a model by its short name, a head order as the pages name it (another profile's
    ranking, ``lambda@full``, as "λ of the full profile"; the run's own λ, beside it, as "λ, this run's ranking")."""
    if by == "model":
        return {k: short_model(k) for k in keys}
    if by != "selection":
        return {k: str(k) for k in keys}
    others = {str(k).partition("@")[0] for k in keys if "@" in str(k)}
    names = {}
    for key in keys:
        method, _, other = str(key).partition("@")
        name = SELECTION_NAMES.get(method, method)
        names[key] = (f"{name} of the {other} profile" if other else
                      f"{name}, this run's ranking" if method in others else name)
    return names


def _below_majority(learns: pd.DataFrame | None, task: str, models: set[str]) -> float | None:
    """The majority class's score on `task` where the probe of one of `models` does not beat it (None: all do, or
    no table)."""
    if learns is None or learns.empty:
        return None
    table = learns.reset_index()
    rows = table[(table["task"] == task) & table["model"].isin(models)]
    return float(rows["majority"].iloc[0]) if len(rows) and not rows["learns"].astype(bool).all() else None


def selection_differences(comparisons: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """Fig. 5 as its claim reads it: every comparison the claim counts (`papa.paper.claims.comparison_table`), one
    column per task and λ ranking, one row per kind of comparison, each other order's paired difference with its 95%
    interval at each fraction. Above 0 the claim holds there; points whose λ rankings are unstable (not read) are
    drawn hollow, with the gate's reason over their panel."""
    if comparisons.empty:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "no comparison to draw: no λ ranking and other order ran at a fraction between 0 and 1",
                ha="center", va="center", fontsize=9, wrap=True)
        return fig
    columns = list(dict.fromkeys(zip(comparisons["model"], comparisons["task"], comparisons["profile"].fillna(""))))
    several = comparisons["model"].nunique() > 1
    kinds = list(dict.fromkeys(comparisons["comparison"]))
    labels = _labels(comparisons.rename(columns={"fraction": "fraction_label"}))
    methods = list(dict.fromkeys(comparisons["method"]))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    fig, axes = plt.subplots(len(kinds), len(columns), figsize=(4.8 * len(columns), 3.6 * len(kinds)),
                             squeeze=False, sharey="row")
    for col, (model, task, profile) in enumerate(columns):
        here = comparisons[(comparisons.model == model) & (comparisons.task == task)
                           & (comparisons.profile.fillna("") == profile)]
        gate = next((g for g in here["gate"].fillna("") if g), "")
        whose = f"λ of the {profile} profile" if profile else "the run's own λ"
        for row, kind in enumerate(kinds):
            ax = axes[row][col]
            rows = here[here.comparison == kind]
            shown = [m for m in methods if m in set(rows.method)]
            for method, shift in zip(shown, _shifts(len(shown))):
                line = rows[rows.method == method].set_index("fraction").reindex(labels)
                x = [i + shift for i in range(len(labels))]
                yerr = [(line["difference"] - line["low"]).fillna(0), (line["high"] - line["difference"]).fillna(0)]
                read = not gate
                ax.errorbar(x, line["difference"], yerr=yerr, fmt="o", markersize=5, capsize=2.5,
                            color=colours[method], markerfacecolor=colours[method] if read else "white",
                            alpha=1.0 if read else 0.6, label=method.replace("_", " "))
            ax.axhline(0, color="0.3", linewidth=0.8)
            _fraction_axis(ax, labels)
            ax.set_ylabel(kind, fontsize=9)
            if row == 0:
                why = "\n" + "\n".join(textwrap.wrap(f"not read: {gate}", 60)) if gate else ""
                ax.set_title(f"{short_model(model) + ', ' if several else ''}{task}, {whose}{why}", fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", linestyle="", color=colours[m], label=m.replace("_", " ")) for m in methods]
    if comparisons["gate"].fillna("").astype(bool).any():
        handles.append(Line2D([], [], marker="o", linestyle="", color="0.4", markerfacecolor="white",
                              label="hollow: not read\n(rankings unstable)"))
    fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9, frameon=False,
               title="other order")
    return fig


def relative_drop_curves(drops: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """Notebook 08: the share of each task's original score lost vs fraction, every task on one axis (a frame from
    `papa.paper.decoders.relative_drops`), one line per model and task."""
    if drops.empty:
        raise ValueError("no results to plot: run the section's grids first")
    labels = _labels(drops)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    several = drops["model"].nunique() > 1
    groups = list(drops.groupby(["model", "task"], sort=False))
    for ((model, task), group), shift in zip(groups, _shifts(len(groups))):
        rows = group.assign(mean=group["relative_drop"] * 100, ci95=group["relative_ci95"] * 100)
        name = f"{short_model(model)} {task}" if several else task
        _curve(ax, rows, labels, name, shift=shift,
               linewidth=2.5 if task in OBJECTIVE_TASKS else 1.2)  # objectives stand out
    _fraction_axis(ax, labels)
    ax.set_ylabel("share of the original score lost (%)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    _legend_outside(fig, [ax])
    return fig


def learning_curves(curves: pd.DataFrame, baselines: pd.DataFrame | None = None, *, title: str = "",
                    baseline: str = "majority", baseline_label: str = "majority class",
                    grid_points: pd.DataFrame | None = None) -> plt.Figure:
    """One panel per task: the original-attention probe's metric (95% interval) against training examples
    (`papa.paper.grids.run` of a "curves" declaration), with a baseline (`baselines`' column `baseline`: the majority
    class of `papa.paper.baselines.majority_baselines`, or e.g. ``context_free`` of its `chance_levels`) dashed where given,
    and the grid's own probe (`sections.grid_points`) marked apart; one legend beside the panels."""
    if curves.empty:
        raise ValueError("no learning curve to plot: the profile draws none (its `curves`)")
    if baselines is not None and "task" not in baselines.columns:  # a table indexed by (model, task)
        baselines = baselines.reset_index()
    tasks = list(dict.fromkeys(curves["task"]))
    fig, axes = _grid(len(tasks))
    for ax, task in zip(axes, tasks):
        rows = curves[curves.task == task]
        for model, group in rows.groupby("model", sort=False):
            ci = group["ci95"].fillna(0)
            ax.errorbar(group["train_examples"], group["mean"], yerr=ci, marker="o", capsize=3,
                        label=short_model(model))
        points = grid_points[grid_points.task == task] if grid_points is not None else rows.iloc[0:0]
        if len(points):
            ax.errorbar(points["train_examples"], points["mean"], yerr=points["ci95"].fillna(0), marker="D",
                        linestyle="none", color="black", capsize=3, label="the grid's probe")
        if baselines is not None and task in set(baselines["task"]):
            level = float(baselines.loc[baselines.task == task, baseline].iloc[0])
            ax.axhline(level, color="grey", linestyle="--", label=baseline_label)
        ax.set_xscale("log")
        sizes = sorted(set(rows["train_examples"]) | set(points["train_examples"]))
        ax.set_xticks(sizes, [f"{v:,}" for v in sizes])  # the sizes run, not powers of ten
        ax.minorticks_off()
        ax.set_xlabel("training paragraphs" if task in OBJECTIVE_TASKS else "training examples")  # MLM, LM: text
        ax.set_ylabel(_metric_name(rows))
        ax.set_title(task)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    _legend_outside(fig, axes)
    return fig


def performance_vs_drop(summary: pd.DataFrame, *, paper: bool = True) -> plt.Figure:
    """Fig. 3: original average performance (y) vs mean relative drop with every head replaced (x), per model; with
    `paper`, the paper's RoBERTa-base and RoBERTa-large beside them (hollow grey, from its Tables 1 and 4,
    `paper_numbers.performance_vs_drop_points`). With no point of the run's to place (no task whose probe beats its
    majority baseline, as a model with random weights has), the figure says so."""
    fig, ax = plt.subplots(figsize=(4.5, 3.6))
    if summary.empty:
        ax.text(0.5, 0.5, "no model has a task whose probe beats its\nmajority baseline at fractions 1 and 0",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    ax.scatter(summary["relative_drop"] * 100, summary["original"], label="this run", zorder=3)
    for row in summary.itertuples():
        ax.annotate(short_model(row.model), (row.relative_drop * 100, row.original), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")
    if paper:
        for (model, row), marker in zip(performance_vs_drop_points().iterrows(), "s^"):
            ax.plot([row["relative_drop"] * 100], [row["original"]], marker=marker,
                    label=f"paper, {model} ({row['source']})", **_PAPER_STYLE)
    ax.set_xlabel("relative drop with no input-dependent heads (%)")
    ax.set_ylabel("original average performance")
    ax.grid(alpha=0.3)
    if len(summary) == 1:  # the paper's figure relates models: one point shows one model, no relation
        ax.set_title(f"one model ({short_model(summary['model'].iloc[0])}): no relation to read", fontsize=9)
    fig.tight_layout()
    _legend_outside(fig, [ax], last=[f"paper, {m} ({r})" for m, r in performance_vs_drop_points()["source"].items()])
    return fig


#: The pattern table's entries that are no share of heads (a count, a median).
_NOT_HEAD_SHARES = ("heads", "median_spread")


def pattern_shares(shares: pd.Series | pd.DataFrame, *, title: str = "", paper: bool = True) -> plt.Figure:
    """Fig. 4's shares of heads by pattern, one bar each: `papa.paper.patterns.pattern_summary`'s series, or
    `papa.paper.pattern_intervals.pattern_share_intervals`' frame (``value``, its 95% interval ``low``–``high`` as
    error bars). With `paper`, the paper's shares (Sec. 5.1: about 90% diagonal, about 40% mostly on [CLS]/[SEP])
    as dashed ticks across their bars."""
    table = shares.to_frame("value") if isinstance(shares, pd.Series) else shares
    if "value" not in table:
        raise ValueError("pattern shares need a `value` per share (pattern_summary or pattern_share_intervals)")
    table = table.drop(index=[n for n in _NOT_HEAD_SHARES if n in table.index]).astype({"value": float})
    names = list(table.index)
    fig, ax = plt.subplots(figsize=(1.0 * len(names) + 2.0, 3.6))
    x = list(range(len(names)))
    yerr = None
    if {"low", "high"} <= set(table.columns):
        yerr = [(table["value"] - table["low"]).clip(lower=0), (table["high"] - table["value"]).clip(lower=0)]
    ax.bar(x, table["value"], yerr=yerr, capsize=3, color="tab:blue", label="this run")
    marks = [(name, share) for name, share in (("diagonal", PAPER_DIAGONAL_SHARE), ("special", PAPER_SPECIAL_SHARE))
             if paper and name in names]
    for name, share in marks:
        i = names.index(name)
        ax.plot([i - 0.4, i + 0.4], [share, share], color="0.2", linestyle="--", linewidth=1.6,
                label=f"paper (about {share:.0%})")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of heads")
    ax.grid(axis="y", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    _legend_outside(fig, [ax], last=[f"paper (about {share:.0%})" for _, share in marks])
    return fig


def lambda_settling(settling: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """How one λ ranking settled while it learned (`papa.paper.sections.lambda_settling`): its agreement with the
    final ranking (Spearman's ρ, the heads kept in common at 1/8) and λ's spread, against the optimizer step."""
    if settling.empty:
        raise ValueError("no learning curve to plot: learn the ranking with its curve first")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(settling.step, settling.spearman, marker=".", label="ρ with the final ranking")
    kept = "overlap_kept_1/8"
    if kept in settling:
        ax.plot(settling.step, settling[kept], marker=".", label="heads kept at 1/8 in common")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("agreement with the final ranking")
    ax.set_ylim(-0.05, 1.05)
    spread = ax.twinx()
    spread.plot(settling.step, settling.lambda_spread, color="grey", linestyle="--", label="λ spread (max − min)")
    spread.set_ylabel("λ spread")
    lines = ax.get_legend_handles_labels()
    more = spread.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="lower right")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def save_lambda_settling(settling: pd.DataFrame | None, folder: str | os.PathLike, task: str) -> list[Path]:
    """`lambda_settling`'s figure saved as ``lambda_settling_<task>`` under `folder` (a run's figures folder,
    `RunFolder.figures`, as `save_figure` takes it; []: no curve to draw)."""
    if settling is None:
        return []
    return save_figure(lambda_settling(settling, title=f"λ settling on {task} (learned as the paper learns it)"),
                       folder, f"lambda_settling_{task}")


def constant_heatmaps(matrices: torch.Tensor, heads: Sequence[tuple[int, int]], *, length: int | None = None,
                      title: str = "") -> plt.Figure:
    """Fig. 4: heatmaps of the constant matrices of `heads` ((layer, head) pairs), rows renormalised as at use.

    `length` crops to the first `length` slots plus the last one (the final [SEP]) to show short inputs.
    """
    fig, axes = _grid(len(heads), ncols=min(len(heads), 3), size=3.0)
    n = matrices.shape[-1]
    keep = list(range(min(length, n - 1))) + [n - 1] if length else list(range(n))
    for ax, (layer, head) in zip(axes, heads):
        c = matrices[layer, head].to(torch.float32)
        c = c / c.sum(-1, keepdim=True).clamp_min(1e-12)
        c = c[keep][:, keep]
        ax.imshow(c.numpy(), cmap="viridis", vmin=0)
        ax.set_title(f"({layer}, {head})", fontsize=9)
        ax.set_xlabel("key slot")
        ax.set_ylabel("query slot")
        if length and len(keep) < n:
            # the crop jumps from slot keep[-2] to the last one: a white break and its own tick say so
            ticks, labels = [0, len(keep) - 2, len(keep) - 1], [0, keep[-2], n - 1]
            ax.set_xticks(ticks, labels, fontsize=8)
            ax.set_yticks(ticks, labels, fontsize=8)
            _apart(ax.get_xticklabels()[1:], "ha", ("right", "left"))  # the two ticks beside the break, one slot
            _apart(ax.get_yticklabels()[1:], "va", ("bottom", "top"))  # apart, each on its own side of it
            ax.axvline(len(keep) - 1.5, color="white", linewidth=2)
            ax.axhline(len(keep) - 1.5, color="white", linewidth=2)
            ax.set_xlabel(f"key slot ({keep[-2] + 1}–{n - 2} not shown)", fontsize=8)
            ax.set_ylabel("query slot", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _apart(labels: Sequence, key: str, sides: tuple[str, str]) -> None:
    """Align two adjacent tick labels away from each other (`key` "ha" or "va"), so that neither covers the other."""
    for label, side in zip(labels, sides):
        label.set(**{key: side})


def attention_vs_constant(constant: torch.Tensor, live: torch.Tensor, tokens: Sequence[str], *,
                          title: str = "", max_labels: int = 48, figsize: tuple[float, float] = (9, 4.2),
                          fontsize: float = 7) -> Figure:
    """A head's constant matrix (renormalised over the input's tokens) beside its live attention on that input.

    Inputs longer than `max_labels` tokens label every k-th slot only (``slot:token``), so that a 512-token input
    draws as fast as a sentence and stays legible; `fontsize` (points) sizes the token labels.
    """
    fig, axes = plt.subplots(1, 2, figsize=figsize)
    step = -(-len(tokens) // max_labels)
    ticks = list(range(0, len(tokens), step))
    labels = [tokens[i] if step == 1 else f"{i}:{tokens[i]}" for i in ticks]
    for ax, (matrix, name) in zip(axes, ((constant, "constant matrix C"), (live, "live attention A"))):
        ax.imshow(matrix.numpy(), cmap="viridis", vmin=0, vmax=max(float(matrix.max()), 1e-6))
        ax.set_title(name, fontsize=10)
        ax.set_xticks(ticks, labels, rotation=90, fontsize=fontsize)
        ax.set_yticks(ticks, labels, fontsize=fontsize)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def png_bytes(fig: Figure, dpi: int = 80) -> bytes:
    """`fig` rendered as PNG (for widgets), then closed so pyplot does not also display it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def save_figure(fig: plt.Figure, folder: str | os.PathLike, name: str) -> list[Path]:
    """Write `fig` as ``<name>.png`` and ``<name>.svg`` under `folder` (a run's figures folder, atomically; a file
    already there that draws the same, `same_drawing`, is left as it is); returns the paths."""
    paths = []
    for ext in ("png", "svg"):
        path = Path(folder) / f"{name}.{ext}"
        buf = io.BytesIO()
        # SVGs carry a date and random ids by default: fix them so a re-run writes the same bytes.
        meta = {"Date": None} if ext == "svg" else {"Software": None}
        with plt.rc_context({"svg.hashsalt": "papa"}):
            fig.savefig(buf, format=ext, dpi=110, bbox_inches="tight", metadata=meta)
        if not (path.is_file() and same_drawing(path.read_bytes(), buf.getvalue())):
            with atomic_path(path) as tmp:
                tmp.write_bytes(buf.getvalue())
        paths.append(path)
    return paths


#: The id matplotlib gives an SVG clip path: a hash of its rectangle's coordinates, which float rounding in the layout
#: (another CPU, another order of a sum) changes while the drawing stays the same.
_CLIP_ID = re.compile(rb"\bp[0-9a-f]{10}\b")


def same_drawing(old: bytes, new: bytes) -> bool:
    """Whether two files of a figure draw the same: equal bytes, or SVGs equal but for their clip paths' ids."""
    if old == new:
        return True

    def numbered(svg: bytes) -> bytes:
        ids: dict[bytes, bytes] = {}
        return _CLIP_ID.sub(lambda m: ids.setdefault(m[0], b"clip%d" % len(ids)), svg)

    return old.lstrip().startswith((b"<?xml", b"<svg")) and numbered(old) == numbered(new)
