"""The sections' grid declarations with other draws of a head order: which selections each draws, and another
profile's ranking declared only where it was learned."""
from __future__ import annotations

import pandas as pd
import pytest

from papa.core.errors import InputError
from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.paper.grids import draws_an_order, learned_rankings, order_draws
from papa.runs.names import RankingName
from papa.sections.decoders import grids as decoders
from papa.sections.head_selection import grids as head_selection
from papa.sections.main_results import grids as main_results

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
METHODS = ["lambda", "first_to_last", "last_to_first", "random", "reversed_lambda"]


def test_draws_of_each_order_are_declared_at_the_fractions_where_an_order_matters(tmp_path):
    assert set(head_selection([MINILM], ["sst2"], METHODS)) == {"results"}
    declared = head_selection([MINILM], ["sst2"], METHODS, ["part1", "seed1"], 2, ["full"], RunFolder.at(tmp_path))
    draws = declared["draws"]
    assert draws.selections == ("lambda@part1", "lambda@seed1", "reversed_lambda@part1", "reversed_lambda@seed1",
                                "random@1", "random@2")  # the full profile's ranking is not saved: not declared
    assert draws.fractions == ("1/2", "1/8", "1/16")
    assert main_results([MINILM], ["sst2", "cola"], ["part1"])["draws"].selections == ("lambda@part1",)
    assert main_results([MINILM], ["sst2", "cola"], ["part1"])["draws"].fractions == ("1/2",)
    with pytest.raises(InputError, match="one fixed order"):
        order_draws("first_to_last", ["1"])


def test_a_decoder_draws_its_orders_again_as_the_encoders_sections_do():
    """Notebook 08: the LM objective under every drawn order where an order matters (Fig. 5), the probes under the λ
    draws at 1/2 (Fig. 2); without draws, the grids it declared before."""
    plain = decoders("smollm2", ["sst2", "pos"], ["lambda", "random", "first_to_last"])
    assert set(plain) == {"lm", "lm_probe", "lm_probe_sizes", "probes"}
    # the LM probe's learning curve: the cpu profile's sizes, fraction 1, each under its curve point's profile
    curve = plain["lm_probe_sizes"].configs(RunSettings("cpu", "x"))
    # the point at the profile's own size (240 paragraphs) is the profile's own run, not a second one
    assert [c.profile for c in curve] == ["cpu-lm_probe-n60", "cpu-lm_probe-n120", "cpu"]
    assert {c.fractions for c in curve} == {("1",)} and plain["lm_probe_sizes"].configs(RunSettings("quick", "x")) == []
    declared = decoders("smollm2", ["sst2", "pos"], ["lambda", "random", "first_to_last"], None, ["part1", "seed1"], 2)
    assert declared["draws_lm"].tasks == ("lm",) and declared["draws_lm"].fractions == ("1/2", "1/8", "1/16")
    assert declared["draws_lm"].selections == ("lambda@part1", "lambda@seed1", "random@1", "random@2")
    assert declared["draws"].tasks == ("sst2", "pos") and declared["draws"].fractions == ("1/2",)
    assert declared["draws"].selections == ("lambda@part1", "lambda@seed1")
    assert {k for k in declared if draws_an_order(k)} == {"draws_lm", "draws"}


def test_another_profiles_ranking_is_declared_on_the_tasks_where_it_is_saved(tmp_path):
    """`papa rank --profile full` learns a task at a time: a grid reads the tasks whose ranking is saved, in a grid of
    its own, and the other tasks run without it (before, one task without a ranking kept it off every task)."""
    rankings = tmp_path / "rankings"
    rankings.mkdir()
    name = RankingName(MINILM, "sst2", "average", "task", 64, "full", "official").filename
    (rankings / name).write_bytes(b"")
    assert learned_rankings(["full", "cpu"], [MINILM], ["sst2"], RunFolder.at(tmp_path)) == {"full": ("sst2",)}
    assert learned_rankings(["full"], [MINILM], ["cola", "sst2"], RunFolder.at(tmp_path)) == {"full": ("sst2",)}
    assert learned_rankings(["full"], [MINILM], ["cola"], RunFolder.at(tmp_path)) == {}
    declared = head_selection([MINILM], ["cola", "sst2"], ["lambda", "random", "reversed_lambda"],
                              other_rankings=["full"], folder=RunFolder.at(tmp_path))
    assert set(declared) == {"results", "ranking@full"}
    assert declared["ranking@full"].tasks == ("sst2",)
    assert declared["ranking@full"].selections == ("lambda@full", "reversed_lambda@full")
    assert declared["ranking@full"].fractions == ("1/2", "1/8", "1/16")
    main = main_results([MINILM], ["cola", "sst2"], ["part1"], ["full"], RunFolder.at(tmp_path))
    assert main["draws"].tasks == ("cola", "sst2") and main["draws"].selections == ("lambda@part1",)
    assert main["ranking@full"].tasks == ("sst2",) and main["ranking@full"].selections == ("lambda@full",)
    assert main["ranking@full"].fractions == ("1/2",)
    assert "ranking@full" not in main_results([MINILM], ["cola"], [], ["full"], RunFolder.at(tmp_path))
    assert "ranking@full" not in main_results([MINILM], ["sst2"], [], ["full"])  # no output folder to look in


def test_run_orders_runs_every_grid_that_draws_an_order_again_and_nothing_else(monkeypatch, tmp_path):
    from papa.paper import grids

    rankings = tmp_path / "rankings"
    rankings.mkdir()
    (rankings / RankingName(MINILM, "sst2", "average", "task", 64, "full", "official").filename).write_bytes(b"")
    declared = main_results([MINILM], ["sst2"], ["part1"], ["full"], RunFolder.at(tmp_path))
    ran = []
    monkeypatch.setattr(grids, "run", lambda g, settings: ran.append(g.selections) or pd.DataFrame({"n": [1]}))
    rows = grids.run_orders(declared, RunSettings("cpu", tmp_path))
    assert ran == [("lambda@part1",), ("lambda@full",)] and len(rows) == 2
    assert grids.run_orders(main_results([MINILM], ["sst2"]), RunSettings("cpu", tmp_path)) is None
