"""Rankings of other seeds and of λ's own learning rate, on a tiny model and real data: what a ranking
records of how far λ moved, where another seed's ranking is saved, and how two seeds' rankings are compared."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from papa.core.errors import InputError
from papa.core.settings import RunSettings
from papa.method.rankings import load_ranking
from papa.runs.lambda_ranking import learn_ranking
from papa.runs.profiles import PROFILES, Profile
from papa.runs.session import GridConfig
from papa.runs.stability import ranking_stability
from papa.sections import head_selection, main_results

RANK_TEST = Profile("rank-test", train_limit=12, eval_limit=8, corpus_limit=8, rank_limit=10, rank_epochs=2,
                    epochs=1, seeds=(0,), fractions=("1/2",))


@pytest.fixture
def cfg(tmp_path, tiny_dir, data_dir, monkeypatch):
    monkeypatch.setitem(PROFILES, "rank-test", RANK_TEST)
    return GridConfig(task="sst2", model=str(tiny_dir), profile="rank-test", folder=tmp_path / "out",
                      data_dir=str(data_dir))


def test_a_ranking_records_how_far_lambda_moved(cfg):
    ranking, path = learn_ranking(cfg, progress=False)
    meta = load_ranking(path).metadata
    assert meta["seed"] == 0 and "seed" not in path.name  # the grid's ranking keeps its name
    assert meta["steps"] == 2  # 10 examples in SST-2's batches of 32: one step an epoch, two epochs
    assert meta["lambda_learning_rate"] == meta["learning_rate"] == 1e-4  # Table 3's, the paper's protocol
    moved = meta["lambda_movement"]
    assert set(moved) == {"lambda_min", "lambda_max", "lambda_spread", "logit_spread", "logit_std"}
    assert moved["lambda_min"] == pytest.approx(ranking.lambdas.min().item())
    assert 0 < moved["lambda_spread"] < 1e-3  # a few steps at 1e-4: λ barely left 0.5


def test_another_seed_is_saved_beside_and_rank_lr_relearns(cfg, monkeypatch, capsys):
    grid, grid_path = learn_ranking(cfg, progress=False)
    other, other_path = learn_ranking(cfg, seed=1, progress=False)
    assert other_path.name == grid_path.name.replace(".safetensors", "-seed1.safetensors")
    assert other.metadata["seed"] == 1 and not torch.equal(grid.lambdas, other.lambdas)
    assert torch.equal(load_ranking(grid_path).lambdas, grid.lambdas)  # seed 0's file is untouched
    assert torch.equal(learn_ranking(cfg, seed=1, progress=False)[0].lambdas, other.lambdas)  # loaded, not learned
    with pytest.raises(InputError, match="seed must be a whole number"):
        learn_ranking(cfg, seed="1", progress=False)

    # The same profile with λ's own learning rate: the saved ranking was learned at the probe's, so it is relearned.
    monkeypatch.setitem(PROFILES, "rank-test", replace(RANK_TEST, rank_lr=0.05))
    fast, path = learn_ranking(cfg, progress=False)
    assert path == grid_path and "lambda_learning_rate=0.0001" in capsys.readouterr().out
    assert fast.metadata["lambda_learning_rate"] == 0.05 and fast.metadata["learning_rate"] == 1e-4
    assert fast.metadata["lambda_movement"]["logit_spread"] > grid.metadata["lambda_movement"]["logit_spread"]


def test_ranking_stability_compares_two_seeds(cfg):
    row = ranking_stability(cfg, seeds=(0, 2), progress=False)
    assert row["task"] == "sst2" and row["seeds"] == [0, 2] and row["steps"] == 2 and row["examples"] == 10
    assert row["lambda_learning_rate"] == 1e-4 and row["profile"] == "rank-test"
    assert row["lambda_spread_seed0"] > 0 and row["logit_std_seed2"] > 0
    assert -1 <= row["spearman"] <= 1 and not math.isnan(row["spearman"])
    assert {"overlap_replaced_1/2", "overlap_kept_1/2", "overlap_replaced_1/8", "overlap_kept_1/8"} <= set(row)
    with pytest.raises(InputError, match="two different seeds"):
        ranking_stability(cfg, seeds=(0, 0), progress=False)


def test_notebook_table_is_the_one_the_claims_gate_on(cfg):
    """Notebook 02's table (`main_results.ranking_stability`), saved where `papa reproduce` reads it, names each model
    as the grid's result rows do, so the claims find a task's ρ and gate its λ-dependent parts on it."""
    import pandas as pd

    from papa.paper import tables as sections
    from papa.paper.claims.scores import ClaimRun
    from papa.runs.experiment import run_grid

    results = run_grid(cfg, progress=False)
    table = main_results.ranking_stability([cfg.model], ["sst2"],
                                       RunSettings(cfg.profile, cfg.folder, cfg.data_dir, progress=False))
    assert list(table.index.names) == ["model", "task"] and len(table) == 1
    assert table.reset_index().model.tolist() == results.model.unique().tolist() == ["tiny-bert"]
    # a model in a folder is named by the folder, as its artifact files are: no path of this machine is recorded
    where = str(Path(cfg.model).parent)
    assert not any(where in text for text in (cfg.folder.results.read_text(),
                                              table.reset_index().to_csv()))
    assert table["seeds"].tolist() == [" ".join(map(str, main_results.STABILITY_SEEDS))]
    saved = sections.save_table(table, cfg.folder, sections.RANKING_STABILITY_TABLE)
    run = ClaimRun(results, cfg.folder, pd.read_csv(saved))
    model = results.model.iloc[0]
    assert table["heads"].tolist() == [learn_ranking(cfg, progress=False)[0].lambdas.numel()]
    # found under the rows' model name; two seeds alone do not say how the order moves with the data
    assert run.unstable(model, "sst2").startswith("sst2's λ rankings drawn on one part of the data only (seed0, seed1)")
    assert "stability not measured" in run.unstable(model, "cola")  # no second seed's ranking: not read


def test_an_interrupted_ranking_resumes_to_the_uninterrupted_one(cfg, monkeypatch):
    """Ctrl-C while λ learns saves where it stopped (<out>/checkpoints); the same call resumes from there and ends
    with the uninterrupted run's λ, saves the curve beside the ranking and removes the checkpoint."""
    import os
    import signal

    from papa.runs import lambda_ranking
    from papa.runs.lambda_curves import checkpoint_path, curve_path, load_curve

    reference, _ = learn_ranking(replace(cfg, folder=f"{cfg.folder}-reference"), progress=False)

    class Interrupted(lambda_ranking.TrainingCheckpoint):
        def due(self, steps: int, last: bool) -> bool:
            if steps == 1:
                os.kill(os.getpid(), signal.SIGINT)
            return super().due(steps, last)

    monkeypatch.setattr(lambda_ranking, "TrainingCheckpoint", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        learn_ranking(cfg, progress=False)
    monkeypatch.undo()
    monkeypatch.setitem(PROFILES, "rank-test", RANK_TEST)
    target = next(cfg.folder.rankings.glob("*.safetensors"), None)
    assert target is None  # no ranking yet, only its checkpoint
    saved = list((cfg.folder.root / "checkpoints").iterdir())
    assert len(saved) == 1
    ranking, path = learn_ranking(cfg, progress=False)
    assert torch.equal(ranking.lambdas, reference.lambdas)
    assert not checkpoint_path(path).exists() and not checkpoint_path(path).parent.exists()
    trace, header = load_curve(curve_path(path))
    assert trace.steps == [2] and header["ranking"] == path.name
    assert torch.equal(trace.lambdas[-1], reference.lambdas)


def test_rankings_of_disjoint_parts_and_other_draws_of_an_order_run_as_selections(cfg):
    """lambda@part1 learns λ on examples outside the grid's subset (saved as -part1); random@2 is another
    permutation; each is a row of its own; another profile's ranking is read, never learned, and its absence says
    how to learn it."""
    from papa.runs.experiment import run_grid

    own, own_path = learn_ranking(cfg, progress=False)
    part, part_path = learn_ranking(cfg, part=1, progress=False)
    assert part_path.name == own_path.name.replace(".safetensors", "-part1.safetensors")
    assert part.metadata["examples"] == own.metadata["examples"] == 10
    assert not torch.equal(part.lambdas, own.lambdas)
    grid = replace(cfg, selections=("lambda", "lambda@part1", "reversed_lambda@part1", "random", "random@2"))
    rows = run_grid(grid, progress=False)
    mid = rows[rows.fraction == 0.5].set_index("selection")
    assert sorted(mid.index) == ["lambda", "lambda@part1", "random", "random@2", "reversed_lambda@part1"]
    assert mid.run_id.nunique() == 5
    with pytest.raises(InputError, match=r"papa rank --task sst2 --profile full"):
        run_grid(replace(cfg, selections=("lambda@full",)), progress=False)
    with pytest.raises(InputError, match="first_to_last is one fixed order and has no variants"):
        run_grid(replace(cfg, selections=("first_to_last@1",)), progress=False)


def test_the_paper_steps_ranking_is_read_beside_the_grids_rankings(cfg, monkeypatch):
    """Notebook 06's tables: the longer-trained ranking's learning curve (where it settled) and how the grid's
    rankings (seed 0, part 1) agree with it; where it is not saved, the note says how to learn it."""

    monkeypatch.setitem(PROFILES, "rank-test-long", replace(RANK_TEST, name="rank-test-long", rank_epochs=6))
    assert head_selection.lambda_settling(cfg.folder, cfg.model, "sst2", "rank-test-long") is None
    assert "papa rank --task sst2 --profile rank-test-long" in head_selection.settling_note(cfg.folder, cfg.model, "sst2",
                                                                                       "rank-test-long")
    monkeypatch.setattr("papa.runs.lambda_ranking.CURVE_EVERY", 2)
    learn_ranking(replace(cfg, profile="rank-test-long"), progress=False)
    learn_ranking(cfg, progress=False)
    learn_ranking(cfg, part=1, progress=False)
    settling = head_selection.lambda_settling(cfg.folder, cfg.model, "sst2", "rank-test-long")
    assert settling.step.tolist() == [2, 4, 6] and settling.spearman.iloc[-1] == pytest.approx(1)
    assert {"lambda_spread", "kept_in_common_1/16", "overlap_kept_1/2"} - set(settling.columns) == \
        {"kept_in_common_1/16"}
    table = head_selection.rankings_agreement(cfg.folder, cfg.model, "sst2", "rank-test-long", "rank-test")
    assert table[["profile", "seed", "part", "steps"]].values.tolist() == [
        ["rank-test", 0, 0, 2], ["rank-test", 0, 1, 2], ["rank-test-long", 0, 0, 6]]
    assert table.spearman.between(-1, 1).all() and table.spearman.iloc[-1] == 1.0
    learn_ranking(replace(cfg, profile="rank-test-long"), part=1, progress=False)  # the reference's own other draw
    table = head_selection.rankings_agreement(cfg.folder, cfg.model, "sst2", "rank-test-long", "rank-test")
    assert table[["profile", "seed", "part"]].values.tolist()[2:] == [["rank-test-long", 0, 1],
                                                                     ["rank-test-long", 0, 0]]
    note = head_selection.settling_note(cfg.folder, cfg.model, "sst2", "rank-test-long")
    assert note.startswith("The rank-test-long profile's λ ranking of tiny-bert on sst2: 6 optimizer steps")
    from docs.claim_pages import paper_steps_ranking

    assert paper_steps_ranking(cfg.folder, cfg.model, "sst2", "rank-test-long").startswith("Not learned in this run")
    head_selection.paper_steps_tables(cfg.folder, cfg.model, "sst2", "rank-test", "rank-test-long")
    page = paper_steps_ranking(cfg.folder, cfg.model, "sst2", "rank-test-long")
    assert "on all 10 training examples for 6 epochs" in page and "| part 1 (disjoint examples) | 2 (10) |" in page
    assert page.count("\n| 6 | ") == 1  # the last record closes the curve's table


def test_a_grid_on_the_whole_split_draws_its_parts_as_two_halves(cfg, tmp_path, monkeypatch):
    """The paper's protocol learns λ on the whole training set, so there is nothing outside it to draw a disjoint
    part from: lambda@part1 and @part2 learn on the two disjoint halves of the split."""
    from papa.tasks.data import half_part

    halves = [half_part(11, k) for k in (1, 2)]
    assert [len(h) for h in halves] == [6, 5] and sorted(halves[0] + halves[1]) == list(range(11))
    assert half_part(11, 1) == halves[0]  # fixed
    with pytest.raises(InputError, match="part 1 or 2"):
        half_part(11, 3)

    glue = tmp_path / "data" / "glue_data" / "SST-2"
    glue.mkdir(parents=True)
    lines = [f"{'a good' if i % 2 else 'a dull'} film number {i}\t{i % 2}" for i in range(11)]
    for split in ("train", "dev"):
        (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    monkeypatch.setitem(PROFILES, "rank-whole", replace(RANK_TEST, name="rank-whole", train_limit=None,
                                                        rank_limit=None))
    whole_cfg = replace(cfg, profile="rank-whole", data_dir=str(tmp_path / "data"))
    whole, _ = learn_ranking(whole_cfg, progress=False)
    first, path = learn_ranking(whole_cfg, part=1, progress=False)
    second, _ = learn_ranking(whole_cfg, part=2, progress=False)
    assert path.name.endswith("-rank-whole-part1.safetensors")
    assert (whole.metadata["examples"], first.metadata["examples"], second.metadata["examples"]) == (11, 6, 5)
    with pytest.raises(InputError, match="part 1 or 2"):
        learn_ranking(whole_cfg, part=3, progress=False)


def test_a_range_of_rho_prints_one_value_where_both_ends_round_alike():
    from papa.runs.stability import rho_span

    assert rho_span([]) == "–"
    assert rho_span([0.5]) == "0.50"
    assert rho_span([0.881, 0.17, 0.5]) == "0.17 to 0.88"
    assert rho_span([0.9401, 0.9449]) == "0.94"


def test_a_grid_on_the_whole_split_with_lambda_on_fewer_draws_parts_outside_lambdas_examples(cfg, tmp_path,
                                                                                             monkeypatch):
    """The LM task's grid takes the whole split (its own head trains nothing on it) while λ learns on a few of its
    examples: a disjoint part is drawn outside those, not refused."""
    glue = tmp_path / "data" / "glue_data" / "SST-2"
    glue.mkdir(parents=True)
    lines = [f"{'a good' if i % 2 else 'a dull'} film number {i}\t{i % 2}" for i in range(12)]
    for split in ("train", "dev"):
        (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(lines) + "\n")
    monkeypatch.setitem(PROFILES, "rank-few", replace(RANK_TEST, name="rank-few", train_limit=None, rank_limit=4))
    few_cfg = replace(cfg, profile="rank-few", data_dir=str(tmp_path / "data"))
    own, _ = learn_ranking(few_cfg, progress=False)
    first, _ = learn_ranking(few_cfg, part=1, progress=False)
    second, _ = learn_ranking(few_cfg, part=2, progress=False)
    assert (own.metadata["examples"], first.metadata["examples"], second.metadata["examples"]) == (4, 4, 4)
    with pytest.raises(InputError, match="part 3 of 4 examples outside it needs 16"):
        learn_ranking(few_cfg, part=3, progress=False)
