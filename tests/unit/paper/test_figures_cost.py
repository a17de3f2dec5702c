"""Figures render from section frames and save identically twice; the section 3.4 cost formulas."""
from __future__ import annotations

import re

import pandas as pd
import pytest
import torch

from papa.method import cost
from papa.paper import figures
from papa.sections import main_results


def _curves():
    rows = []
    for model in ("org/a", "org/b"):
        for task, metric in (("sst2", "accuracy"), ("mlm", "neg_log_perplexity")):
            for i, label in enumerate(("1", "1/2", "0")):
                rows.append({"model": model, "task": task, "selection": "lambda", "fraction_label": label,
                             "metric": metric, "mean": 0.9 - 0.1 * i, "ci95": 0.01})
    return pd.DataFrame(rows)


def test_fraction_curves_one_panel_per_task_one_line_per_model():
    fig = figures.fraction_curves(_curves())
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["sst2", "mlm"]
    assert [len(ax.containers) for ax in axes] == [2, 2]  # one line with its error bars per model
    # the models' bars sit apart at each fraction, and one legend sits outside the panels
    xs = [tuple(c.lines[0].get_xdata()) for c in axes[0].containers]
    assert xs[0] != xs[1] and all(ax.get_legend() is None for ax in axes)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    # the paper's values beside the run's, on SST-2 (Table 1 has it; the MLM panel gets none)
    assert len(fig.legends) == 1 and legend == ["a", "b", "bars: 95% interval over the seeds",
                                                "paper, RoBERTa-base (Table 1)"]
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["1", "1/2", "0"]
    assert axes[1].get_ylabel() == "−log perplexity"
    with pytest.raises(ValueError, match="no results"):
        figures.fraction_curves(_curves().iloc[0:0])
    # head orders are named as the pages name them, not by their internal names
    orders = _curves().assign(selection=lambda f: f["model"].map({"org/a": "first_to_last",
                                                                  "org/b": "reversed_lambda@full"}))
    fig = figures.fraction_curves(orders, by="selection")
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["first → last", "reversed λ of the full profile"]


def test_fig5_curves_mark_an_unread_order_and_name_whose_lambda_it_is():
    """"Fig. 5 as the paper draws it" marks the run's own λ where the claims do not read the run's own ranking, names
    whose λ each curve is (the run's own or the full profile's), and says what its bars and squares hold."""
    rows = []
    for i, selection in enumerate(("lambda", "lambda@full", "random")):
        for j, label in enumerate(("1", "1/2", "0")):
            rows.append({"model": "org/a", "task": "sst2", "selection": selection, "fraction_label": label,
                         "metric": "accuracy", "mean": 0.9 - 0.01 * j + 0.001 * i, "ci95": 0.01,
                         "orders": 4 if label == "1/2" and selection != "random" else 1})
    curves = pd.DataFrame(rows)
    fig = figures.fraction_curves(curves, by="selection", unread_lines={("sst2", "lambda"): "λ ranking unstable"})
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0] == "λ, this run's ranking\nnot read: λ ranking unstable"
    assert legend[1:3] == ["λ of the full profile", "random"]
    assert legend[3] == "bars: 95% interval over the seeds" and legend[4].startswith("square: mean over the order's")
    [ax] = [ax for ax in fig.axes if ax.get_visible()]
    own, full, _ = ax.containers
    assert own.lines[0].get_linestyle() == "--" and own.lines[0].get_markerfacecolor() == "white"
    assert full.lines[0].get_linestyle() == "-"
    squares = [line for line in ax.lines if line.get_marker() == "s"]
    assert [len(line.get_xdata()) for line in squares] == [1, 1]  # λ's and λ of the full profile's 1/2, not random's
    assert figures.fraction_curves(curves.assign(orders=1), by="selection").legends[0].get_texts()[0].get_text() \
        == "λ, this run's ranking"


