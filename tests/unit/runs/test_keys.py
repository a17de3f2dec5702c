"""One owner of a point's recorded key: the job lister and the grid runner agree even where a fraction rounds to
no head at all, so such a job shows as done once it has run."""
from __future__ import annotations

import pytest

from papa.core.run_folder import RunFolder
from papa.core.settings import Resources
from papa.reproduce.jobs import finished, grid_jobs, plan_units
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.keys import point_key
from papa.runs.profiles import PROFILES, Profile


def test_point_key_follows_the_resolved_head_count():
    # 1/16 of 8 heads rounds down to none: every head is replaced, so no selection is involved.
    none_kept = point_key("average", "lambda", "task", "1/16", total_heads=8, rounding="down")
    assert (none_kept.constants, none_kept.constants_corpus, none_kept.selection) == ("average", "task", "none")
    assert none_kept.replaces_all and not none_kept.keeps_all and none_kept.n_input_dependent == 0
    # 15/16 of 8 rounds to all 8 with "nearest": nothing is replaced, no constants, no corpus, no selection.
    all_kept = point_key("toeplitz", "random", "mnli", "15/16", total_heads=8, rounding="nearest")
    assert (all_kept.constants, all_kept.constants_corpus, all_kept.selection) == ("none", "none", "none")
    # The same fraction of a larger model keeps some heads: the key names what was asked for.
    some = point_key("average", "lambda", "task", "1/16", total_heads=144, rounding="down")
    assert (some.constants, some.constants_corpus, some.selection, some.n_input_dependent) == \
        ("average", "task", "lambda", 9)
    assert point_key("zeros", "lambda", "task", "1/2", total_heads=None, rounding="down").constants_corpus == "none"
    with pytest.raises(ValueError, match="not a whole number of heads"):
        point_key("average", "lambda", "task", "1/16", total_heads=8, rounding="exact")


def test_fraction_rounding_to_no_head_shows_as_done(tmp_path, tiny_dir, data_dir, monkeypatch):
    # Registered in the one PROFILES dict (result rows check names against it), removed after this test.
    monkeypatch.setitem(PROFILES, "keys-test", Profile(
        "keys-test", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1, seeds=(0, 1),
        fractions=("1/16",), rounding="down"))
    out = tmp_path / "out"
    cfg = GridConfig(task="sst2", model=str(tiny_dir), profile="keys-test", folder=str(out), data_dir=str(data_dir),
                     selections=("lambda", "random"))
    jobs = grid_jobs(cfg)
    # Both methods replace every head here: one job per seed, recorded without a selection.
    assert [(j.constants, j.constants_corpus, j.selection, j.fraction, j.seed) for j in jobs] == \
        [("average", "task", "none", "1/16", 0), ("average", "task", "none", "1/16", 1)]
    assert finished(jobs, RunFolder.at(out)) == set()

    rows = run_grid(cfg, progress=False)
    assert set(rows["selection"]) == {"none"} and set(rows["n_input_dependent"]) == {0} and len(rows) == 2
    assert finished(jobs, RunFolder.at(out)) == {j.key for j in jobs}
    prepare, points = plan_units(jobs, RunFolder.at(out))
    assert prepare == [] and points == []  # nothing is dispatched again


def test_each_draw_of_a_ranking_is_prepared_once_and_its_jobs_run_as_the_grid_does(tmp_path, tiny_dir, data_dir,
                                                                                   monkeypatch):
    """lambda and reversed_lambda share one ranking (one preparation), lambda@part1 has its own, random@2 needs
    none; running the units writes the rows the grid writes."""
    from papa.reproduce.jobs import run_unit

    monkeypatch.setitem(PROFILES, "keys-test", Profile(
        "keys-test", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1, seeds=(0,),
        fractions=("1/2",), rounding="down"))
    out = tmp_path / "out"
    cfg = GridConfig(task="sst2", model=str(tiny_dir), profile="keys-test", folder=str(out), data_dir=str(data_dir),
                     selections=("lambda", "reversed_lambda", "lambda@part1", "random@2"))
    jobs = grid_jobs(cfg)
    assert sorted(j.selection for j in jobs) == ["lambda", "lambda@part1", "random@2", "reversed_lambda"]
    prepare, points = plan_units(jobs, RunFolder.at(out), Resources(str(data_dir)))
    assert sorted(u.jobs[0].selection for u in prepare if u.ranking) in (["lambda", "lambda@part1"],
                                                                          ["lambda@part1", "reversed_lambda"])
    for unit in [*prepare, *points]:
        run_unit(unit)
    rankings = sorted(p.name for p in (out / "rankings").glob("*.safetensors"))
    assert len(rankings) == 2 and rankings[0].endswith("-keys-test-part1.safetensors")
    assert finished(jobs, RunFolder.at(out)) == {j.key for j in jobs}
    reference = run_grid(GridConfig(task="sst2", model=str(tiny_dir), profile="keys-test", folder=str(out),
                                    data_dir=str(data_dir), selections=cfg.selections), progress=False)
    assert len(reference) == 4  # every run was already there: the units wrote the grid's rows
