"""benchmarks/full_cost.py's part B on a tiny RoBERTa: a row holds everything benchmarks/cost.py needs, trained
constants are timed with Q/K dropped as the runner runs them, and λ and the plain step keep every Q/K."""
from __future__ import annotations

import pytest
import torch

from benchmarks import cost, full_cost, suite
from conftest import tiny_model, tiny_tokenizer

pytestmark = pytest.mark.slow


def test_synthetic_rows_take_the_lengths_given():
    spec = full_cost.get_task("mnli")
    rows = suite.synthetic_task(spec, tiny_tokenizer("roberta"), 5, 256, 64, torch.tensor([10, 40]))
    assert rows.inputs["attention_mask"].sum(dim=1).tolist() == [10, 40, 10, 40, 10]
    assert rows.labels.shape == (5,)


def test_part_b_rows_feed_the_estimate(tmp_path, monkeypatch):
    from papa.method.attention_free import query_key_dropped

    model_dir = tmp_path / "tiny-roberta"
    tiny_model("roberta").save_pretrained(model_dir)
    tiny_tokenizer("roberta").save_pretrained(model_dir)
    seen = []
    original = full_cost.train_probe

    def spy(probe, kind, source, settings, *, extra_parameters=(), **kw):
        import papa

        ctrl = papa.controller_of(source.model)
        which = ("trainable" if any(p is ctrl.constants for p in extra_parameters) else
                 "lambda" if any(p is ctrl.theta for p in extra_parameters) else type(source).__name__)
        seen.append((which, query_key_dropped(ctrl)))
        return original(probe, kind, source, settings, extra_parameters=extra_parameters, **kw)

    monkeypatch.setattr(full_cost, "train_probe", spy)
    [row] = full_cost.step_times(model_dir, "roberta-base", full_cost.PartB(
        torch.device("cpu"), ["sst2"], steps=2, repeats=1, forward_batch=4, forward_batches=1, data_dir=None,
        sample=16, folder=tmp_path / "features"))
    assert set(cost.REQUIRED) <= set(row)
    assert set(row["fill_seq_per_s"]) == set(row["stored_step_s"]) == {"host", "disk"}
    assert row["rows"] == "synthetic: a quarter padding" and row["read_per_example"] == 48
    drops = {which: dropped for which, dropped in seen}
    assert drops["trainable"] is True and drops["lambda"] is False and drops["ThroughActivations"] is False
    times = [v for k, v in row.items() if k.endswith("_s")]
    assert all(v > 0 for x in times for v in (x.values() if isinstance(x, dict) else [x]))
    assert not list((tmp_path / "features").glob("*.f32*"))  # every disk store was closed
