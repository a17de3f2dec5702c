"""The probe diagnosis (papa.sections.decoders.probe_diagnosis, artifacts/probe_diagnosis/probe_diagnosis.py) on the
real offline model and SST-2: both probes' rows, with sane numbers."""
from __future__ import annotations

import runpy

import pytest

import papa
from papa.core.settings import Resources
from papa.core.vocabulary import PROBE_INPUTS
from papa.sections.decoders import probe_diagnosis
from papa.runs.profiles import get_profile

from conftest import REPO

pytestmark = pytest.mark.integration
#: The study's script, beside its folder's README (its tables are quoted in docs/decoders.md).
SCRIPT = REPO / "artifacts" / "probe_diagnosis" / "probe_diagnosis.py"


def test_the_diagnosis_on_minilm(data_dir):
    model, tokenizer = papa.load_model("all-MiniLM-L6-v2")
    table, scale = probe_diagnosis(model, tokenizer, "sst2", profile="cpu",
                                   resources=Resources(str(data_dir), progress=False), train_limit=48, eval_limit=32,
                                   epochs=1)
    assert tuple(table.index) == PROBE_INPUTS
    assert (table.attrs["train"], table.attrs["eval"], table.attrs["epochs"]) == (48, 32, 1)
    # a profile smaller than the sizes asked for caps them: the quick smoke run diagnoses its own few examples
    smoke, _ = probe_diagnosis(model, tokenizer, "sst2", profile="quick",
                               resources=Resources(str(data_dir), progress=False), train_limit=48, eval_limit=32)
    quick = get_profile("quick")
    assert (smoke.attrs["train"], smoke.attrs["eval"], smoke.attrs["epochs"]) == (quick.train_limit,
                                                                                 quick.eval_limit, quick.epochs)
    shares = ["saturated_at_init", "constant_predictions_at_init", "saturated_after", "constant_predictions_after",
              "accuracy"]
    assert ((table[shares] >= 0) & (table[shares] <= 1)).all().all()
    # MiniLM's features are LayerNorm'd: the paper's probe starts unsaturated; standardised ones are O(1) by design
    assert table.loc["raw", "saturated_at_init"] < 0.1
    assert table.loc["standardized", "preactivation_std_at_init"] < 2
    assert len(scale) == 5 and scale["rms"].is_monotonic_decreasing
    assert ((scale["std_over_rms"] >= 0) & (scale["std_over_rms"] <= 1 + 1e-9)).all()


def test_the_benchmark_prints_both_probes(data_dir, capsys):
    main = runpy.run_path(str(SCRIPT))["main"]
    main(["--model", "all-MiniLM-L6-v2", "--task", "sst2", "--train", "32", "--eval", "16", "--epochs", "1",
          "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    assert "32 training / 16 evaluation examples, 1 epochs" in out
    assert [line.split()[0] for line in out.splitlines() if line.startswith(PROBE_INPUTS)] == list(PROBE_INPUTS)


def test_a_task_without_a_trained_probe_is_refused_before_loading(capsys):
    with pytest.raises(SystemExit):
        runpy.run_path(str(SCRIPT))["main"](["--task", "lm"])
    assert "--task must be a sentence, pair or token task" in capsys.readouterr().err
