"""End to end on the offline model and real data: extract -> rank -> probe at fractions 1 and 0, resumable."""
from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest
import torch

from papa import cli
from papa.core.settings import RunSettings
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.profiles import PROFILES, Profile
from papa.runs.results import ResultsTable, aggregate

pytestmark = pytest.mark.integration

TINY = Profile("test", train_limit=48, eval_limit=48, corpus_limit=48, rank_limit=16, rank_epochs=1, epochs=2,
               seeds=(0, 1), fractions=("1", "0"))


@pytest.fixture(autouse=True)
def tiny_profile(monkeypatch):
    monkeypatch.setitem(PROFILES, "test", TINY)


def _cfg(tmp_path, data_dir, **kw):
    return GridConfig(**{"task": "sst2", "profile": "test", "data_dir": str(data_dir), "folder": str(tmp_path), **kw})


def test_extract_rank_probe_table(tmp_path, data_dir, monkeypatch):
    cfg = _cfg(tmp_path, data_dir, fractions=("1", "1/2", "0"))
    rows = run_grid(cfg, progress=False)
    assert len(rows) == 6  # 3 fractions x 2 seeds
    assert set(rows["fraction_label"]) == {"1", "1/2", "0"} and set(rows["seed"]) == {0, 1}
    assert rows.loc[rows.fraction_label == "1", "constants"].eq("none").all()
    zero = rows[rows.fraction_label == "0"]
    assert zero["constants"].eq("average").all() and zero["n_input_dependent"].eq(0).all()
    assert zero["selection"].eq("none").all()  # every head replaced: no selection is involved
    half = rows[rows.fraction_label == "1/2"]
    assert half["selection"].eq("lambda").all() and half["n_input_dependent"].eq(36).all()
    assert rows["value"].between(0, 1).all() and rows["metric"].eq("accuracy").all()
    assert len(list((tmp_path / "constants").glob("*.safetensors"))) == 1
    assert len(list((tmp_path / "rankings").glob("*.safetensors"))) == 1  # learned for fraction 1/2 only
    assert sorted(p.stem for p in (tmp_path / "predictions").glob("*.safetensors")) == sorted(rows["run_id"])
    agg = aggregate(ResultsTable(tmp_path / "results.csv").read())
    assert list(agg["n"]) == [2, 2, 2]

    # A second run finds every piece done: nothing is trained again and the table is unchanged.
    import papa.runs.experiment as experiment

    def fail(*a, **k):
        raise AssertionError("a finished run was recomputed")

    monkeypatch.setattr(experiment, "train_probe", fail)
    monkeypatch.setattr(experiment, "train_probes", fail)
    monkeypatch.setattr("papa.runs.constants_cache.extract_constants", fail)
    monkeypatch.setattr("papa.runs.lambda_ranking.learn_lambdas", fail)
    again = run_grid(cfg, progress=False)
    pd.testing.assert_frame_equal(again, rows)


def test_ranking_of_other_sizes_is_learned_again(tmp_path, data_dir, monkeypatch, capsys):
    """A saved λ ranking is named by profile, not by its sizes: when the profile's ranking subset changes, the
    ranking is learned again instead of being reused."""
    from dataclasses import replace

    from papa.method.rankings import load_ranking

    cfg = _cfg(tmp_path, data_dir, fractions=("1/2",), seeds=(0,))
    run_grid(cfg, progress=False)
    (path,) = (tmp_path / "rankings").glob("*.safetensors")
    assert load_ranking(path).metadata["examples"] == 16
    monkeypatch.setitem(PROFILES, "test", replace(TINY, rank_limit=8))
    run_grid(cfg, progress=False)
    assert load_ranking(path).metadata["examples"] == 8
    assert "examples=16" in capsys.readouterr().out


def test_same_seed_same_rows(tmp_path, data_dir):
    """Determinism on the CPU: the same configuration and seed give identical rows (all but the run time), from
    separately extracted constants. (Across processes and an interruption: test_reliability.py.)"""
    a = run_grid(_cfg(tmp_path / "a", data_dir, fractions=("0",), seeds=(0,)), progress=False)
    b = run_grid(_cfg(tmp_path / "b", data_dir, fractions=("0",), seeds=(0,)), progress=False)
    pd.testing.assert_frame_equal(a.drop(columns="runtime_s"), b.drop(columns="runtime_s"), check_exact=True)


