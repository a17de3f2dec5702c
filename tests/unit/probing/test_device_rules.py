"""The probes' training and feature store against CUDA's and PyTorch's rules, checked on the CPU with stand-ins for
what needs a GPU: a resumed run's restored losses land on the steps' device; the library makes its own tensors where
it means them, whatever torch's default device; a graphed step captures the full batch's shape, in ``thread_local``
mode; a chunk reader thread makes no CUDA call, and a pinning failure that is no refusal is raised in the training
loop; a host store's table is never pinned, its reads for an accelerator go through pinned buffers, and closing it
gives pinned memory back (which the next budget then counts as available)."""
from __future__ import annotations

import threading
from dataclasses import replace

import pytest
import torch
from torch import nn

from conftest import TensorSource, tiny_model, tiny_task_data, tiny_tokenizer
from papa.probing import feature_store, step_modes, training
from papa.probing.checkpoint import TrainingCheckpoint
from papa.probing.feature_store import FeatureStore, StorePlan
from papa.probing.features import FeatureSource, encode_task
from papa.probing.probes import SentenceProbe
from papa.probing.ranking import LambdaTrace
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe, train_probes_in_chunks
from papa.tasks.data import Example
from papa.tasks.registry import get_task

N = 12
SETTINGS = TrainSettings(learning_rate=1e-2, batch_size=4, epochs=2)
#: Each test sets the default device it means (PAPA_TEST_DEVICE=cuda does not make CUDA the default one here).
pytestmark = pytest.mark.explicit_device


# ---- a resumed run's losses --------------------------------------------------------------------------------------

def test_restored_losses_land_on_the_device_of_the_parameters_the_steps_update(tmp_path):
    """A checkpoint's losses are read on the CPU; the steps after the restore put theirs on the parameters' device
    (a GPU's in a real run, "meta" here), and both are stacked at the next save and at the end of the training."""
    probe = nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(probe.parameters(), weight_decay=0.0)
    checkpoint = TrainingCheckpoint(tmp_path / "run.safetensors", {"run": 1}, every_seconds=None)
    checkpoint.save(2, optimizer, torch.Generator(), torch.arange(5), [torch.tensor(0.5), torch.tensor(0.25)])
    on_device = nn.Linear(3, 2, device="meta")
    resumed = checkpoint.restore(torch.optim.AdamW(on_device.parameters(), weight_decay=0.0), torch.Generator())
    assert [loss.device.type for loss in resumed.losses] == ["meta", "meta"]
    from papa.probing.checkpoint import stack_losses

    stacked = stack_losses([*resumed.losses, torch.zeros((), device="meta")])  # the next step's loss
    assert stacked.shape == (3,) and stacked.device.type == "meta"
    assert stack_losses([torch.tensor(1.0), torch.zeros((), device="meta")]).device.type == "meta"
    assert stack_losses([]).shape == (0,)


# ---- the default device ------------------------------------------------------------------------------------------

def _plan(keep: torch.Tensor, layers: int, hidden: int, *, accelerator: bool = False,
          batch_order: str = "per_seed") -> StorePlan:
    kept = int(keep.sum())
    width = layers * hidden * 4
    return StorePlan("host", keep.shape[0], kept, kept * width, keep.numel() * width, 2**30, None, "float32",
                     accelerator, batch_order)


def _keep() -> torch.Tensor:
    keep = torch.zeros(6, 5, dtype=torch.bool)
    keep[:, :2] = True
    keep[1, :4] = True
    keep[4] = False
    return keep


def test_a_store_made_under_another_default_device_keeps_its_map_and_reads_on_the_cpu():
    """`FeatureStore`'s map of rows and its reads are host tensors whatever torch's default device is (the test
    harness makes it CUDA with PAPA_TEST_DEVICE=cuda; "meta" here, where a tensor made there holds no values)."""
    keep = _keep()
    want = FeatureStore(_plan(keep, 2, 3), keep, 2, 3, torch.device("cpu"))
    feats = torch.randn(6, 2, 5, 3, generator=torch.Generator().manual_seed(0))
    want.put(0, feats)
    with torch.device("meta"):
        store = FeatureStore(_plan(keep, 2, 3), keep, 2, 3, torch.device("cpu"))
        store.put(0, feats)
        got = store.get(torch.tensor([3, 0, 4], device="cpu"), torch.device("cpu"))
    assert store.rows.device.type == "cpu" and torch.equal(store.rows, want.rows)
    assert got.device.type == "cpu" and torch.equal(got, want.get(torch.tensor([3, 0, 4]), torch.device("cpu")))


