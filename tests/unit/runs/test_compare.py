"""Paired comparison of two settings, with the evaluation examples' uncertainty when predictions are stored."""
from __future__ import annotations

import numpy as np
import pytest

from papa.core.errors import CorruptArtifactError
from papa.core.run_folder import RunFolder
from papa.probing.predictions import EvalPredictions
from papa.runs.compare import RunScores, compare, detectable
from papa.runs.predictions_store import save_run_predictions
from papa.runs.results import ResultRow, ResultsTable
from papa.runs.statistics import difference
from papa.tasks.registry import TASKS

SST2_LABELS = TASKS["sst2"].label_names


def _grid(tmp_path, with_predictions: bool):
    """SST-2-like runs in two layouts, 3 seeds; 'sep_last' is right on 2 more examples of 200 for every seed."""
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 2, 200)
    rows = []
    for layout, extra_right in (("official", 0), ("sep_last", 2)):
        for seed in range(3):
            pred = np.where(rng.random(200) < 0.75, ref, 1 - ref)
            wrong = np.flatnonzero(pred != ref)[:extra_right]
            pred[wrong] = ref[wrong]
            run_id = f"{layout}{seed}"
            if with_predictions:
                save_run_predictions(RunFolder.at(tmp_path), run_id, EvalPredictions.from_labels("sentence", pred, ref, SST2_LABELS),
                                     task="sst2", metric="accuracy")
            rows.append(ResultRow(model="m", task="sst2", constants="none", constants_corpus="none",
                                  selection="none", fraction=1.0, fraction_label="1", n_input_dependent=0, seed=seed,
                                  profile="quick", layout=layout, metric="accuracy", value=float((pred == ref).mean()),
                                  run_id=run_id))
    table = ResultsTable(tmp_path / "results.csv")
    table.append(rows)
    return table.read()


def test_compare_pairs_by_seed_and_adds_the_examples(tmp_path):
    results = _grid(tmp_path, with_predictions=True)
    table = compare(results, "layout", "official", "sep_last", folder=RunFolder.at(tmp_path))
    assert len(table) == 1
    row = table.iloc[0]
    assert row["difference"] == pytest.approx(row["other"] - row["reference"])
    assert row["examples"] and row["se_examples"] > 0 and row["seeds"] == 3
    assert row["low"] < row["difference"] < row["high"]
    assert row["detectable"] > row["high"] - row["difference"]  # 80% power needs more than the interval's half
    seeds_only = compare(results, "layout", "official", "sep_last").iloc[0]
    assert not seeds_only["examples"] and seeds_only["difference"] == pytest.approx(row["difference"])


def test_a_folder_missing_some_predictions_is_refused_by_name(tmp_path):
    """Every row is written after its predictions, so a folder that stores them but lacks some is incomplete:
    refused, not read as if the seeds were all the uncertainty there is. A table with no predictions folder at all
    (copied alone, made by hand) is read from its seeds, as with no folder."""
    results = _grid(tmp_path, with_predictions=False)
    bare = RunScores(results, RunFolder.at(tmp_path)).scores("m", "sst2", layout="official")
    assert bare is not None and bare.resampled is None
    assert RunScores(results).scores("m", "sst2", layout="official").resampled is None
    save_run_predictions(RunFolder.at(tmp_path), "sep_last0", EvalPredictions.from_labels("sentence", np.zeros(4, dtype=int),
                                                                            np.zeros(4, dtype=int), SST2_LABELS),
                         task="sst2", metric="accuracy")
    run = RunScores(results, RunFolder.at(tmp_path))
    with pytest.raises(CorruptArtifactError, match="3 run.s. have no predictions file.*official0, official1"):
        run.scores("m", "sst2", layout="official")
    assert run.scores("m", "sst2", label="0") is None


def test_detectable_grows_with_the_standard_error():
    from papa.runs.statistics import Scores

    small = difference(Scores((0, 1, 2), np.array([0.5, 0.6, 0.7]), None),
                       Scores((0, 1, 2), np.array([0.51, 0.61, 0.72]), None))
    large = difference(Scores((0, 1, 2), np.array([0.5, 0.6, 0.7]), None),
                       Scores((0, 1, 2), np.array([0.55, 0.58, 0.75]), None))
    assert 0 < detectable(small) < detectable(large)
    one = difference(Scores((0,), np.array([0.5]), None), Scores((0,), np.array([0.6]), None))
    assert np.isnan(detectable(one))
    with pytest.raises(ValueError, match="compare settings by one of"):
        compare(_grid_frame(), "seed", "0", "1")


def _grid_frame():
    import pandas as pd

    return pd.DataFrame(columns=["model", "task", "seed"])