def test_cli_extract_probe_report(tmp_path, data_dir, capsys):
    common = ["--data-dir", str(data_dir), "--quiet"]
    assert cli.main(["extract", "--task", "mrpc", "--limit", "16", "--max-length", "64", "--out", str(tmp_path),
                     *common]) == 0
    assert "16 examples from mrpc:train[:16]" in capsys.readouterr().out
    assert cli.main(["probe", "--task", "sst2", "--profile", "test", "--fractions", "1/2", "--seeds", "0",
                     "--selection", "first_to_last", "--constants", "zeros", "--out", str(tmp_path), *common]) == 0
    out = capsys.readouterr().out
    assert "zeros" in out and "first_to_last" in out
    assert cli.main(["report", "--results", str(tmp_path / "results.csv")]) == 0
    assert "first_to_last" in capsys.readouterr().out
    assert cli.main(["report", "--results", str(tmp_path / "results.csv"), "--task", "cola"]) == 1
    assert cli.main(["probe", "--task", "sst2", "--profile", "test", "--fractions", "1/16", "--rounding", "exact",
                     "--out", str(tmp_path), *common]) == 2
    assert "4.5" in capsys.readouterr().err


def test_cli_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in ("extract", "rank", "probe", "report", "reproduce"):
        assert command in out


def test_trainable_constants_and_another_corpus(tmp_path, data_dir):
    """Table 1's trainable rows and Table 2's constants from another corpus, as grid points at fraction 0."""
    rows = run_grid(_cfg(tmp_path, data_dir, fractions=("0",), seeds=(0,), constants=("trainable_toeplitz",),
                         selections=("lambda", "random")), progress=False)
    assert len(rows) == 1  # fraction 0 needs no selection: one run serves both methods
    assert rows.loc[0, "constants"] == "trainable_toeplitz" and rows.loc[0, "selection"] == "none"
    assert not (tmp_path / "rankings").exists()  # and no ranking was learned for it
    other = run_grid(_cfg(tmp_path, data_dir, fractions=("0",), seeds=(0,), constants_corpus="mrpc"),
                     progress=False)
    assert other.loc[0, "constants_corpus"] == "mrpc"
    assert [p.name.split("__")[1] for p in (tmp_path / "constants").glob("*.safetensors")] == ["mrpc-train-48"]


def test_grid_drops_query_key_of_replaced_heads(tmp_path, data_dir, monkeypatch):
    """Features at a fraction < 1 are computed with the replaced heads' Q/K projections dropped (paper 3.4), which
    gives the same results as computing them."""
    import contextlib

    import papa
    import papa.runs.experiment as experiment
    from papa.method.attention_free import query_key_dropped

    seen = []
    source = experiment.FeatureSource

    def recording_source(model, *args, **kwargs):
        seen.append(query_key_dropped(papa.controller_of(model)))
        return source(model, *args, **kwargs)

    monkeypatch.setattr(experiment, "FeatureSource", recording_source)
    cfg = dict(fractions=("1", "1/2"), seeds=(0,))
    fast = run_grid(_cfg(tmp_path / "fast", data_dir, **cfg), progress=False)
    assert seen == [False, False, True, True]  # fraction 1: train + eval; fraction 1/2: train + eval

    monkeypatch.setattr(experiment, "query_key_dropped_while", lambda ctrl, **_: contextlib.nullcontext())
    plain = run_grid(_cfg(tmp_path / "plain", data_dir, **cfg), progress=False)
    assert plain["value"].tolist() == pytest.approx(fast["value"].tolist(), abs=1e-6)


