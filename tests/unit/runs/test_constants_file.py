"""What `papa probe` and `papa rank` take from `papa extract`, and what they print: a constants file given
(`--constants-file`), found beside the grid's own, or named when it averages another corpus; heads kept and the
majority-class baseline under the table; `papa rank --seed` and the seed-to-seed stability `papa report` prints."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest

from conftest import tiny_model, tiny_tokenizer
from papa import cli
from papa.core.errors import IncompatibleArtifactError, InputError
from papa.core.settings import Resources
from papa.runs.constants_cache import extract_to_file
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.profiles import PROFILES, Profile
from papa.tasks.corpus import CorpusSource

TINY = Profile("constants-file-test", train_limit=12, eval_limit=8, corpus_limit=8, rank_limit=10, rank_epochs=1,
               epochs=1, seeds=(0,), fractions=("1", "1/2", "0"))


@pytest.fixture
def extracted(tmp_path, tiny_dir, data_dir, monkeypatch):
    """`papa extract` of 10 SST-2 sentences (the profile averages 8) at SST-2's length, in the grid's layout."""
    monkeypatch.setitem(PROFILES, TINY.name, TINY)
    constants, path, _ = extract_to_file(str(tiny_dir), CorpusSource("sst2", limit=10), max_length=64,
                                         into=tmp_path / "extracted", layout="official",
                                         resources=Resources(str(data_dir), progress=False))
    return path


def test_a_given_file_is_read_and_its_corpus_recorded(tmp_path, tiny_dir, data_dir, extracted, capsys):
    cfg = GridConfig(task="sst2", model=str(tiny_dir), profile=TINY.name, folder=str(tmp_path / "out"),
                     data_dir=str(data_dir), constants_file=str(extracted))
    rows = run_grid(cfg, progress=True)
    assert f"constants: read {extracted} (10 examples of sst2:train[:10], average)" in capsys.readouterr().out
    replaced = rows[rows.fraction_label != "1"]
    # not the protocol's corpus (8 examples): the rows and the ranking say which it was
    assert set(replaced.constants_corpus) == {"sst2:train[:10]"} and set(rows[rows.fraction_label == "1"]
                                                                         .constants_corpus) == {"none"}
    assert [p.name for p in (tmp_path / "out" / "rankings").glob("*.safetensors")] == [
        "tiny-bert__sst2__lambda-average-sst2-train-10-official-n64-constants-file-test.safetensors"]
    assert not (tmp_path / "out" / "constants").exists()  # nothing extracted


def test_the_grid_names_a_file_over_another_corpus_beside_its_own(tmp_path, tiny_dir, data_dir, extracted, capsys):
    out = tmp_path / "out"
    (out / "constants").mkdir(parents=True)
    extracted.rename(out / "constants" / extracted.name)  # where `papa extract` writes by default for the grid
    cfg = GridConfig(task="sst2", model=str(tiny_dir), profile=TINY.name, folder=str(out), data_dir=str(data_dir),
                     fractions=("0",))
    run_grid(cfg, progress=True)
    err = capsys.readouterr().out
    assert f"constants: {out / 'constants' / extracted.name} averages another corpus than sst2:train[:8]" in err
    assert "constants: extracted 8 examples of sst2:train[:8] ->" in err
    run_grid(replace(cfg, seeds=(1,)), progress=True)  # another run: the grid's own constants, read this time
    assert f"constants: read {out / 'constants'}" in capsys.readouterr().out


def test_a_file_that_does_not_fit_is_refused(tmp_path, tiny_dir, data_dir, extracted, monkeypatch):
    with pytest.raises(InputError, match="no constants file at constants_file="):
        GridConfig(task="sst2", model=str(tiny_dir), profile=TINY.name, constants_file=str(tmp_path / "no")
                   ).resolved()
    other = tmp_path / "tiny-bert-4"
    tiny_model("bert", layers=4, heads=4).save_pretrained(other)
    tiny_tokenizer("bert").save_pretrained(other)
    cfg = GridConfig(task="sst2", model=str(other), profile=TINY.name, folder=str(tmp_path / "out"),
                     data_dir=str(data_dir), constants_file=str(extracted))
    with pytest.raises(IncompatibleArtifactError, match="2 layers x 4 heads"):
        run_grid(cfg, progress=False)


def test_probe_prints_heads_kept_and_the_majority_baseline(tmp_path, tiny_dir, data_dir, extracted, capsys):
    out = str(tmp_path / "out")
    common = ["--task", "sst2", "--model", str(tiny_dir), "--profile", TINY.name, "--data-dir", str(data_dir),
              "--out", out, "--quiet"]
    assert cli.main(["probe", *common, "--constants-file", str(extracted)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert "heads_kept" in printed[0].split()
    kept = {line.split()[8]: line.split()[9] for line in printed[1:4]}
    assert kept == {"1": "8/8", "1/2": "4/8", "0": "0/8"}
    assert printed[4].startswith("majority-class baseline: ") and "accuracy" in printed[4]

    assert cli.main(["report", "--results", f"{out}/results.csv"]) == 0
    assert "λ rankings learned once" in capsys.readouterr().out  # the grid's ranking alone: nothing to gate it on
    assert cli.main(["rank", *common, "--constants-file", str(extracted), "--seed", "1"]) == 0
    capsys.readouterr()
    assert cli.main(["report", "--results", f"{out}/results.csv"]) == 0
    said = capsys.readouterr().out
    assert "λ rankings, every pair of draws" in said and "tiny-bert sst2 (" in said
    assert re.search(r"seed0 +seed1  ρ = [+-]\d\.\d\d", said)