def _sentences(n: int = 10) -> TensorSource:
    g = torch.Generator().manual_seed(1)
    return TensorSource(torch.randn(n, 3, N, 8, generator=g), torch.ones(n, N, dtype=torch.long),
                        torch.arange(n) % 2)


def _train_and_evaluate(source: TensorSource, default: str | None) -> tuple[list[float], float]:
    torch.manual_seed(0)
    probe = SentenceProbe(3, 8, N, 2)  # made on the CPU: the training is what runs under `default`
    with torch.device(default) if default else torch.device("cpu"):
        losses = train_probe(probe, "sentence", source, SETTINGS, seed=0, progress=False)
        metric = evaluate_probe(probe, get_task("sst2"), source, batch_size=4)
    return losses, metric


def test_training_and_evaluation_under_another_default_device_match_the_cpu_run():
    source = _sentences()
    assert _train_and_evaluate(source, "meta") == _train_and_evaluate(source, None)


def test_blocks_and_chunks_shuffle_on_the_cpu_under_another_default_device():
    """The block and chunk orders are drawn from CPU generators: on the CPU whatever the default device."""
    source = _sentences(8)
    blocks = [(source.feats, source.mask, source.labels)]
    runs = []
    for default in (None, "meta"):
        torch.manual_seed(0)
        probe = SentenceProbe(3, 8, N, 2)
        with torch.device(default) if default else torch.device("cpu"):
            runs.append(training.train_probes_in_blocks([probe], "sentence", None, source.labels, SETTINGS,
                                                        seeds=[0], block_examples=8, progress=False,
                                                        read=lambda epoch, size: iter(blocks)))
    assert runs[0] == runs[1] and len(runs[0][0]) == 2 * 2


def test_encoded_labels_traces_and_checkpoints_stay_on_the_cpu_under_another_default_device(tmp_path):
    tok = tiny_tokenizer("bert")
    with torch.device("meta"):
        for task, example in (("sst2", Example(text="the cat sat", label=1)),
                              ("ner", Example(words=("the", "cat"), label=(0, 1)))):
            labels = encode_task(tok, get_task(task), [example], max_length=N, model_type="bert").labels
            assert labels.device.type == "cpu" and int(labels.max()) == 1
        trace = LambdaTrace()
        trace.record(3, torch.full((2, 2), 0.5, device="cpu"), 1.0)
        assert all(t.device.type == "cpu" for t in trace.to_tensors().values())
        probe = nn.Linear(3, 2, device="cpu")
        optimizer = torch.optim.AdamW(probe.parameters(), weight_decay=0.0)
        probe(torch.ones(1, 3, device="cpu")).sum().backward()
        optimizer.step()
        checkpoint = TrainingCheckpoint(tmp_path / "run.safetensors", {"run": 1}, every_seconds=None)
        checkpoint.save(1, optimizer, torch.Generator(), torch.arange(4, device="cpu"),
                        [torch.tensor(0.5, device="cpu")])
    resumed = checkpoint.restore(optimizer, torch.Generator())
    assert resumed.losses[0].item() == 0.5


# ---- graphed steps -----------------------------------------------------------------------------------------------

class _Graph:
    """Stands in for `torch.cuda.CUDAGraph`: a replay runs nothing."""

    def replay(self) -> None:
        pass


@pytest.fixture
def fake_graphs(monkeypatch):
    """CUDA graphs replaced by stand-ins recording how each capture was asked for; the warm-up's side stream (CUDA
    only) left out: a graphed step's own arithmetic then runs on the CPU."""
    captures = []

    class Capture:
        def __init__(self, graph, **options):
            captures.append(options)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "CUDAGraph", _Graph)
    monkeypatch.setattr(torch.cuda, "graph", Capture)
    monkeypatch.setattr(step_modes.GraphedStep, "_eager",
                        lambda self, batch, side_stream=False: self._eager_step(batch))
    return captures


