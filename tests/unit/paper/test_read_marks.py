"""What the claims do not read, marked on a section's tables and figures."""
from __future__ import annotations

import pandas as pd

from papa.paper import read_marks
from papa.paper.claims import RunTables
from papa.paper.read_marks import ReadMarks

LEARNS = pd.DataFrame({"model": ["org/a", "org/a"], "task": ["sst2", "mrpc"], "majority": [0.51, 0.812],
                       "learns": [True, False]}).set_index(["model", "task"])
UNREAD = {"cpu": {"sst2": "its λ ranking is not read: 4 draws agree at ρ 0.54 to 0.92"},
          "full": {"cola": "its λ ranking is not read: 4 draws agree at ρ 0.46 to 0.97"}}


def test_why_names_each_reason_and_whose_ranking():
    marks = ReadMarks("cpu", LEARNS, UNREAD)
    assert marks.why("org/a", "sst2") == "λ ranking unstable (4 draws agree at ρ 0.54 to 0.92)"
    assert marks.why("a", "sst2", "reversed_lambda") == marks.why("org/a", "sst2")  # a table's short model name
    assert marks.why("org/a", "sst2", "random") == ""  # no λ behind a random order
    assert marks.why("org/a", "sst2", "lambda@full") == ""  # the full profile's ranking of sst2 is read
    assert marks.why("org/a", "cola", "lambda@full").startswith("the full profile's λ ranking unstable (4 draws")
    assert marks.why("org/a", "mrpc", "first_to_last") == "probe ≤ majority class (0.812)"
    assert ReadMarks("cpu").why("org/a", "mrpc") == ""  # nothing known, nothing marked


def test_a_table_of_means_says_which_rows_the_claims_read():
    """Notebook 02's table of Fig. 2's means and notebook 06's of Fig. 5's listed every row alike, the unread λ
    orders and MRPC's probe at its majority class among them."""
    index = pd.MultiIndex.from_tuples([("a", "sst2", "lambda"), ("a", "sst2", "lambda@full"), ("a", "mrpc", "lambda")],
                                      names=["model", "task", "selection"])
    table = pd.DataFrame({"1": [0.79, 0.79, 0.815], "1/2": [0.785, 0.794, 0.819]}, index=index)
    marked = ReadMarks("cpu", LEARNS, UNREAD).table(table)
    assert list(marked.columns) == ["1", "1/2", read_marks.CLAIMS_COLUMN]
    assert marked[read_marks.CLAIMS_COLUMN].tolist() == [
        "not read: λ ranking unstable (4 draws agree at ρ 0.54 to 0.92)", "read",
        "not read: probe ≤ majority class (0.812)"]
    assert marked["1/2"].tolist() == table["1/2"].tolist()


def test_lines_key_a_figures_unread_orders_by_task():
    curves = pd.DataFrame({"model": ["org/a"] * 4, "task": ["sst2"] * 4, "fraction_label": ["1", "1/2"] * 2,
                           "selection": ["lambda", "lambda", "random", "random"]})
    assert ReadMarks("cpu", LEARNS, UNREAD).lines(curves) == {
        ("sst2", "lambda"): "λ ranking unstable (4 draws agree at ρ 0.54 to 0.92)"}


def test_of_run_reads_every_profile_whose_rankings_the_run_compared(tmp_path, monkeypatch):
    import papa.paper.claims

    agreement = pd.DataFrame({"model": ["org/a"] * 2, "task": ["sst2", "cola"], "profile": ["quick", "full"]})
    monkeypatch.setattr(papa.paper.claims, "unread_rankings", lambda run, models, profile: {"sst2": f"{profile}: x"})
    run = RunTables(pd.DataFrame(), learns=LEARNS, agreement=agreement)
    marks = ReadMarks.of_run(run, ["org/a"], "quick")
    assert marks.profile == "quick" and dict(marks.unread) == {"full": {"sst2": "full: x"}, "quick": {"sst2": "quick: x"}}
    assert marks.learns is LEARNS
    own = LEARNS.assign(learns=True)
    assert ReadMarks.of_run(run, ["org/a"], "quick", own).learns is own