def test_fig2_marks_a_task_whose_probe_does_not_learn_and_fig6_an_unread_objective():
    """At 4befcb8 Fig. 2 drew MRPC's curve like any other although no claim reads it (its probe does not beat the
    majority class), and Fig. 6's MLM panel did not say that a model not pretrained with MLM is not read there."""
    learns = pd.DataFrame({"model": ["org/a", "org/b", "org/a", "org/b"], "task": ["sst2", "sst2", "mlm", "mlm"],
                           "majority": [0.85, 0.85, 0.0, 0.0], "learns": [True, False, True, True]}) \
        .set_index(["model", "task"])
    fig = figures.fraction_curves(_curves(), learns=learns, unread={"mlm": "not read: b not pretrained with MLM"})
    sst2, mlm = [ax for ax in fig.axes if ax.get_visible()]
    assert sst2.get_title() == "sst2\nprobe ≤ majority class (0.850): not read"
    dashed = [line for line in sst2.lines if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and tuple(dashed[0].get_ydata()) == (0.85, 0.85)
    assert mlm.get_title() == "mlm\nnot read: b not pretrained with MLM"
    assert not [line for line in mlm.lines if line.get_linestyle() == "--"]  # both probes learn there
    every = figures.fraction_curves(_curves(), learns=learns.assign(learns=True))
    assert [ax.get_title() for ax in every.axes if ax.get_visible()] == ["sst2", "mlm"]


def test_heatmaps_crop_and_save_deterministically(tmp_path):
    matrices = torch.rand(2, 3, 16, 16)
    fig = figures.constant_heatmaps(matrices, [(0, 1), (1, 2)], length=5)
    shown = fig.axes[0].get_images()[0].get_array()
    assert shown.shape == (6, 6)  # 5 slots and the final [SEP]
    rows = matrices[0, 1] / matrices[0, 1].sum(-1, keepdim=True)
    assert torch.allclose(torch.tensor(shown[5, 5]), rows[15, 15])
    # the ticks name the slots shown, and the jump to the last one is marked (not 0…15 over 6 slots)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0", "4", "15"]
    assert "5–14 not shown" in fig.axes[0].get_xlabel()
    # the two ticks beside the break sit one slot apart: each leans away from the other (they read "415")
    assert [t.get_ha() for t in fig.axes[0].get_xticklabels()[1:]] == ["right", "left"]
    assert [t.get_va() for t in fig.axes[0].get_yticklabels()[1:]] == ["bottom", "top"]
    first = [p.read_bytes() for p in figures.save_figure(fig, tmp_path / "a", "f")]
    second = [p.read_bytes() for p in figures.save_figure(fig, tmp_path / "b", "f")]
    assert first[1] == second[1] and first[1].startswith(b"<?xml")  # the SVG is byte-identical
    assert first[0][:8] == b"\x89PNG\r\n\x1a\n"


def test_a_figure_drawn_again_the_same_keeps_its_file(tmp_path):
    """Float rounding in the layout (another CPU) renames an SVG's clip paths without changing the drawing: the file
    already written stays; another drawing replaces it."""
    fig = figures.constant_heatmaps(torch.rand(1, 2, 8, 8), [(0, 1)], length=4)
    svg = figures.save_figure(fig, tmp_path, "f")[1]
    renamed = re.sub(rb"p[0-9a-f]{10}", lambda m: b"p" + bytes(reversed(m[0][1:])), svg.read_bytes())
    assert renamed != svg.read_bytes() and figures.same_drawing(svg.read_bytes(), renamed)
    svg.write_bytes(renamed)
    figures.save_figure(fig, tmp_path, "f")
    assert svg.read_bytes() == renamed  # the same drawing: not rewritten
    other = figures.constant_heatmaps(torch.rand(1, 2, 8, 8), [(0, 1)], length=4)
    assert not figures.same_drawing(renamed, figures.save_figure(other, tmp_path / "b", "f")[1].read_bytes())
    figures.save_figure(other, tmp_path, "f")
    assert svg.read_bytes() == (tmp_path / "b" / "f.svg").read_bytes()


def test_attention_vs_constant_labels_long_inputs_sparsely():
    short = figures.attention_vs_constant(torch.eye(5), torch.eye(5), list("abcde"))
    assert [t.get_text() for t in short.axes[0].get_xticklabels()] == list("abcde")
    tokens = [f"w{i}" for i in range(500)]
    long = figures.attention_vs_constant(torch.eye(500), torch.eye(500), tokens, max_labels=48)
    labels = [t.get_text() for t in long.axes[1].get_yticklabels()]
    assert len(labels) <= 48 and labels[0] == "0:w0" and labels[1] == "11:w11"


def test_performance_vs_drop_labels_models():
    summary = pd.DataFrame({"model": ["org/a", "org/b"], "original": [0.8, 0.9], "relative_drop": [0.05, 0.1]})
    fig = main_results.plot_performance_vs_drop(summary)
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["a", "b"]


def test_cost_formulas():
    # Paper 3.4 at n = d' = 64: (2*64^3 + 3*64^3) / (64^3 + 64^3) = 2.5.
    assert cost.head_speedup(64, 64) == pytest.approx(2.5)
    assert cost.head_cost(10, 4, constant=True) == 10 * 10 * 4 + 10 * 4 * 4
    # Whole-model ceilings quoted for BERT-base (768/3072) and MiniLM-L6 (384/1536).
    assert cost.model_speedup_ceiling(128, 768, 3072) == pytest.approx(1.213, abs=1e-3)
    assert cost.model_speedup_ceiling(512, 768, 3072) == pytest.approx(1.25, abs=1e-3)
    assert cost.model_speedup_ceiling(128, 384, 1536) == pytest.approx(1.226, abs=1e-3)
    assert cost.model_speedup_ceiling(512, 384, 1536) == pytest.approx(1.294, abs=1e-3)
    assert cost.model_speedup_ceiling(128, 768, 3072, replaced_share=0.0) == 1.0
    with pytest.raises(ValueError, match="share of heads"):
        cost.layer_cost(8, 8, 8, replaced_share=1.5)


def test_learning_curves_plot_each_task_against_its_majority_baseline():
    sizes = pd.DataFrame({"model": ["org/m"] * 3, "task": ["mrpc"] * 3, "metric": ["f1"] * 3,
                          "train_examples": [250, 1000, 3668], "n": [3] * 3, "mean": [0.80, 0.81, 0.81],
                          "ci95": [0.01, 0.005, float("nan")]})
    fig = figures.learning_curves(sizes, pd.DataFrame({"task": ["mrpc"], "majority": [0.812]}))
    ax = fig.axes[0]
    assert ax.get_title() == "mrpc" and ax.get_xscale() == "log"
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [0.812]
    with pytest.raises(ValueError, match="no learning curve"):
        figures.learning_curves(sizes.iloc[:0])
    # the grid's own probe (500 pairs) is marked on the curve, its size a tick; the legend sits beside the panel,
    # where it covers no bar (inside the panel it covered the 1,000-example one)
    point = sizes.iloc[:1].assign(train_examples=500, mean=0.805)
    fig = figures.learning_curves(sizes, pd.DataFrame({"task": ["mrpc"], "majority": [0.812]}), grid_points=point)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["250", "500", "1,000", "3,668"]
    assert ax.get_legend() is None and {t.get_text() for t in fig.legends[0].get_texts()} == {
        "m", "the grid's probe", "majority class"}
    # the LM probe's curve beside the strongest context-free predictor, named as such
    lm = sizes.assign(task="lm_probe", metric="neg_log_perplexity", mean=[-8.0, -7.9, -7.7])
    chance = pd.DataFrame({"model": ["org/m"], "task": ["lm_probe"], "context_free": [-7.8]})
    fig = figures.learning_curves(lm, chance.set_index(["model", "task"]),  # as notebook 08's chance table comes
                                  baseline="context_free", baseline_label="strongest unigram")
    dashed = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [line.get_ydata()[0] for line in dashed] == [-7.8] and dashed[0].get_label() == "strongest unigram"
    assert fig.axes[0].get_xlabel() == "training paragraphs"


def test_fig3_of_one_model_says_it_shows_no_relation():
    one = pd.DataFrame({"model": ["sentence-transformers/all-MiniLM-L6-v2"], "relative_drop": [0.05],
                        "original": [0.6]})
    assert "one model" in main_results.plot_performance_vs_drop(one).axes[0].get_title()
    two = pd.concat([one, one.assign(model="roberta-base", relative_drop=0.1)], ignore_index=True)
    assert main_results.plot_performance_vs_drop(two).axes[0].get_title() == ""