def _graphed(batch_size: int | None, warmup: int = 1) -> step_modes.GraphedStep:
    torch.manual_seed(0)
    probe = SentenceProbe(3, 8, N, 2)
    optimizer = torch.optim.AdamW(probe.parameters(), weight_decay=0.0)
    for group in optimizer.param_groups:
        group["capturable"] = True  # as new_optimizer("graphed") makes it; stepped below as on the CPU
    optimizer.step = lambda: None
    kwargs = {} if batch_size is None else {"batch_size": batch_size}
    return step_modes.GraphedStep(probe, optimizer, "sentence", step_modes.given_features, warmup=warmup, **kwargs)


def _batch(rows: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(rows, 3, N, 8), torch.ones(rows, N, dtype=torch.long), torch.zeros(rows, dtype=torch.long)


def test_a_graph_is_captured_in_thread_local_mode(fake_graphs):
    """Only the capturing thread's calls are checked: another thread's legal work (a chunk read, an allocator's
    helper) cannot break the capture."""
    step = _graphed(None, warmup=0)
    step(_batch(4))
    assert fake_graphs == [{"capture_error_mode": "thread_local"}] and step.replays == 1


@pytest.mark.parametrize("batch_size", [4, None])
def test_a_ragged_first_batch_is_not_the_shape_captured(fake_graphs, batch_size):
    """A resumed run may start on an epoch's ragged last batch: the graph is still captured for the full batches,
    which replay it; the ragged ones step eagerly. Without the batch size the largest batch seen is captured."""
    step = _graphed(batch_size)
    for rows in (2, 4, 4, 4, 2, 4):
        step(_batch(rows))
    assert len(fake_graphs) == 1 and step.static[0].shape[0] == 4 and step.replays == 3


def test_training_tells_the_step_the_full_batch(monkeypatch):
    """`train_probe` gives its steps the full batch's size (the split's, when smaller), the shape a graph captures."""
    asked = []
    real = training.make_step
    monkeypatch.setattr(training, "make_step", lambda *a, **k: (asked.append(k.get("batch_size")), real(*a, **k))[1])
    for n in (10, 3):
        torch.manual_seed(0)
        train_probe(SentenceProbe(3, 8, N, 2), "sentence", _sentences(n), SETTINGS, seed=0, progress=False)
    assert asked == [4, 3]


# ---- pinned memory -----------------------------------------------------------------------------------------------

@pytest.fixture
def fake_pinning(monkeypatch):
    """An accelerator's pinned allocator stood in for: every pinned allocation is recorded (bytes, thread) and made
    in ordinary memory."""
    pinned = []
    real_empty = torch.empty

    def empty(*size, pin_memory=False, **kwargs):
        if pin_memory:
            t = real_empty(*size, **kwargs)
            pinned.append((t.numel() * t.element_size(), threading.current_thread()))
            return t
        return real_empty(*size, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch, "empty", empty)
    return pinned


def _filled(accelerator: bool, batch_order: str = "per_seed") -> FeatureStore:
    keep = _keep()
    store = FeatureStore(_plan(keep, 2, 3, accelerator=accelerator, batch_order=batch_order), keep, 2, 3,
                         torch.device("cpu"))
    store.put(0, torch.randn(6, 2, 5, 3, generator=torch.Generator().manual_seed(0)))
    return store


def test_the_table_is_pageable_and_an_evaluation_read_goes_through_a_pinned_buffer(fake_pinning):
    """No copy reads a host store's table directly: pinning it would only lock memory rounded up to a power of two
    and kept cached after the store closes. An evaluation read for the accelerator gathers into a pinned buffer
    (here for a "meta" device, which stands for one) and equals the CPU's read."""
    store = _filled(accelerator=True)
    assert fake_pinning == []  # the table: pageable
    idx = torch.tensor([3, 0, 4])
    got = store.get(idx, torch.device("meta"))
    assert [size for size, _ in fake_pinning] == [3 * 5 * 2 * 3 * 4]  # one batch's rows, float32
    want = _filled(accelerator=False).get(idx, torch.device("cpu"))
    assert got.device.type == "meta" and got.shape == want.shape


def test_closing_a_store_gives_pinned_memory_back_and_the_next_budget_counts_it(monkeypatch):
    """Closing empties torch's pinned cache (the staging buffers of a closed store); a budget is taken after
    emptying it, so a second grid point sees the memory the first one's store held."""
    cached = {"bytes": 40 * 2**30}
    total = 100 * 2**30

    class Memory:
        @property
        def available(self) -> int:
            return total - cached["bytes"]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.accelerator, "empty_host_cache", lambda: cached.update(bytes=0))
    monkeypatch.setattr(feature_store.psutil, "virtual_memory", Memory)
    monkeypatch.delenv(feature_store.CACHE_BUDGET_ENV, raising=False)
    assert feature_store.cache_budget_bytes() == int(0.6 * total)
    cached["bytes"] = 40 * 2**30  # the store's buffers, cached by torch when freed
    _filled(accelerator=True).close()
    assert cached["bytes"] == 0


