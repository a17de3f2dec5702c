"""Standardised probe inputs as a run option: decided once per run (the model's default unless asked),
recorded in every result row, job and ranking, computed once per grid point from its training features and stored
with its runs; runs of the paper's raw probe keep the ids, keys and names they always had."""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import CorruptArtifactError, InputError
from papa.core.run_folder import RunFolder
from papa.method.rankings import load_ranking
from papa.probing.standardize import InputStatistics, load_input_statistics, probe_inputs_for, save_input_statistics
from papa.reproduce.jobs import finished, grid_jobs
from papa.runs.experiment import GridConfig, run_grid, statistics_path
from papa.runs.profiles import PROFILES, Profile
from papa.runs.results import ResultsTable, aggregate


def test_the_default_is_the_models():
    assert probe_inputs_for(False, None) == "raw"                       # an encoder: the paper's probe
    assert probe_inputs_for(True, None) == "standardized"               # a causal LM
    assert probe_inputs_for(True, "raw") == "raw"                       # asked for: the paper's on a decoder
    assert probe_inputs_for(True, None, trains_probe=False) == "raw"    # the LM objective has no probe
    with pytest.raises(InputError, match="this task trains no probe"):
        probe_inputs_for(True, "standardized", trains_probe=False)
    with pytest.raises(InputError, match="unknown probe inputs 'whitened'"):
        probe_inputs_for(False, "whitened")


def test_a_grid_resolves_the_models_default(tmp_path, data_dir):
    path = tmp_path / "tiny-llama"
    tiny_model("llama").save_pretrained(path)
    tiny_tokenizer("llama").save_pretrained(path)
    assert GridConfig(task="sst2", model=str(path)).resolved().probe_inputs == "standardized"
    assert GridConfig(task="sst2", model=str(path), probe_inputs="raw").resolved().probe_inputs == "raw"
    assert GridConfig(task="lm", model=str(path)).resolved().probe_inputs == "raw"


@pytest.fixture
def bert_dir(tmp_path):
    path = tmp_path / "tiny-bert"
    tiny_model("bert").save_pretrained(path)
    tiny_tokenizer("bert").save_pretrained(path)
    return path


@pytest.fixture
def profile(monkeypatch):
    monkeypatch.setitem(PROFILES, "inputs-test", Profile(
        "inputs-test", train_limit=12, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1,
        seeds=(0, 1), fractions=("1", "1/2")))
    return "inputs-test"


def test_a_standardized_grid_records_its_rows_and_stores_its_statistics(tmp_path, bert_dir, data_dir, profile):
    out = tmp_path / "out"
    cfg = dict(task="sst2", model=str(bert_dir), profile=profile, folder=str(out), data_dir=str(data_dir))
    assert GridConfig(**cfg).resolved().probe_inputs == "raw"  # a BERT: the paper's probe
    raw = run_grid(GridConfig(**cfg), progress=False)
    std = run_grid(GridConfig(**cfg, probe_inputs="standardized"), progress=False)
    assert set(raw["probe_inputs"]) == {"raw"} and set(std["probe_inputs"]) == {"standardized"}
    assert not set(raw["run_id"]) & set(std["run_id"])  # never resumed from the other's rows
    assert (raw.set_index(["fraction_label", "seed"])["value"] != std.set_index(["fraction_label", "seed"])["value"]
            ).any()  # a different probe ran
    # the paper's probe's runs keep their ids: asking for "raw" is the default, not a new configuration
    again = run_grid(GridConfig(**cfg, probe_inputs="raw"), progress=False)
    assert list(again["run_id"]) == list(raw["run_id"])
    # one statistics file per point (both seeds use it), [L+1, d], over the point's training tokens
    files = sorted((out / "probe_inputs").iterdir())
    assert len(files) == 2
    statistics, meta = load_input_statistics(files[0])
    assert statistics.mean.shape == (3, 32) and (statistics.std > 0).all()
    assert meta["train_examples"] == 12 and meta["point"]["probe_inputs"] == "standardized"
    assert statistics_path(RunFolder.at(out), meta["point_id"]) == files[0]
    # the λ ranking of the standardised grid is its own, named and recorded as such
    rankings = {p.name: load_ranking(p) for p in (out / "rankings").glob("*.safetensors")}
    (std_name,) = [name for name in rankings if "-standardized" in name]
    assert rankings[std_name].metadata["probe_inputs"] == "standardized" and len(rankings) == 2
    # a table never averages the two
    agg = aggregate(ResultsTable(out / "results.csv").read())
    assert set(agg.groupby("probe_inputs")["n"].sum().items()) == {("raw", 4), ("standardized", 4)}


def test_jobs_record_the_probe_inputs(tmp_path, bert_dir, data_dir, profile):
    cfg = dict(task="sst2", model=str(bert_dir), profile=profile, folder=str(tmp_path), data_dir=str(data_dir))
    raw, std = grid_jobs(GridConfig(**cfg)), grid_jobs(GridConfig(**cfg, probe_inputs="standardized"))
    assert raw[0].key.endswith("|raw") and std[0].key == raw[0].key.removesuffix("raw") + "standardized"
    run_grid(GridConfig(**cfg, probe_inputs="standardized"), progress=False)
    assert finished(std, RunFolder.at(tmp_path)) == {j.key for j in std} and not finished(raw, RunFolder.at(tmp_path))


def test_rows_validate_their_probe_inputs():
    from test_results import row

    with pytest.raises(ValueError, match="unknown probe inputs"):
        row(probe_inputs="scaled")


def test_statistics_files_are_validated(tmp_path):
    stats = InputStatistics(torch.zeros(2, 4), torch.ones(2, 4), 10)
    path = save_input_statistics(tmp_path / "s.safetensors", stats, {"point_id": "abc"})
    loaded, meta = load_input_statistics(path)
    assert torch.equal(loaded.mean, stats.mean) and loaded.count == 10 and meta["point_id"] == "abc"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CorruptArtifactError, match="not a readable safetensors file"):
        load_input_statistics(path)
