"""The feature store: what a probe reads, kept once per head configuration (papa.probing.feature_store), and seeds
trained together over it (papa.probing.training.train_probes)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import tiny_model, tiny_task_data, tiny_tokenizer
from papa.core.errors import InputError
from papa.probing import feature_store
from papa.probing.feature_store import plan_store
from papa.probing.features import FeatureSource, hidden_features
from papa.probing.probes import IGNORE_INDEX
from papa.probing.training import TrainSettings, make_probe, train_probe, train_probes

N = 12


@pytest.mark.parametrize("task", ["sst2", "mrpc", "ner", "mlm"])
@pytest.mark.parametrize("store", ["host", "disk"])
def test_a_batch_read_back_is_the_padded_batch_at_the_positions_the_probe_reads(task, store, tmp_path):
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec, data = tiny_task_data(tok, task)
    source = FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path, store=store)
    read = data.inputs["attention_mask"].bool() if spec.kind in ("sentence", "pair") else data.labels != IGNORE_INDEX
    assert source.store.values.shape[0] == int(read.sum()) < read.numel()  # only what the probe reads is kept
    idx = torch.tensor([7, 0, 3, 3, 14])
    feats, mask, labels = source(idx)
    with torch.no_grad():
        padded = hidden_features(model, data.batch(idx)[0])
    at = read[idx][:, None, :, None]
    assert torch.equal(feats, torch.where(at, padded, torch.zeros(()))) and feats.is_contiguous()
    assert torch.equal(mask, data.inputs["attention_mask"][idx]) and torch.equal(labels, data.labels[idx])
    source.close()


def test_a_disk_store_is_named_when_complete_and_removed_when_closed(tmp_path, monkeypatch):
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    _, data = tiny_task_data(tok, "sst2")
    source = FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path, store="disk")
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".f32", ".json"]  # no .tmp left: complete
    source.close()
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv("PAPA_KEEP_FEATURES", "1")
    FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path, store="disk").close()
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".f32", ".json"]


def test_the_plan_is_decided_from_sizes_and_said_in_one_line(tmp_path, monkeypatch, capsys):
    keep = torch.zeros(10, 8, dtype=torch.bool)
    keep[:, :2] = True  # 20 of 80 positions
    cpu = torch.device("cpu")
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", str(20 * 3 * 4 * 4 / 2**30))  # exactly the kept bytes
    plan = plan_store(keep, 3, 4, cpu, folder=tmp_path)
    assert (plan.placement, plan.kept_bytes, plan.padded_bytes) == ("host", 960, 3840)
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", str(959 / 2**30))
    plan = plan_store(keep, 3, 4, cpu, folder=tmp_path)
    assert plan.placement == "disk" and str(tmp_path) in plan.line("train")
    assert "20 positions the probe reads" in plan.line("train")
    with pytest.raises(InputError, match="PAPA_FEATURE_STORE='nowhere': choose one of device, host, disk"):
        plan_store(keep, 3, 4, cpu, forced="nowhere")
    with pytest.raises(InputError, match="host memory is its device"):
        plan_store(keep, 3, 4, cpu, forced="device")
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", "lots")
    with pytest.raises(InputError, match="PAPA_FEATURE_CACHE_GB='lots' is not a number of GiB"):
        plan_store(keep, 3, 4, cpu)


@pytest.mark.parametrize("task", ["sst2", "mrpc", "ner", "mlm"])
def test_seeds_trained_together_end_as_each_trained_alone(task):
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec, data = tiny_task_data(tok, task)
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    settings = TrainSettings(learning_rate=1e-2, batch_size=4, epochs=2)
    seeds = [0, 1, 5]

    def fresh(seed):
        torch.manual_seed(seed)
        return make_probe(spec, model, N, len(tok))

    alone = [fresh(seed) for seed in seeds]
    alone_losses = [train_probe(p, spec.kind, source, settings, seed=s, progress=False) for p, s in zip(alone, seeds)]
    together = [fresh(seed) for seed in seeds]
    together_losses = train_probes(together, spec.kind, source, settings, seeds=seeds, progress=False)
    assert together_losses == alone_losses and len(alone_losses[0]) == 2 * 4  # 15 examples, batches of 4
    for a, b in zip(alone, together):
        for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
            assert torch.equal(x, y), name
    assert alone_losses[0] != alone_losses[1]  # the seeds differ


@pytest.mark.parametrize("task", ["sst2", "ner"])
def test_blocks_run_the_backbone_once_per_example_and_epoch(task):
    """In blocks every seed trains on the block the backbone just ran over: epochs x examples forward passes, not
    seeds x epochs x examples; one block holding the whole split is a per-seed shuffle of it."""
    from papa.method.architectures import backbone
    from papa.probing.training import train_probes_in_blocks

    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec, data = tiny_task_data(tok, task)
    settings = TrainSettings(learning_rate=1e-2, batch_size=4, epochs=2)
    seen = []
    handle = backbone(model).register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    try:
        probes = [make_probe(spec, model, N, len(tok)) for _ in range(3)]
        losses = train_probes_in_blocks(probes, spec.kind, model, data, settings, seeds=[0, 1, 2],
                                        block_examples=9, progress=False)  # 2 whole batches per block
    finally:
        handle.remove()
    assert sum(seen) == 2 * len(data)
    assert [len(x) for x in losses] == [2 * 4] * 3 and losses[0] != losses[1]  # blocks of 8, 7: 2 + 2 batches
    with pytest.raises(ValueError, match="less than one batch"):
        train_probes_in_blocks(probes, spec.kind, model, data, settings, seeds=[0, 1, 2], block_examples=3)


@pytest.mark.skipif(not Path("/proc/meminfo").is_file(), reason="the kernel's own count is read on Linux")
def test_the_host_budget_is_a_share_of_what_the_kernel_says_is_available(monkeypatch):
    """Without PAPA_FEATURE_CACHE_GB the budget is 60% of the available memory psutil reports, which on Linux is
    the kernel's MemAvailable (read here from /proc/meminfo; the two reads are moments apart)."""
    monkeypatch.delenv(feature_store.CACHE_BUDGET_ENV, raising=False)
    budget = feature_store.cache_budget_bytes()
    meminfo = Path("/proc/meminfo").read_text(encoding="ascii")
    available = int(next(line for line in meminfo.splitlines() if line.startswith("MemAvailable:")).split()[1]) * 1024
    assert abs(budget - 0.6 * available) <= 0.6 * 256 * 2**20  # within 256 MiB of allocation in between
