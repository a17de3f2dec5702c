"""Where features live for every configuration: the multi-seed fetch of a stored split (papa.probing.prefetch), the
chunks a split on disk is read in, bfloat16 stores, and the pure rule that names each split's path."""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_model, tiny_task_data, tiny_tokenizer
from papa.core.errors import InputError
from papa.probing import feature_store
from papa.probing.feature_store import check_settings, choose_path, plan_store, store_path
from papa.probing.features import FeatureSource
from papa.probing.training import TrainSettings, make_probe, train_probes_in_chunks

N = 12

GiB, TiB = 2**30, 2**40


def _source(task: str, store: str, tmp_path, dtype: str = "float32", batch_order: str = "per_seed"):
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec, data = tiny_task_data(tok, task)
    return spec, model, FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path,
                                      store=store, dtype=dtype, batch_order=batch_order)


def _same(got, want) -> None:
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w) and g.dtype == w.dtype and g.shape == w.shape and g.is_contiguous()


@pytest.mark.parametrize("task", ["sst2", "ner"])
@pytest.mark.parametrize("store", ["host", "disk"])
def test_every_seed_gets_the_batch_get_gives_in_order_over_an_epoch_boundary(task, store, tmp_path):
    """All seeds' batches of a step are read in one gather; each is, bit for bit, `source(order[a:b])` (features,
    mask, labels), the ragged last batch included (15 examples in batches of 4), in two epochs of fresh orders and
    from a step within an epoch (a resumed run's)."""
    _, _, source = _source(task, store, tmp_path)
    n, batch = len(source.data), 4
    for epoch in range(2):
        orders = [torch.randperm(n, generator=torch.Generator().manual_seed(10 * epoch + s)) for s in range(3)]
        for start in (0, 2 * batch):
            steps = list(source.steps(orders, start, batch))
            assert len(steps) == -(-(n - start) // batch)
            for step, batches in zip(range(start, n, batch), steps):
                batches = list(batches)
                assert len(batches) == 3 and len(batches[0][0]) == min(batch, n - step)
                for order, got in zip(orders, batches):
                    _same(got, source(order[step:step + batch]))
    source.close()


def test_from_the_backbone_each_batch_is_computed_only_when_taken(tmp_path):
    """A source that stores nothing reads a seed's batch when that seed takes it (a trained backbone changes between
    two seeds' steps: its step runs the backbone, `from_fetched`), and gives what `source(idx)` gives."""
    _, _, source = _source("sst2", "backbone", tmp_path)
    orders = [torch.arange(15), torch.arange(14, -1, -1)]
    for step, batches in zip(range(0, 15, 4), source.steps(orders, 0, 4)):
        assert not isinstance(batches, list)  # lazy
        for order, got in zip(orders, batches):
            _same(source.from_fetched(*got), source(order[step:step + 4]))


@pytest.mark.parametrize("store", ["host", "disk"])
def test_a_bfloat16_store_holds_half_the_bytes_and_reads_back_the_rounded_features(store, tmp_path):
    _, _, plain = _source("mrpc", store, tmp_path)
    _, _, half = _source("mrpc", store, tmp_path, dtype="bfloat16")
    assert half.plan.kept_bytes * 2 == plain.plan.kept_bytes and half.store.values.dtype == torch.bfloat16
    assert half.path == ("host" if store == "host" else "disk") + "_bf16" and plain.path == store
    idx = torch.tensor([3, 0, 14, 3])
    want, got = plain(idx)[0], half(idx)[0]
    assert got.dtype == torch.float32 and torch.equal(got, want.bfloat16().float()) and not torch.equal(got, want)
    if store == "disk":
        assert half.store.path.suffix == ".bf16"
    plain.close()
    half.close()


@pytest.mark.parametrize("store", ["host", "disk"])
def test_chunks_are_read_whole_in_a_shared_order_and_equal_the_batches_get_gives(store, tmp_path):
    """`chunks` reads each range of consecutive examples in one read; every example comes once per epoch, in the
    order of chunks the seed draws (the same for every probe), and each chunk is `get` of its examples."""
    _, _, source = _source("ner", store, tmp_path, batch_order="chunks")
    assert source.path == ("disk_streamed" if store == "disk" else "host")
    chunks = list(source.chunks(4, seed=3))
    assert len(chunks) == 4 and sum(len(c[0]) for c in chunks) == len(source.data)
    order = torch.randperm(4, generator=torch.Generator().manual_seed(3)).tolist()
    for k, (feats, mask, labels) in zip(order, chunks):
        idx = torch.arange(4 * k, min(4 * k + 4, len(source.data)))
        _same((feats, mask, labels), source(idx))
    assert [len(c[0]) for c in source.chunks(4, seed=3)] == [len(c[0]) for c in chunks]  # the seed decides
    source.close()


def test_chunks_train_each_seed_in_its_shuffle_without_the_backbone(tmp_path):
    """Training in chunks reads the store: no forward pass after it is filled; each seed takes every example once
    per epoch, in batches within a chunk; an unstored split is refused."""
    from papa.method.architectures import backbone

    spec, model, source = _source("sst2", "disk", tmp_path, batch_order="chunks")
    seen = []
    handle = backbone(model).register_forward_pre_hook(lambda *a, **k: seen.append(1), with_kwargs=True)
    settings = TrainSettings(learning_rate=1e-2, batch_size=4, epochs=2)
    try:
        probes = [make_probe(spec, model, N) for _ in range(2)]
        losses = train_probes_in_chunks(probes, spec.kind, source, settings, seeds=[0, 1], chunk_examples=9,
                                        progress=False)  # chunks of 8, 7: 2 + 2 batches each
    finally:
        handle.remove()
    assert not seen and [len(x) for x in losses] == [2 * 4] * 2 and losses[0] != losses[1]
    source.close()
    _, _, streamed = _source("sst2", "backbone", tmp_path)
    with pytest.raises(InputError, match="'chunks' reads a stored split"):
        train_probes_in_chunks(probes, spec.kind, streamed, settings, seeds=[0, 1], chunk_examples=8, progress=False)


def test_the_path_of_each_split_follows_from_its_size_and_the_budgets():
    """`store_path` is the runner's rule and `choose_path` the grid's policy an estimate applies, without a device:
    MNLI on a base model (0.8 TiB) and on a large one (2 TiB) on nodes of 1 and 2 TiB of host memory."""
    node = {"device": 26 * GiB, "host": int(0.6 * 1 * TiB), "disk": 3 * TiB}
    big = {**node, "host": int(0.6 * 2 * TiB)}
    mnli_base, mnli_large, sst2 = int(0.8 * TiB), 2 * TiB, 10 * GiB
    assert choose_path(sst2, node) == "device"
    assert choose_path(30 * GiB, node) == "pinned_host"
    assert choose_path(30 * GiB, {"host": 60 * GiB, "disk": 0}) == "host"  # the CPU: no device key
    assert choose_path(mnli_base, node) == "disk"  # the protocol's order, read batch by batch
    assert choose_path(mnli_base, node, batch_order="chunks") == "disk_streamed"
    assert choose_path(mnli_base, node, allow_bf16=True) == "pinned_host_bf16"
    assert choose_path(mnli_base, big) == "pinned_host"
    assert choose_path(mnli_large, node, allow_bf16=True, batch_order="chunks") == "disk_streamed_bf16"
    assert choose_path(mnli_large, node, batch_order="chunks") == "disk_streamed"  # float32 only where bf16 is not
    assert choose_path(mnli_large, big, allow_bf16=True) == "pinned_host_bf16"
    assert choose_path(mnli_large, {**node, "disk": TiB}, allow_bf16=True, batch_order="chunks") == \
        "disk_streamed_bf16"
    assert choose_path(mnli_large, {**node, "disk": TiB}) is None
    assert store_path(mnli_base, node, bf16=True) == "pinned_host_bf16"  # the runner's: the dtype is the grid's
    assert store_path(sst2, node, bf16=True) == "device_bf16"
    for bad in ({"gpu": 1}, {"host": -1}, {"host": 1.5}):
        with pytest.raises(InputError, match="budgets"):
            choose_path(1, bad)
    with pytest.raises(InputError, match="kept_bytes"):
        store_path(-1, node)


def test_the_plan_names_its_path_and_the_options_when_nothing_fits(tmp_path, monkeypatch):
    keep = torch.zeros(10, 8, dtype=torch.bool)
    keep[:, :2] = True  # 20 positions, 960 bytes of float32 at 3 x 4
    cpu = torch.device("cpu")
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", str(480 / 2**30))
    monkeypatch.setenv("PAPA_FEATURE_DISK_GB", "0")
    with pytest.raises(InputError, match="more than every budget") as error:
        plan_store(keep, 3, 4, cpu, folder=tmp_path)
    assert "'chunks'" in str(error.value) and "bf16_store" in str(error.value)
    plan = plan_store(keep, 3, 4, cpu, folder=tmp_path, dtype="bfloat16")
    assert (plan.placement, plan.kept_bytes, plan.path) == ("host", 480, "host_bf16")
    assert "bfloat16" in plan.line("train") and "host_bf16" in plan.line("train")
    monkeypatch.setenv("PAPA_FEATURE_DISK_GB", "1")
    assert plan_store(keep, 3, 4, cpu, folder=tmp_path, batch_order="chunks").path == "disk_streamed"
    with pytest.raises(InputError, match="feature dtype 'float16'"):
        plan_store(keep, 3, 4, cpu, folder=tmp_path, dtype="float16")
    monkeypatch.setenv("PAPA_FEATURE_STORE", "backbone")
    with pytest.raises(InputError, match="'chunks' reads the training split from its store"):
        check_settings("cpu", "chunks")
    check_settings("cpu")  # the protocol's order streams from the backbone when told to


def test_host_memory_that_cannot_be_pinned_is_said_and_kept_pageable(capsys):
    """Pinning needs an accelerator's allocator (and the OS's leave to lock the pages): where it fails, the store
    says so and keeps its features in ordinary memory."""
    if torch.cuda.is_available():
        pytest.skip("pinning works here")
    table = feature_store._empty((4, 2, 3), torch.float32, torch.device("cpu"), pinned=True, desc="train")
    assert table.shape == (4, 2, 3) and not table.is_pinned()
    assert "could not pin" in capsys.readouterr().out
