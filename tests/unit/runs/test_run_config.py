"""A run's id hashes `papa.runs.keys.run_config`: every setting, always present, with the artifact format."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from papa.core.artifacts import FORMAT
from papa.core.vocabulary import NONE
from papa.runs.keys import PointKey, point_key, run_config
from papa.runs.profiles import get_profile
from papa.runs.results import run_id
from papa.runs.session import GridConfig
from papa.tasks.registry import TASKS

ROOT = Path(__file__).resolve().parents[3]


def _cfg(**given) -> GridConfig:
    base = dict(task="sst2", model="m", profile="cpu", rounding="down", layout="official", dtype="float32",
                probe_inputs="raw", precision="float32", compile=False, batch_order="per_seed")
    return GridConfig(**{**base, **given})


def _config(cfg: GridConfig, kind: str = "average", method: str = "lambda", fraction: str = "1/2") -> dict:
    key = point_key(kind, method, "task", fraction, total_heads=72, rounding=cfg.rounding)
    return run_config(cfg, get_profile(cfg.profile).for_task(cfg.task), key, model=cfg.model, kind=kind,
                      fraction=fraction, constants_corpus=key.constants_corpus,
                      trains_probe=TASKS[cfg.task].trains_probe)


def test_every_setting_is_present_with_the_format():
    config = _config(_cfg())
    assert config["format"] == FORMAT
    assert {"layout", "dtype", "probe_inputs", "precision", "execution", "batch_order", "sample", "rank"} <= set(config)
    assert config["rank"] == [1000, None, None]  # how the λ ranking learned: its examples, epochs and rate
    assert _config(_cfg(), method="random")["rank"] is None
    # every option changes the id, its default included (no setting is left out because it is the default)
    ids = {run_id(**_config(_cfg(**change)), seed=0) for change in
           ({}, {"layout": "sep_last"}, {"dtype": "bfloat16"}, {"probe_inputs": "standardized"},
            {"precision": "bf16"}, {"compile": True}, {"batch_order": "blocks"}, {"rounding": "exact"})}
    assert len(ids) == 8


def test_trained_constants_record_their_own_sizes_and_no_batch_order():
    cfg = _cfg(batch_order="blocks")
    prof = get_profile("cpu").for_task("sst2")
    frozen, trained = _config(cfg), _config(cfg, kind="trainable_average")
    assert frozen["batch_order"] == "blocks" and trained["batch_order"] == "per_seed"
    assert (trained["train_limit"], trained["epochs"]) == (prof.trainable_limit or prof.train_limit,
                                                           prof.trainable_epochs or prof.epochs)
    whole = _config(cfg, kind="trainable_average", fraction="1")  # nothing replaced: nothing trains
    assert whole["constants"] == NONE and whole["batch_order"] == "blocks"


def _profile(name: str, task: str):
    curve = re.fullmatch(r"(\w+)-(\w+)-(n\d+|all)", name)  # a learning curve's point (Profile.curve_profile)
    if curve:
        return get_profile(curve[1]).curve_profile(curve[2], None if curve[3] == "all" else int(curve[3][1:]))
    return get_profile(name).for_task(task)


@pytest.mark.parametrize("table", ["cpu/results.csv", "run_options/cpu/results.csv",
                                   "run_options/bf16_store/results.csv", "cpu_recheck/trained_results.csv"])
def test_the_committed_runs_have_the_ids_run_config_gives_them(table):
    """The stored run is read by run id: each committed row's id is what today's run_config gives its settings, so
    a rerun finds every run cached (and a change to the key fails here, not in a rerun hours long)."""
    rows = pd.read_csv(ROOT / "artifacts" / table, dtype=str, keep_default_na=False)
    for row in rows.itertuples():
        prof = _profile(row.profile, row.task)
        cfg = replace(_cfg(task=row.task, model=row.model, profile=row.profile, layout=row.layout, dtype=row.dtype,
                           probe_inputs=row.probe_inputs, precision=row.precision,
                           compile=row.execution == "compiled", batch_order=row.batch_order), rounding=prof.rounding)
        key = PointKey(row.constants, row.constants_corpus, row.selection, int(row.n_input_dependent),
                       keeps_all=row.constants == NONE, replaces_all=row.fraction_label == "0")
        config = run_config(cfg, prof, key, model=row.model, kind=row.constants, fraction=row.fraction_label,
                            constants_corpus=row.constants_corpus, trains_probe=TASKS[row.task].trains_probe)
        assert run_id(**config, seed=int(row.seed)) == row.run_id, (table, row.Index)
