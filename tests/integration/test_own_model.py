"""Every section on your own model from one command: `papa reproduce --models DIR --tasks T` runs the
notebooks on a local encoder, into a folder of its own, and `papa jobs list` with the same options lists exactly
the probe runs it made."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import tiny_model, tiny_tokenizer
from papa import cli
from papa.reproduce.batch import run_folder
from papa.runs.profiles import PROFILES
from papa.runs.results import ResultsTable

pytestmark = pytest.mark.integration

#: The smallest profile the notebooks run: one seed, three fractions, 16 examples per split.
TINY = {"name": "own-model-test", "base": "quick", "train_limit": 16, "eval_limit": 16, "corpus_limit": 16,
        "rank_limit": 16, "epochs": 1, "seeds": [0], "fractions": ["1", "1/2", "0"]}


@pytest.fixture
def own(tmp_path):
    """A BERT-architecture encoder in a folder of its own (random weights), and the tiny profile's file."""
    model = tmp_path / "models" / "my-encoder"
    tiny_model("bert", layers=2, heads=4).save_pretrained(model)
    tiny_tokenizer("bert").save_pretrained(model)
    profile = tmp_path / "own-model-test.json"
    profile.write_text(json.dumps(TINY))
    yield model, profile
    PROFILES.pop(TINY["name"], None)


def test_reproduce_on_a_local_encoder_runs_what_jobs_lists(own, tmp_path, data_dir, capsys):
    model, profile = own
    out = tmp_path / "out"
    options = ["--models", str(model), "--tasks", "sst2", "--profile", str(profile), "--data-dir", str(data_dir),
               "--notebooks", "01_method", "02_main_results", "03_constant_patterns", "--out", str(out)]
    assert cli.main(["reproduce", *options, "--quiet"]) == 0
    summary = capsys.readouterr().out
    assert "Fig. 4" in summary  # the closing claims summary reads this run
    rows = ResultsTable(out / "results.csv").read()
    assert set(rows.model) == {"my-encoder"} and set(rows.task) == {"sst2"} and len(rows) == 3
    assert str(model.parent) not in (out / "results.csv").read_text()  # the folder's name, never its path
    for name in ("01_method", "02_main_results", "03_constant_patterns"):
        assert (out / "notebooks" / f"{name}.ipynb").is_file()

    assert cli.main(["jobs", "list", *options]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[-1] == f"3 of 3 jobs done ({out}/results.csv)"
    keys = {line.split()[2] for line in listed[:-1]}
    assert keys == {"|".join(str(v) for v in (r.model, r.task, r.constants, r.constants_corpus, r.selection,
                                                r.fraction_label, r.seed, r.profile, r.layout, r.probe_inputs))
                    for r in rows.itertuples()}


def test_the_default_folder_is_named_for_the_run():
    assert run_folder("quick") == Path("artifacts/quick")  # the paper's own keeps its folder
    assert run_folder("cpu", ["/home/someone/models/my-encoder"], ["sst2", "cola"]) == \
        Path("artifacts/cpu--my-encoder--sst2+cola")
    assert run_folder("quick", ["roberta-base", "microsoft/deberta-base"]) == \
        Path("artifacts/quick--roberta-base+microsoft--deberta-base")
    assert run_folder("profiles/mine.json", None, ["sst2"]) == Path("artifacts/mine--sst2")
