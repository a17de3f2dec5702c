"""A grid's step mode (`--steps`, papa.probing.step_modes): it reaches λ learning, frozen points and trained
constants; a row trained in another mode than eager says so in its `extra`, eager rows are as they were, and the run
ids are the same in every mode (the mode changes results by float rounding at most)."""
from __future__ import annotations

import json

import torch

from conftest import tiny_model, tiny_tokenizer
from papa import cli
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.profiles import PROFILES, Profile


def test_compiled_steps_reach_every_training_and_are_recorded(tmp_path, data_dir, monkeypatch):
    model_dir = tmp_path / "tiny-bert"
    tiny_model("bert").save_pretrained(model_dir)
    tiny_tokenizer("bert").save_pretrained(model_dir)
    monkeypatch.setitem(PROFILES, "steps-test", Profile(
        "steps-test", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1,
        seeds=(0,), fractions=("1/2",)))
    real_compile, compiled = torch.compile, []

    def traced(fn, **options):  # aot_eager: traced and partitioned, no code generated (a CPU test's time)
        compiled.append(options.get("fullgraph"))
        return real_compile(fn, **{**options, "backend": "aot_eager", "mode": None})

    monkeypatch.setattr(torch, "compile", traced)
    cfg = dict(task="sst2", model=str(model_dir), profile="steps-test", data_dir=str(data_dir),
               constants=("toeplitz", "trainable_toeplitz"))
    eager = run_grid(GridConfig(**cfg, folder=str(tmp_path / "eager")), progress=False)
    assert not compiled
    steps = run_grid(GridConfig(**cfg, folder=str(tmp_path / "compiled"), steps="compiled"), progress=False)
    # λ learning (one ranking), the frozen point's probe and the trained constants' probe: a compiled loss each
    assert compiled.count(True) >= 3
    assert all("steps" not in json.loads(extra) for extra in eager["extra"])
    assert all(json.loads(extra)["steps"] == "compiled" for extra in steps["extra"])
    assert sorted(eager["run_id"]) == sorted(steps["run_id"]) and len(eager) == 2
    # the λ ranking says how its steps ran where not eagerly (an eager ranking's metadata is as it was)
    from papa.method.rankings import load_ranking

    rankings = {run: load_ranking(next((tmp_path / run / "rankings").glob("*.safetensors"))).metadata
                for run in ("eager", "compiled")}
    assert "step_mode" not in rankings["eager"] and rankings["compiled"]["step_mode"] == "compiled"


def test_graphed_steps_on_the_cpu_are_refused_by_the_cli(tmp_path, capsys):
    assert cli.main(["probe", "--task", "sst2", "--steps", "graphed", "--out", str(tmp_path), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "--steps eager" in err and "--steps compiled" in err and "--device cuda" in err
    assert not any(tmp_path.iterdir())