def _chunk_source(tmp_path, store: str = "host"):
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec, data = tiny_task_data(tok, "sst2")
    return spec, model, FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path,
                                      store=store, batch_order="chunks")


def _chunks_losses(spec, model, source) -> list[list[float]]:
    torch.manual_seed(0)
    probes = [make_probe(spec, model, N) for _ in range(2)]
    return train_probes_in_chunks(probes, spec.kind, source, SETTINGS, seeds=[0, 1], chunk_examples=8,
                                  progress=False)


@pytest.mark.parametrize("store", ["host", "disk"])
def test_chunks_for_an_accelerator_are_pinned_by_the_training_thread_not_the_reader(tmp_path, fake_pinning, store):
    """The reader thread only copies host memory into blocks pinned beforehand by the thread that trains (a
    pinned allocation is a CUDA call, forbidden to other threads while that thread captures a graph); the losses
    are those of pageable chunks."""
    spec, model, source = _chunk_source(tmp_path, store)
    want = _chunks_losses(spec, model, source)
    assert fake_pinning == []  # the model on the CPU: nothing pinned
    source.store.plan = replace(source.store.plan, accelerator=True)  # as for a model on an accelerator
    assert _chunks_losses(spec, model, source) == want
    assert fake_pinning and {thread for _, thread in fake_pinning} == {threading.main_thread()}
    source.close()


def test_a_pinning_failure_that_is_no_refusal_is_raised_in_the_training_loop(tmp_path, monkeypatch):
    """Pinning refused (out of memory) keeps the memory pageable, said once; any other failure (here the error
    CUDA gives a call it forbids during a capture) is raised, where the training reads the chunk."""
    spec, model, source = _chunk_source(tmp_path)
    source.store.plan = replace(source.store.plan, accelerator=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def fail(message: str):
        def pinned_empty(shape, dtype):
            raise RuntimeError(message)
        monkeypatch.setattr(feature_store, "_pinned_empty", pinned_empty, raising=False)

    fail("CUDA error: out of memory")
    assert len(_chunks_losses(spec, model, source)[0]) == 2 * 4
    fail("CUDA error: operation not permitted when stream is capturing")
    with pytest.raises(RuntimeError, match="operation not permitted when stream is capturing"):
        _chunks_losses(spec, model, source)
    source.close()


def test_a_chunk_readers_error_is_raised_in_the_training_loop(tmp_path, monkeypatch):
    spec, model, source = _chunk_source(tmp_path)
    real = source.store.read_range
    reads = []

    def read_range(start, stop, **kwargs):
        reads.append(threading.current_thread())
        if len(reads) == 2:
            raise OSError("the disk went away")
        return real(start, stop, **kwargs)

    monkeypatch.setattr(source.store, "read_range", read_range)
    with pytest.raises(OSError, match="the disk went away"):
        _chunks_losses(spec, model, source)
    assert threading.main_thread() not in reads  # read on the reader thread, raised on this one
    source.close()