def test_trained_constants_run_on_their_own_subset(tmp_path, data_dir, monkeypatch):
    """A profile's trainable_limit / trainable_epochs size Table 1's trained-constant runs (the backbone runs every
    step); frozen runs keep the task's sizes, and the run id records what each ran with."""
    sized = Profile("test-trainable", train_limit=48, eval_limit=48, corpus_limit=48, rank_limit=16, rank_epochs=1,
                    epochs=2, seeds=(0,), fractions=("0",), sample="random", trainable_limit=8, trainable_epochs=1)
    monkeypatch.setitem(PROFILES, sized.name, sized)
    cfg = _cfg(tmp_path, data_dir, profile=sized.name, constants=("trainable_average", "average"))
    rows = run_grid(cfg, progress=False).set_index("constants")
    extra = rows["extra"].map(json.loads)
    assert extra["trainable_average"]["train_examples"] == 8 and extra["trainable_average"]["epochs"] == 1
    assert extra["average"]["train_examples"] == 48 and extra["average"]["epochs"] == 2
    plain = run_grid(_cfg(tmp_path / "plain", data_dir, fractions=("0",), seeds=(0,),
                          constants=("trainable_average",)), progress=False)
    assert json.loads(plain.loc[0, "extra"])["train_examples"] == 48
    assert plain.loc[0, "run_id"] != rows.loc["trainable_average", "run_id"]


def test_learning_curve_trains_the_original_probe_on_growing_subsets(tmp_path, data_dir, monkeypatch):
    from papa.paper import grids

    curved = Profile("test-curve", train_limit=48, eval_limit=32, corpus_limit=48, rank_limit=16, rank_epochs=1,
                     epochs=1, seeds=(0, 1), fractions=("1", "0"), sample="random", curves={"sst2": (8, 24)})
    monkeypatch.setitem(PROFILES, curved.name, curved)
    declared = grids.Grids(("sentence-transformers/all-MiniLM-L6-v2",), ("sst2", "cola"), runner="curves")
    sizes = grids.run(declared, RunSettings(curved.name, tmp_path, data_dir, progress=False))
    assert sizes["train_examples"].tolist() == [8, 24] and sizes["task"].eq("sst2").all()
    assert sizes["n"].eq(2).all() and sizes["mean"].between(0, 1).all()
    rows = ResultsTable(tmp_path / "results.csv").read()
    assert set(rows["profile"]) == {"test-curve-sst2-n8", "test-curve-sst2-n24"}  # never mixed with the profile's
    assert rows["fraction_label"].eq("1").all()


