"""The paper's figures drawn from `papa.paper.tables`' frames (matplotlib), and saving them as PNG and SVG."""
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
from papa.paper.paper_numbers import paper_score
from papa.paper.tables import METRIC_NAMES, OBJECTIVE_TASKS, SELECTION_NAMES, short_model

#: The legend's name of the paper's scores marked on the fraction plots.
PAPER_TABLE1_LABEL = "paper, RoBERTa-base (Table 1)"
#: How the paper's numbers are drawn beside the run's: hollow, grey, no line.
PAPER_STYLE = dict(linestyle="none", color="0.35", markerfacecolor="none", markeredgewidth=1.4, markersize=8)


def _grid(n: int, ncols: int = 3, size: float = 3.4) -> tuple[plt.Figure, list[plt.Axes]]:
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * 0.85 * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def fraction_axis(ax: plt.Axes, labels: Sequence[str]) -> None:
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("fraction of input-dependent heads")
    ax.grid(alpha=0.3)


def curve_line(ax: plt.Axes, rows: pd.DataFrame, labels: Sequence[str], label: str, *, shift: float = 0.0,
           **style) -> None:
    """One line with its 95% interval as error bars, moved `shift` along x so that several lines' bars stay apart."""
    rows = rows.set_index("fraction_label").reindex(labels)
    x = [i + shift for i in range(len(labels))]
    ax.errorbar(x, rows["mean"], yerr=rows["ci95"].fillna(0), marker="o", markersize=4, capsize=2.5, label=label,
                **style)


def x_shifts(n: int, spread: float = 0.3) -> list[float]:
    """x offsets of `n` lines drawn at the same fractions, centred on each fraction."""
    return [0.0] if n == 1 else [spread * (i / (n - 1) - 0.5) for i in range(n)]


def legend_outside(fig: plt.Figure, axes: Sequence[plt.Axes], extra: Sequence = (), last: Sequence[str] = ()) -> None:
    """One legend for every panel, right of them, each label once; `extra` handles next, entries labelled `last`
    at the end."""
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


def fraction_labels(curves: pd.DataFrame) -> list[str]:
    present = set(curves["fraction_label"])  # plotted from all heads input-dependent to none
    return [f for f in PAPER_FRACTIONS if f in present] + sorted(present - set(PAPER_FRACTIONS))


def _metric_name(rows: pd.DataFrame) -> str:
    metric = rows["metric"].iloc[0] if "metric" in rows and len(rows) else ""
    return METRIC_NAMES.get(metric, metric)


def fraction_curves(curves: pd.DataFrame, *, by: str = "model", title: str = "", learns: pd.DataFrame | None = None,
                    unread: dict[str, str] | None = None,
                    unread_lines: Mapping[tuple[str, str], str] | None = None, paper: bool = True) -> plt.Figure:
    """Fig. 2 (and 5, 6): one panel per task, metric vs fraction with 95% intervals, one line per `by` value.

    `learns` dashes the majority class where a probe does not beat it; `unread` (task: why) and `unread_lines`
    ((task, line): why) mark what the claims do not read; pooled points are squares; `paper` adds Table 1's scores."""
    if curves.empty:
        raise ValueError("no results to plot: run the section's grid first")
    tasks = list(dict.fromkeys(curves["task"]))
    labels = fraction_labels(curves)
    lines = list(dict.fromkeys(curves[by]))
    names = _line_labels(by, lines)
    fig, axes = _grid(len(tasks), size=4.6)
    for ax, task in zip(axes, tasks):
        rows = curves[curves.task == task]
        for key, shift in zip(lines, x_shifts(len(lines))):
            group = rows[rows[by] == key]
            why = (unread_lines or {}).get((task, key))
            style = dict(linestyle="--", markerfacecolor="white") if why else {}
            label = names[key] + ("\n" + "\n".join(textwrap.wrap(f"not read: {why}", 44)) if why else "")
            if len(group):
                color = plt.get_cmap("tab10")(lines.index(key) % 10)
                curve_line(ax, group, labels, label, shift=shift, color=color, **style)
                _pooled_points(ax, group, labels, shift, color, style.get("markerfacecolor"))
        if paper:
            _paper_marks(ax, task, rows, labels)
        fraction_axis(ax, labels)
        ax.set_title(task + _panel_note(learns, task, rows, unread, ax), fontsize=10)
        ax.set_ylabel(_metric_name(rows))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    legend_outside(fig, axes, _bar_entries(curves), last=(PAPER_TABLE1_LABEL,))
    return fig


