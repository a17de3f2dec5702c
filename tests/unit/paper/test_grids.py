"""The sections' grid declarations with other draws of a head order: which selections each draws, and another
profile's ranking declared only where it was learned."""
from __future__ import annotations

import pytest

from papa.core.errors import InputError
from papa.paper.grids import head_selection, learned_rankings, main_results, order_draws
from papa.runs.names import RankingName

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
METHODS = ["lambda", "first_to_last", "last_to_first", "random", "reversed_lambda"]


def test_draws_of_each_order_are_declared_at_the_fractions_where_an_order_matters(tmp_path):
    assert set(head_selection([MINILM], ["sst2"], METHODS)) == {"results"}
    declared = head_selection([MINILM], ["sst2"], METHODS, ["part1", "seed1"], 2, ["full"], str(tmp_path))
    draws = declared["draws"]
    assert draws.selections == ("lambda@part1", "lambda@seed1", "reversed_lambda@part1", "reversed_lambda@seed1",
                                "random@1", "random@2")  # the full profile's ranking is not saved: not declared
    assert draws.fractions == ("1/2", "1/8", "1/16")
    assert main_results([MINILM], ["sst2", "cola"], ["part1"])["draws"].selections == ("lambda@part1",)
    assert main_results([MINILM], ["sst2", "cola"], ["part1"])["draws"].fractions == ("1/2",)
    with pytest.raises(InputError, match="one fixed order"):
        order_draws("first_to_last", ["1"])


def test_another_profiles_ranking_is_declared_once_it_is_saved_for_every_task(tmp_path):
    rankings = tmp_path / "rankings"
    rankings.mkdir()
    name = RankingName(MINILM, "sst2", "average", "task", 64, "full", "official").filename
    (rankings / name).write_bytes(b"")
    assert learned_rankings(["full", "cpu"], [MINILM], ["sst2"], str(tmp_path)) == ["full"]
    assert learned_rankings(["full"], [MINILM], ["sst2", "cola"], str(tmp_path)) == []  # CoLA's is not saved
    declared = head_selection([MINILM], ["sst2"], ["lambda", "random"], other_rankings=["full"],
                              out_dir=str(tmp_path))
    assert declared["draws"].selections == ("lambda@full",)