def _counting_backbone(monkeypatch) -> list[int]:
    """The batch sizes the grid's backbone is run on from now on (a hook on the model the grid loads)."""
    import papa.runs.session as session
    from papa.method.architectures import backbone

    passed = []
    load = session._load_model

    def counted(*args, **kwargs):
        model, tokenizer = load(*args, **kwargs)
        handle = backbone(model).register_forward_pre_hook(
            lambda module, args, kwargs: passed.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
        _HOOKS.append(handle)  # removed by the five_seeds fixture when the test ends
        return model, tokenizer

    monkeypatch.setattr(session, "_load_model", counted)
    return passed


_HOOKS: list = []


@pytest.fixture
def five_seeds(monkeypatch):
    five = Profile("test-five", train_limit=48, eval_limit=32, corpus_limit=48, rank_limit=16, rank_epochs=1,
                   epochs=None, seeds=(0, 1, 2, 3, 4), fractions=("1", "0"))
    monkeypatch.setitem(PROFILES, five.name, five)
    yield five.name
    while _HOOKS:
        _HOOKS.pop().remove()


def test_the_backbone_runs_once_per_example_per_head_configuration(tmp_path, data_dir, monkeypatch, five_seeds):
    """5 seeds x Table 3's epochs (SST-2: 4) at two head configurations, with the padded features over the memory
    budget (as a whole training set's are everywhere): the backbone sees each training and evaluation example once
    per configuration. Before features were stored it saw each training example seeds x epochs times."""
    passed = _counting_backbone(monkeypatch)
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", str(2 / 2**10))  # 2 KiB: far below even the stored features
    rows = run_grid(_cfg(tmp_path, data_dir, profile=five_seeds, constants=("toeplitz",)), progress=False)
    assert len(rows) == 10 and rows["extra"].map(lambda e: json.loads(e)["epochs"]).eq(4).all()
    assert rows["extra"].map(lambda e: json.loads(e)["feature_store"]).eq("disk").all()
    assert sum(passed) == 2 * (48 + 32)  # toeplitz constants: no extraction pass, no λ
    assert not list((tmp_path / "features").iterdir())  # the stores are removed after their point


def test_blocks_are_a_batch_order_of_their_own(tmp_path, data_dir, monkeypatch, five_seeds):
    """batch_order="blocks": the backbone runs over each training example once per epoch (not seeds x epochs
    times); the rows say so and are runs of their own, never averaged with the protocol's."""
    passed = _counting_backbone(monkeypatch)
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", str(20 * 7 * 64 * 384 * 4 / 2**30))  # blocks of 20 -> 16 examples
    cfg = _cfg(tmp_path, data_dir, profile=five_seeds, constants=("toeplitz",), fractions=("0",))
    blocks = run_grid(replace(cfg, batch_order="blocks"), progress=False)
    assert sum(passed) == 4 * 48 + 32 and blocks["batch_order"].eq("blocks").all()
    assert blocks["extra"].map(lambda e: json.loads(e)["feature_store"]).eq("blocks").all()
    plain = run_grid(cfg, progress=False)
    assert set(plain["run_id"]).isdisjoint(blocks["run_id"]) and plain["batch_order"].eq("per_seed").all()
    assert len(aggregate(ResultsTable(tmp_path / "results.csv").read())) == 2


def test_chunks_store_the_split_once_and_read_it_in_chunks(tmp_path, data_dir, monkeypatch, five_seeds):
    """batch_order="chunks" with nothing fitting memory: the split goes to disk once (the backbone sees each example
    once per configuration, as in the protocol's order) and is read in chunks; the rows say so and are runs of
    their own. bf16_store keeps the stores in bfloat16 (recorded as the precision) and is refused in blocks."""
    from papa.core.errors import InputError

    passed = _counting_backbone(monkeypatch)
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", str(2 / 2**10))  # 2 KiB: only the disk holds them
    cfg = _cfg(tmp_path, data_dir, profile=five_seeds, constants=("toeplitz",), fractions=("0",))
    chunks = run_grid(replace(cfg, batch_order="chunks"), progress=False)
    extra = chunks["extra"].map(json.loads)
    assert sum(passed) == 48 + 32 and chunks["batch_order"].eq("chunks").all()
    assert extra.map(lambda e: e["store_path"]).eq("disk_streamed").all() and len(set(chunks["value"])) > 1
    half = run_grid(replace(cfg, precision="bf16_store"), progress=False)
    assert half["precision"].eq("bf16_store").all() and set(half["run_id"]).isdisjoint(chunks["run_id"])
    assert half["extra"].map(lambda e: json.loads(e)["store_path"]).eq("disk_bf16").all()
    with pytest.raises(InputError, match="'bf16_store' keeps the stored features in bfloat16"):
        run_grid(replace(cfg, precision="bf16_store", batch_order="blocks"), progress=False)


def test_trained_constants_are_evaluated_as_trained(tmp_path, data_dir, monkeypatch):
    """The evaluation features of a trained-constants run are computed with the constants the probe trained with."""
    import papa
    import papa.runs.experiment as experiment

    made = []
    source = experiment.FeatureSource

    def recording_source(model, data, **kwargs):
        made.append((kwargs["trainable_backbone"], papa.controller_of(model).constants.detach().clone()))
        return source(model, data, **kwargs)

    monkeypatch.setattr(experiment, "FeatureSource", recording_source)
    run_grid(_cfg(tmp_path, data_dir, fractions=("0",), seeds=(0,), constants=("trainable_toeplitz",)),
             progress=False)
    (_, initial), (trains, trained) = made  # the training source (the backbone trains), then the evaluation one
    assert made[0][0] and not trains
    assert not torch.equal(initial, trained)


def test_precision_and_compilation_are_recorded_and_keyed(tmp_path, data_dir):
    """A bf16 run is a run of its own (its own id, its own precision column), close to the float32 one."""
    plain = run_grid(_cfg(tmp_path, data_dir, fractions=("1",), seeds=(0,)), progress=False)
    half = run_grid(_cfg(tmp_path, data_dir, fractions=("1",), seeds=(0,), precision="bf16"), progress=False)
    assert plain.loc[0, ["precision", "execution"]].tolist() == ["float32", "eager"]
    assert half.loc[0, ["precision", "execution"]].tolist() == ["bf16", "eager"]
    assert half.loc[0, "run_id"] != plain.loc[0, "run_id"]
    assert abs(half.loc[0, "value"] - plain.loc[0, "value"]) < 0.15
    assert len(ResultsTable(tmp_path / "results.csv").read()) == 2
