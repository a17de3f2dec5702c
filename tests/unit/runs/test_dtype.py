"""The model's dtype: `--dtype` on the commands that load a model, recorded in constants, rankings and result rows,
and part of what a cached artifact or a finished run is (a bfloat16 grid never reuses float32 work)."""
from __future__ import annotations

import json

import pytest
from safetensors import safe_open

import papa
from conftest import tiny_model, tiny_tokenizer
from papa import cli
from papa.method.rankings import load_ranking
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.profiles import PROFILES, Profile


@pytest.fixture
def float16_dir(tmp_path):
    path = tmp_path / "tiny-bert"
    tiny_model("bert").half().save_pretrained(path)
    tiny_tokenizer("bert").save_pretrained(path)
    return path


def test_extract_records_the_dtype(tmp_path, float16_dir, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\na dog ran\n")
    out = tmp_path / "out"
    assert cli.main(["extract", "--model", str(float16_dir), "--task", str(corpus), "--max-length", "16", "--out",
                     str(out), "--dtype", "bfloat16", "--quiet"]) == 0
    (path,) = out.iterdir()
    assert path.name.endswith("-n16-bfloat16.safetensors") and "bfloat16" in capsys.readouterr().out
    meta = papa.load_constants(path).metadata
    assert meta.dtype == "bfloat16" and "dtype" not in meta.preprocessing  # its own field, not the free text
    # The default is float32 even for this float16 checkpoint, and its file keeps the name it always had.
    assert cli.main(["extract", "--model", str(float16_dir), "--task", str(corpus), "--max-length", "16", "--out",
                     str(out), "--quiet"]) == 0
    default = out / path.name.replace("-bfloat16", "")
    assert papa.load_constants(default).metadata.dtype == "float32"


def test_a_grid_in_another_dtype_records_it_and_reuses_nothing(tmp_path, float16_dir, data_dir, monkeypatch):
    monkeypatch.setitem(PROFILES, "dtype-test", Profile(
        "dtype-test", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1,
        seeds=(0,), fractions=("1/2",)))
    out = tmp_path / "out"
    cfg = dict(task="sst2", model=str(float16_dir), profile="dtype-test", folder=str(out), data_dir=str(data_dir))
    float32 = run_grid(GridConfig(**cfg), progress=False)
    bf16 = run_grid(GridConfig(**cfg, dtype="bfloat16"), progress=False)
    assert set(float32["dtype"]) == {"float32"} and set(bf16["dtype"]) == {"bfloat16"}
    assert not set(float32["run_id"]) & set(bf16["run_id"])  # the bfloat16 run did not resume from float32 rows
    # One constants file and one ranking per dtype; only the non-default dtype is named.
    (c_bf16, c_fp32), (r_bf16, r_fp32) = (sorted((out / kind).glob("*.safetensors"), key=lambda p: "bfloat16" not in p.name)
                                          for kind in ("constants", "rankings"))
    assert c_bf16.name.endswith("-n64-bfloat16.safetensors") and c_fp32.name.endswith("-n64.safetensors")
    assert r_bf16.name.endswith("-dtype-test-bfloat16.safetensors") and r_fp32.name.endswith("-dtype-test.safetensors")
    assert load_ranking(r_bf16).metadata["dtype"] == "bfloat16" and load_ranking(r_fp32).metadata["dtype"] == "float32"
    with safe_open(str(c_bf16), framework="pt") as f:
        assert json.loads(f.metadata()["papa"])["dtype"] == "bfloat16"
    with pytest.raises(ValueError, match="unknown dtype 'half'"):
        GridConfig(**cfg, dtype="half").resolved()
