"""A grid keeps each run's per-example predictions beside its result row, and `load_run_predictions` finds them
(naming the runs that have none)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import CorruptArtifactError, InputError
from papa.core.run_folder import RunFolder
from papa.probing.predictions import metric_on
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.predictions_store import load_run_predictions, predictions_path
from papa.runs.profiles import PROFILES, Profile
from papa.runs.results import ResultsTable


@pytest.fixture
def tiny_grid(monkeypatch):
    monkeypatch.setitem(PROFILES, "predictions-test", Profile(
        "predictions-test", train_limit=8, eval_limit=6, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1,
        seeds=(0, 1), fractions=("1", "0")))


def _model_dir(tmp_path, arch: str):
    path = tmp_path / f"tiny-{arch}"
    tiny_model(arch, lm_head=arch == "llama").save_pretrained(path)
    tiny_tokenizer(arch).save_pretrained(path)
    return path


def _grid(tmp_path, data_dir, task: str, arch: str):
    out = tmp_path / "out"
    cfg = GridConfig(task=task, model=str(_model_dir(tmp_path, arch)), profile="predictions-test",
                     constants=("zeros",), folder=str(out), data_dir=str(data_dir))
    return run_grid(cfg, progress=False), out


def test_every_result_row_has_its_predictions(tmp_path, data_dir, tiny_grid, monkeypatch):
    appended = []
    append = ResultsTable.append

    def checking_append(table, rows):  # the predictions are on disk before their row is
        appended.extend(predictions_path(RunFolder.at(table.path.parent), r.run_id).is_file() for r in rows)
        append(table, rows)

    monkeypatch.setattr(ResultsTable, "append", checking_append)
    rows, out = _grid(tmp_path, data_dir, "sst2", "bert")
    assert len(rows) == 4 and appended == [True] * 4  # 2 fractions x 2 seeds
    assert sorted(p.stem for p in (out / "predictions").iterdir()) == sorted(rows["run_id"])
    found = load_run_predictions(RunFolder.at(out), rows["run_id"])
    assert list(found) == list(rows["run_id"])
    for row in rows.itertuples():
        p = found[row.run_id]
        assert p.num_examples == 6 and p.metadata["value"] == row.value and p.metadata["seed"] == row.seed
        assert metric_on(p, "accuracy") == row.value
    assert rows.equals(ResultsTable(out / "results.csv").read())  # the rows themselves are as they were


def test_an_untrained_lm_stores_its_one_scoring_under_every_seed(tmp_path, data_dir, tiny_grid):
    rows, out = _grid(tmp_path, data_dir, "lm", "llama")
    found = load_run_predictions(RunFolder.at(out), rows["run_id"])
    for fraction, runs in rows.groupby("fraction_label"):
        first, second = (found[r] for r in runs["run_id"])
        assert np.array_equal(first.loss, second.loss) and np.array_equal(first.tokens, second.tokens)
        assert metric_on(first, "neg_log_perplexity") == pytest.approx(runs["value"].iloc[0], rel=1e-6)


def test_runs_without_predictions_are_named(tmp_path, data_dir, tiny_grid):
    rows, out = _grid(tmp_path, data_dir, "sst2", "bert")
    old = ["00000000000000aa", "00000000000000bb"]
    with pytest.raises(CorruptArtifactError, match="2 run.s. have no predictions file.*00000000000000aa, "
                                                   "00000000000000bb; the folder is incomplete"):
        load_run_predictions(RunFolder.at(out), [*rows["run_id"], *old, old[0]])
    first, second = rows["run_id"][:2]
    shutil.copy(predictions_path(RunFolder.at(out), first), predictions_path(RunFolder.at(out), second))
    with pytest.raises(CorruptArtifactError, match=f"holds the predictions of run '{first}', not of '{second}'"):
        load_run_predictions(RunFolder.at(out), [second])
    for bad in ("../results", "", ".hidden"):
        with pytest.raises(InputError, match="is not a run id"):
            load_run_predictions(RunFolder.at(out), [bad])


def test_a_fused_qkv_decoder_runs_a_partial_replacement(tmp_path, data_dir, tiny_grid):
    """GPT-2 makes Q, K and V in one projection, which cannot be sliced: the grid keeps it whole (its replaced heads
    skip Q·Kᵀ anyway) instead of failing at every fraction between 0 and 1."""
    out = tmp_path / "out"
    path = tmp_path / "tiny-gpt2"
    tiny_model("gpt2", lm_head=True).save_pretrained(path)
    tiny_tokenizer("gpt2").save_pretrained(path)
    cfg = GridConfig(task="lm", model=str(path), profile="predictions-test", constants=("zeros",),
                     selections=("random",), fractions=("1/2",), folder=str(out), data_dir=str(data_dir))
    rows = run_grid(cfg, progress=False)
    assert list(rows["fraction_label"]) == ["1/2", "1/2"] and np.isfinite(rows["value"]).all()
