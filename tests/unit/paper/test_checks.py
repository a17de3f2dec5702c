"""The notebooks' table checks: a line no CPU changes when the rules hold, an error naming the rule when one breaks."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from papa.paper.checks import TableCheckError, check_table


def _learns() -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples([("m", "cola"), ("m", "sst2")], names=["model", "task"])
    return pd.DataFrame({"mean": [0.1234567, 0.80001], "majority": [0.0, 0.509], "learns": [True, False]},
                        index=index)


def test_the_line_holds_structure_and_rules_not_values(capsys):
    table = _learns()
    check_table(table, "probes", between={"mean": (-1, 1)}, allowed={"learns": [True, False]})
    line = capsys.readouterr().out
    assert line == ("probes: 2 rows (by model, task: m/cola, m/sst2) x 3 columns [mean, majority, learns]; "
                    "mean in [-1, 1]; learns in {True, False}\n")
    # another CPU's last digits, or another verdict within the vocabulary: the same line
    check_table(table.assign(mean=[0.1234568, 0.79], learns=[True, True]), "probes", between={"mean": (-1, 1)},
                allowed={"learns": [True, False]})
    assert capsys.readouterr().out == line


def test_labels_can_be_left_out(capsys):
    check_table(_learns(), "heads", labels=False)
    assert capsys.readouterr().out == "heads: 2 rows x 3 columns [mean, majority, learns]\n"


def test_rows_that_differ_by_profile_can_be_left_uncounted(capsys):
    """A claim's comparisons differ by profile (the claim tables): the line that nbval compares across profiles
    names the columns and rules only, an empty table's too; a broken rule still fails."""
    verdicts = pd.DataFrame({"verdict": ["holds", "not read", "inconclusive"]})
    check_table(verdicts, "claim", allowed={"verdict": ["holds", "inconclusive", "not read"]}, counted=False)
    check_table(verdicts.iloc[:1], "claim", allowed={"verdict": ["holds", "inconclusive", "not read"]}, counted=False)
    check_table(verdicts.iloc[:0], "claim", allowed={"verdict": ["holds", "inconclusive", "not read"]}, counted=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["claim: 1 columns [verdict]; verdict in {holds, inconclusive, not read}"] * 3
    with pytest.raises(TableCheckError, match="holds \\['maybe'\\]"):
        check_table(verdicts.assign(verdict="maybe"), "claim", allowed={"verdict": ["holds"]}, counted=False)


@pytest.mark.parametrize("change, rule", [
    (dict(mean=[0.1, 1.5]), r"outside \[-1, 1\]"),
    (dict(mean=[0.1, math.nan]), "column 'mean' holds NaN"),
    (dict(mean=[0.1, math.inf]), "infinite"),
    (dict(learns=["yes", False]), "column 'learns' holds \\['yes'\\]"),
])
def test_a_broken_rule_is_named(change, rule):
    with pytest.raises(TableCheckError, match=rule):
        check_table(_learns().assign(**change), "probes", between=(-1, 1), allowed={"learns": [True, False]})


def test_nan_where_allowed_and_empty_tables(capsys):
    check_table(_learns().assign(mean=[0.1, math.nan]), "drops", nan_ok=["mean"])
    check_table(pd.DataFrame(), "ranks")
    assert capsys.readouterr().out.splitlines()[-1] == "ranks: empty"
    with pytest.raises(TableCheckError, match="no column 'verdict'"):
        check_table(_learns(), "probes", allowed={"verdict": ["holds"]})


def test_a_series_is_checked_as_one_column(capsys):
    check_table(pd.Series({"diagonal": 0.5, "sink": 0.25}), "shares", between=(0, 1))
    assert capsys.readouterr().out == "shares: 2 rows (diagonal, sink) x 1 columns [0]; every value in [0, 1]\n"


def test_ordered_columns(capsys):
    intervals = pd.DataFrame({"value": [0.3, 0.7], "low": [0.2, 0.7], "high": [0.4, math.nan]},
                             index=pd.Index(["diagonal", "special"], name="share"))
    check_table(intervals, "intervals", between=(0, 1), nan_ok=["high"], ordered=("low", "value", "high"))
    assert capsys.readouterr().out.rstrip().endswith("; low <= value <= high")
    with pytest.raises(TableCheckError, match=r"value > high in rows \['diagonal'\]"):
        check_table(intervals.assign(high=[0.25, 0.8]), "intervals", ordered=("low", "value", "high"))
    with pytest.raises(TableCheckError, match="no column 'middle'"):
        check_table(intervals, "intervals", nan_ok=True, ordered=("low", "middle"))


def test_the_profiles_fractions_are_named_not_listed(capsys):
    """The stored notebooks hold the cpu run's check lines and CI runs the quick profile, which runs fewer fractions:
    rows or columns that are fractions print the same line on both."""
    def means(fractions):
        index = pd.MultiIndex.from_tuples([("m", "cola", "lambda"), ("m", "sst2", "lambda")],
                                          names=["model", "task", "selection"])
        return pd.DataFrame([[0.5] * len(fractions)] * 2, index=index, columns=fractions)

    def ranks(fractions):
        index = pd.MultiIndex.from_tuples([("m", "sst2", f) for f in fractions],
                                          names=["model", "task", "fraction_label"])
        return pd.DataFrame({"lambda": 1, "random": 2}, index=index)

    check_table(means(["1", "1/2", "0"]), "means", between=(-1, 1))
    check_table(ranks(["1/2"]), "ranks", between=(1, 2))
    quick = capsys.readouterr().out
    check_table(means(["1", "1/2", "1/8", "1/16", "0"]), "means", between=(-1, 1))
    check_table(ranks(["1/2", "1/8", "1/16"]), "ranks", between=(1, 2))
    assert capsys.readouterr().out == quick == (
        "means: 2 rows (by model, task, selection: m/cola/lambda, m/sst2/lambda) x columns [the profile's fractions]; "
        "every value in [-1, 1]\n"
        "ranks: rows (by model, task, fraction_label: m/sst2/*; * = each of the profile's fractions) x 2 columns "
        "[lambda, random]; every value in [1, 2]\n")
    check_table(ranks(["1/2"]).rename(index={"sst2": "cola"}, level="task"), "ranks", between=(1, 2))
    assert "m/cola/*" in capsys.readouterr().out  # what is not a fraction is still listed


def test_a_notebook_shows_the_line_folded():
    """In a kernel the line is a <details> element (one folded line in JupyterLab) beside the same line as text/plain,
    both of which nbval compares; the HTML is escaped."""
    from papa.paper.checks import folded_check

    shown = folded_check("a < b", "a < b: 2 rows x 1 columns [x]")
    assert shown["text/plain"] == "a < b: 2 rows x 1 columns [x]"
    assert shown["text/html"].startswith("<details><summary>check: a &lt; b held</summary>")
    assert "a &lt; b: 2 rows x 1 columns [x]" in shown["text/html"] and shown["text/html"].endswith("</details>")
