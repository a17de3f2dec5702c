"""The paper's numbers drawn beside the run's in Figs. 2, 3 and 4, at the paper's coordinates."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from papa.paper import figures
from papa.paper.paper_numbers import (PAPER_DIAGONAL_SHARE, PAPER_SPECIAL_SHARE, alternative_matrices,
                                      performance_vs_drop_points, relative_drops)
from papa.sections import constant_patterns, main_results


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _curves(tasks=(("sst2", "accuracy"), ("cola", "matthews_correlation"), ("mlm", "neg_log_perplexity")),
            labels=("1", "1/2", "0"), constants="average"):
    rows = []
    for model in ("org/a", "org/b"):
        for task, metric in tasks:
            for i, label in enumerate(labels):
                rows.append({"model": model, "task": task, "selection": "lambda", "fraction_label": label,
                             "constants": constants, "metric": metric, "mean": 0.8 - 0.05 * i, "ci95": 0.01})
    return pd.DataFrame(rows)


def _panels(fig):
    return {ax.get_title().split("\n")[0]: ax for ax in fig.axes if ax.get_visible()}


def _paper_lines(ax, label=figures.PAPER_TABLE1_LABEL):
    return [line for line in ax.get_lines() if line.get_label() == label]


def _legend(fig):
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_fig2_marks_table1_at_fractions_1_and_0_of_each_task_the_paper_scores():
    fig = figures.fraction_curves(_curves())
    panels = _panels(fig)
    table = alternative_matrices("base")
    for task in ("sst2", "cola"):
        [line] = _paper_lines(panels[task])
        # "1" and "0" sit at x 0 and 2 of the axis 1, 1/2, 0; the paper's fractions are already the run's scale
        assert list(line.get_xdata()) == [0, 2]
        assert list(line.get_ydata()) == pytest.approx([table.loc["none", task], table.loc["average", task]])
        assert line.get_linestyle() == "None" and line.get_markerfacecolor() == "none"
    assert list(_paper_lines(panels["sst2"])[0].get_ydata()) == pytest.approx([0.91, 0.87])  # Table 1, SST2
    assert list(_paper_lines(panels["cola"])[0].get_ydata()) == pytest.approx([0.47, 0.31])  # Table 1, CoLA (MCC)
    assert not _paper_lines(panels["mlm"])  # the paper gives no MLM score
    # one legend entry for the paper, after the run's lines and what the bars hold
    assert _legend(fig) == ["a", "b", "bars: 95% interval over the seeds", figures.PAPER_TABLE1_LABEL]


def test_fig2_paper_marks_follow_the_constants_and_fractions_drawn():
    # another constants kind at fraction 0 takes its own Table 1 row
    fig = figures.fraction_curves(_curves(tasks=(("mrpc", "f1"),), constants="identity"))
    assert list(_paper_lines(_panels(fig)["mrpc"])[0].get_ydata()) == pytest.approx([0.85, 0.80])
    # no fraction 0 on the axis: the original model's score only
    fig = figures.fraction_curves(_curves(tasks=(("mnli", "accuracy"),), labels=("1", "1/2")))
    [line] = _paper_lines(_panels(fig)["mnli"])
    assert list(line.get_xdata()) == [0] and list(line.get_ydata()) == pytest.approx([0.78])
    # a frame without a constants column: average constants, as the run's Fig. 2 uses
    fig = figures.fraction_curves(_curves(tasks=(("pos", "seqeval_f1"),)).drop(columns="constants"))
    assert list(_paper_lines(_panels(fig)["pos"])[0].get_ydata()) == pytest.approx([0.93, 0.93])
    # and they can be left out
    fig = figures.fraction_curves(_curves(), paper=False)
    assert not any(_paper_lines(ax) for ax in _panels(fig).values())
    assert figures.PAPER_TABLE1_LABEL not in _legend(fig)


def test_fig2_without_any_task_of_the_paper_still_draws():
    fig = figures.fraction_curves(_curves(tasks=(("mlm", "neg_log_perplexity"), ("lm", "neg_log_perplexity"))))
    panels = _panels(fig)
    assert list(panels) == ["mlm", "lm"]
    assert not any(_paper_lines(ax) for ax in panels.values())
    assert figures.PAPER_TABLE1_LABEL not in _legend(fig)


def test_fig3_places_the_papers_roberta_base_and_large_beside_the_run():
    summary = pd.DataFrame({"model": ["org/a", "org/b"], "original": [0.6, 0.7], "relative_drop": [0.05, 0.1]})
    fig = main_results.plot_performance_vs_drop(summary)
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["a", "b"]  # the run's models are annotated, as before
    points = performance_vs_drop_points()
    for model, table in (("RoBERTa-base", "Table 1"), ("RoBERTa-large", "Table 4")):
        [line] = _paper_lines(ax, f"paper, {model} ({table})")
        assert list(line.get_xdata()) == pytest.approx([points.loc[model, "relative_drop"] * 100])
        assert list(line.get_ydata()) == pytest.approx([points.loc[model, "original"]])
        assert line.get_markerfacecolor() == "none"
    # the coordinates are Tables 1 and 4's: six tasks' original scores averaged, the tasks' relative drops averaged
    assert points.loc["RoBERTa-base", "original"] == pytest.approx((0.47 + 0.85 + 0.91 + 0.78 + 0.92 + 0.93) / 6)
    assert points.loc["RoBERTa-large", "original"] == pytest.approx((0.53 + 0.87 + 0.93 + 0.81 + 0.93 + 0.93) / 6)
    assert points.loc["RoBERTa-base", "relative_drop"] == pytest.approx(relative_drops("base")["average"])
    assert points.loc["RoBERTa-base", "relative_drop"] == pytest.approx(0.0946, abs=1e-4)
    assert points.loc["RoBERTa-large", "relative_drop"] == pytest.approx(0.1213, abs=1e-4)
    assert _legend(fig) == ["this run", "paper, RoBERTa-base (Table 1)", "paper, RoBERTa-large (Table 4)"]
    plain = main_results.plot_performance_vs_drop(summary, paper=False)
    assert not [line for line in plain.axes[0].get_lines() if line.get_label().startswith("paper")]
    # a run with no point to place still says so
    empty = main_results.plot_performance_vs_drop(summary.iloc[0:0])
    assert "no model" in empty.axes[0].texts[0].get_text()


def test_fig4_share_bars_carry_the_papers_shares():
    intervals = pd.DataFrame({"value": [0.65, 0.25, 0.15, 0.25, 0.72], "low": [0.62, 0.25, 0.14, 0.24, 0.71],
                              "high": [0.67, 0.25, 0.15, 0.28, 0.73], "heads": 72},
                             index=pd.Index(["diagonal", "special", "both", "neither", "median_spread"], name="share"))
    fig = constant_patterns.pattern_shares(intervals)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["diagonal", "special", "both", "neither"]
    assert [bar.get_height() for bar in ax.patches] == pytest.approx([0.65, 0.25, 0.15, 0.25])
    [diagonal] = _paper_lines(ax, "paper (about 90%)")
    [special] = _paper_lines(ax, "paper (about 40%)")
    assert list(diagonal.get_ydata()) == pytest.approx([PAPER_DIAGONAL_SHARE] * 2) == [0.9, 0.9]
    assert list(special.get_ydata()) == pytest.approx([PAPER_SPECIAL_SHARE] * 2) == [0.4, 0.4]
    # each tick spans its own bar
    for line, bar in ((diagonal, ax.patches[0]), (special, ax.patches[1])):
        assert min(line.get_xdata()) >= bar.get_x() - 1e-9
        assert max(line.get_xdata()) <= bar.get_x() + bar.get_width() + 1e-9
    assert _legend(fig) == ["this run", "paper (about 90%)", "paper (about 40%)"]
    # pattern_summary's series (no intervals) draws too; shares the paper does not give carry no mark
    summary = pd.Series({"heads": 72, "diagonal": 0.65, "sink": 0.24, "median_spread": 0.72})
    ax = constant_patterns.pattern_shares(summary).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["diagonal", "sink"]
    assert len(_paper_lines(ax, "paper (about 90%)")) == 1 and not _paper_lines(ax, "paper (about 40%)")
    ax = constant_patterns.pattern_shares(summary.drop("diagonal")).axes[0]
    assert not [line for line in ax.get_lines() if line.get_label().startswith("paper")]
    assert not [line for line in constant_patterns.pattern_shares(intervals, paper=False).axes[0].get_lines()
                if line.get_label().startswith("paper")]