def _paper_marks(ax: plt.Axes, task: str, rows: pd.DataFrame, labels: Sequence[str]) -> None:
    """Table 1's RoBERTa-base scores on `task` as hollow diamonds: the original at 1, the panel's kind at 0."""
    if "constants" in rows:
        kinds = set(rows.loc[rows["fraction_label"] == "0", "constants"].dropna())
        kind = kinds.pop() if len(kinds) == 1 else None
    else:
        kind = "average"
    points = [(labels.index(f), paper_score(task, k)) for f, k in (("1", NONE), ("0", kind)) if f in labels and k]
    points = [(x, y) for x, y in points if y is not None]
    if points:
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="D", label=PAPER_TABLE1_LABEL, zorder=3, **PAPER_STYLE)


def _panel_note(learns: pd.DataFrame | None, task: str, rows: pd.DataFrame, unread: dict[str, str] | None,
                ax: plt.Axes) -> str:
    """Why the claims do not read a panel's task, for its title ("" where they do); dashes the majority class."""
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
    """How a legend names each line: a model by its short name, a head order as the pages name it."""
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
    """The majority class's score on `task` where a probe of `models` does not beat it (else None)."""
    if learns is None or learns.empty:
        return None
    table = learns.reset_index()
    rows = table[(table["task"] == task) & table["model"].isin(models)]
    return float(rows["majority"].iloc[0]) if len(rows) and not rows["learns"].astype(bool).all() else None


def learning_curves(curves: pd.DataFrame, baselines: pd.DataFrame | None = None, *, title: str = "",
                    baseline: str = "majority", baseline_label: str = "majority class",
                    grid_points: pd.DataFrame | None = None) -> plt.Figure:
    """One panel per task: the original-attention probe's metric (95% interval) against training examples, with
    `baselines`' column `baseline` dashed and the grid's own probe (`grid_points`) marked apart."""
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
    legend_outside(fig, axes)
    return fig


def constant_heatmaps(matrices: torch.Tensor, heads: Sequence[tuple[int, int]], *, length: int | None = None,
                      title: str = "") -> plt.Figure:
    """Fig. 4: heatmaps of `heads`' constant matrices, rows renormalised; `length` keeps that many slots + the last."""
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
    """A head's constant matrix beside its live attention on one input; past `max_labels` tokens every k-th slot is
    labelled (``slot:token``)."""
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
    """Write `fig` as ``<name>.png`` and ``<name>.svg`` under `folder`, atomically, leaving a file that draws the same
    (`same_drawing`) as it is; returns the paths."""
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


#: An SVG clip path's id: a hash of coordinates that float rounding changes while the drawing stays the same.
_CLIP_ID = re.compile(rb"\bp[0-9a-f]{10}\b")


def same_drawing(old: bytes, new: bytes) -> bool:
    """Whether two files of a figure draw the same: equal bytes, or SVGs equal but for their clip paths' ids."""
    if old == new:
        return True

    def numbered(svg: bytes) -> bytes:
        ids: dict[bytes, bytes] = {}
        return _CLIP_ID.sub(lambda m: ids.setdefault(m[0], b"clip%d" % len(ids)), svg)

    return old.lstrip().startswith((b"<?xml", b"<svg")) and numbered(old) == numbered(new)
