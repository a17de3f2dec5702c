"""How a training step runs (papa.probing.step_modes): the eager step is the loop as it always ran, bit for
bit; the compiled step (one graph per batch shape, ``fullgraph=True``) equals it within float rounding for the plain
probe step, the λ step and the trained-constants step; the graphed step is refused off CUDA, before any work. On a
GPU (skipped here without one): graph replay is bit for bit the graphed mode's own eager step, ragged last batch and
a resumed checkpoint included, and within rounding of the eager mode; so is the compiled step under inductor.

The compiled cases use the ``aot_eager`` backend (traced and partitioned, no code generated), as
tests/unit/method/test_compile.py does: under ``fullgraph=True`` a graph break fails the test.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import papa
import papa.probing.step_modes as step_modes
from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.constants import data_free_constants
from papa.probing.checkpoint import TrainingCheckpoint
from papa.probing.features import FeatureSource, encode_task
from papa.probing.probes import IGNORE_INDEX, probe_loss
from papa.probing.training import TrainSettings, make_probe, train_probe, train_probes
from papa.tasks.data import Example
from papa.tasks.registry import get_task

N = 16
TEXTS = ["the movie was good", "it was bad", "a very good film", "not good at all", "fine", "awful stuff"] * 3
# 18 examples in batches of 4: 5 steps per epoch, the last batch holds 2 (ragged)
SETTINGS = TrainSettings(1e-2, 4, 2)
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs and inductor's CUDA graphs need a GPU")
#: Every test here places its tensors on the device it names (its CPU references stay on the CPU with
#: PAPA_TEST_DEVICE=cuda): the harness does not make that device the default one.
pytestmark = pytest.mark.explicit_device


def _setup(arch: str, what: str, device: str = "cpu"):
    """(model, controller, task spec, source, trained extra parameters) of one kind of step: ``plain`` and ``ner``
    (a probe over stored features, sentence and token), ``lambda`` (every head mixed, θ trained) or ``trainable``
    (every head replaced by trainable constants)."""
    model, tok = tiny_model(arch).to(device), tiny_tokenizer(arch)
    spec = get_task("ner" if what == "ner" else "sst2")
    if what == "ner":
        examples = [Example(words=tuple(t.split()), label=tuple(j % 3 for j in range(len(t.split())))) for t in TEXTS]
    else:
        examples = [Example(text=t, label=i % 2) for i, t in enumerate(TEXTS)]
    data = encode_task(tok, spec, examples, max_length=N, model_type=arch)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N), trainable=what == "trainable")
    extra = []
    if what == "lambda":
        ctrl.mix()
        extra = [ctrl.theta]
    elif what == "trainable":
        ctrl.replace(None)
        extra = [ctrl.constants]
    source = FeatureSource(model, data, trainable_backbone=bool(extra), progress=False)
    return model, ctrl, spec, source, extra


def _train(arch: str, what: str, settings: TrainSettings, device: str = "cpu", checkpoint=None):
    """(every step's loss, every trained tensor after training) of one run from the same start."""
    model, ctrl, spec, source, extra = _setup(arch, what, device)
    try:
        if extra:
            torch.manual_seed(0)
            probe = make_probe(spec, model, N).to(device)
            losses = [train_probe(probe, spec.kind, source, settings, seed=0, extra_parameters=extra, progress=False,
                                  checkpoint=checkpoint)]
            trained = [*probe.parameters(), *extra]
        else:  # two seeds' probes interleaved over the store, as a frozen grid point trains them
            probes = []
            for seed in (0, 1):
                torch.manual_seed(seed)
                probes.append(make_probe(spec, model, N).to(device))
            losses = train_probes(probes, spec.kind, source, settings, seeds=[0, 1], progress=False)
            trained = [p for probe in probes for p in probe.parameters()]
        return torch.tensor(losses), [p.detach().cpu().clone() for p in trained]
    finally:
        ctrl.detach()


def _reference(arch: str, what: str, settings: TrainSettings):
    """The training loop as it ran before step modes existed (one seed): AdamW, the seed's order every epoch, the
    source's batch, the probe's logits at the labelled positions only, the loss, backward, step."""
    model, ctrl, spec, source, extra = _setup(arch, what)
    try:
        torch.manual_seed(0)
        probe = make_probe(spec, model, N)
        groups = [{"params": list(probe.parameters()), "lr": settings.learning_rate}]
        if extra:
            groups.append({"params": extra, "lr": settings.learning_rate})
        optimizer, generator, losses = torch.optim.AdamW(groups, weight_decay=0.0), torch.Generator().manual_seed(0), []
        probe.train()
        for _ in range(settings.epochs):
            order = torch.randperm(len(source.data), generator=generator)
            for start in range(0, len(order), settings.batch_size):
                feats, mask, labels = source(order[start:start + settings.batch_size])
                if spec.kind == "token":
                    select = labels != IGNORE_INDEX
                    loss = probe_loss("token", probe(feats, mask, select=select), labels[select])
                else:
                    loss = probe_loss("sentence", probe(feats, mask), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        return torch.tensor([losses]), [p.detach().clone() for p in [*probe.parameters(), *extra]]
    finally:
        ctrl.detach()


def _assert_same(a, b, *, exact: bool, rtol: float = 1e-4, atol: float = 1e-5, skip_rows: int = 0):
    """Losses and trained tensors equal: bit for bit (`exact`), else within float rounding. `skip_rows` leaves out
    the first query rows of the last tensor (trained constants of a causal model: query 0 sees only key 0, its row
    renormalises to 1 whatever the entry, so its gradient is rounding noise, which Adam scales up to steps of lr)."""
    (losses_a, tensors_a), (losses_b, tensors_b) = a, b
    assert len(tensors_a) == len(tensors_b)
    if skip_rows:
        tensors_a = [*tensors_a[:-1], tensors_a[-1][..., skip_rows:, :]]
        tensors_b = [*tensors_b[:-1], tensors_b[-1][..., skip_rows:, :]]
    for x, y in zip([losses_a, *tensors_a], [losses_b, *tensors_b]):
        if exact:
            assert torch.equal(x, y)
        else:
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol)


@pytest.mark.parametrize("what", ["plain", "ner", "lambda", "trainable"])
def test_eager_step_is_the_loop_as_it_ran(what):
    ran = _train("bert", what, SETTINGS)
    if what in ("plain", "ner"):  # seed 0 of the two interleaved seeds
        ran = (ran[0][:1], ran[1][:len(ran[1]) // 2])
    assert ran[0].shape == (1, 10)  # 2 epochs of 5 steps
    _assert_same(ran, _reference("bert", what, SETTINGS), exact=True)


@pytest.mark.slow  # torch.compile traces each case anew
@pytest.mark.parametrize("arch, what", [("bert", "plain"), ("bert", "ner"), ("bert", "lambda"), ("bert", "trainable"),
                                        ("llama", "lambda"), ("llama", "trainable")])
def test_compiled_step_equals_eager(arch, what):
    torch._dynamo.reset()
    try:
        eager = _train(arch, what, SETTINGS)
        compiled = _train(arch, what, replace(SETTINGS, step_mode="compiled", step_backend="aot_eager"))
    finally:
        torch._dynamo.reset()
    assert not torch.equal(compiled[0], eager[0][:, :1].expand_as(compiled[0]))  # the losses move: it trained
    _assert_same(compiled, eager, exact=False, skip_rows=1 if (arch, what) == ("llama", "trainable") else 0)


def test_graphed_steps_are_refused_off_cuda_before_any_work():
    model, ctrl, spec, source, extra = _setup("bert", "lambda")
    torch.manual_seed(0)
    probe = make_probe(spec, model, N)
    before = [p.detach().clone() for p in [*probe.parameters(), *extra]]
    calls = []
    source.fetch = lambda idx: calls.append(idx)  # any batch read would be work done
    with pytest.raises(InputError, match="CUDA graphs.*steps='eager'.*steps='compiled'.*device='cuda'"):
        train_probe(probe, spec.kind, source, replace(SETTINGS, step_mode="graphed"), seed=0, extra_parameters=extra,
                    progress=False)
    with pytest.raises(InputError, match="unknown step mode 'graph'"):
        train_probe(probe, spec.kind, source, replace(SETTINGS, step_mode="graph"), seed=0, progress=False)
    assert not calls
    assert all(torch.equal(p, q) for p, q in zip([*probe.parameters(), *extra], before))
    ctrl.detach()


def test_step_mode_names_come_from_the_vocabulary():
    from papa.core.vocabulary import DEFAULT_STEP_MODE, STEP_MODES

    assert STEP_MODES[0] == DEFAULT_STEP_MODE == TrainSettings(1e-3, 4, 1).step_mode == "eager"
    for mode in ("eager", "compiled"):
        assert step_modes.check_step_mode(mode, "cpu") == mode
    assert step_modes.check_step_mode("graphed", "cuda") == "graphed"


# ---- on a GPU ----------------------------------------------------------------------------------------------------

@CUDA
@pytest.mark.parametrize("what", ["plain", "ner", "lambda", "trainable"])
def test_graph_replay_is_its_own_eager_step_bit_for_bit(what, monkeypatch):
    """The graphed mode with a graph (captured after the warm-up, replayed on every full batch, the ragged last batch
    of each epoch stepped eagerly) against the same mode never capturing: identical; and within rounding of eager."""
    graphed = replace(SETTINGS, step_mode="graphed")
    replays = []
    real_replay = torch.cuda.CUDAGraph.replay
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda g: (replays.append(1), real_replay(g))[1])
    replayed = _train("bert", what, graphed, "cuda")
    seeds = 1 if what in ("lambda", "trainable") else 2
    # 8 full batches over 2 epochs per seed, the first WARMUP_STEPS of them eager
    assert len(replays) == seeds * (8 - step_modes.WARMUP_STEPS)
    monkeypatch.setattr(step_modes, "WARMUP_STEPS", 10**9)  # never captured: every step eager, same arithmetic
    _assert_same(replayed, _train("bert", what, graphed, "cuda"), exact=True)
    _assert_same(replayed, _train("bert", what, SETTINGS, "cuda"), exact=False)


@CUDA
def test_graphed_checkpoint_resumes_as_an_uninterrupted_run(tmp_path):
    class KilledAt(TrainingCheckpoint):
        def due(self, steps: int, last: bool) -> bool:
            if steps == 7 and not self.path.with_suffix(".killed").exists():
                self.path.with_suffix(".killed").touch()
                raise KeyboardInterrupt
            return super().due(steps, last)

    graphed = replace(SETTINGS, step_mode="graphed")
    whole = _train("bert", "lambda", graphed, "cuda")
    checkpoint = KilledAt(tmp_path / "run.safetensors", {"run": 1}, every_steps=3, every_seconds=None)
    with pytest.raises(KeyboardInterrupt):
        _train("bert", "lambda", graphed, "cuda", checkpoint=checkpoint)
    _assert_same(_train("bert", "lambda", graphed, "cuda", checkpoint=checkpoint), whole, exact=True)


@CUDA
@pytest.mark.parametrize("what", ["plain", "lambda", "trainable"])
def test_compiled_step_under_inductor_equals_eager_on_cuda(what):
    torch._dynamo.reset()
    try:
        compiled = _train("bert", what, replace(SETTINGS, step_mode="compiled"), "cuda")
    finally:
        torch._dynamo.reset()
    _assert_same(compiled, _train("bert", what, SETTINGS, "cuda"), exact=False)


@pytest.mark.slow  # torch.compile
def test_compiled_steps_of_many_probes_and_shapes_keep_compiling():
    """Probes of one shape share a graph; a grid's head configurations and ragged batches add graphs past the
    compiler's default limit of 8, which under fullgraph=True would fail the run."""
    import torch._dynamo

    torch._dynamo.reset()
    # what a long grid reaches sooner; the config's own patch (a monkeypatch of this setting does not restore it)
    try:
        with torch._dynamo.config.patch(recompile_limit=2):
            for batch in (4, 3, 2, 5):  # four shapes of one probe kind: four graphs of the same code
                probe = make_probe(get_task("sst2"), tiny_model("bert"), N)
                optimizer = step_modes.new_optimizer("compiled", [{"params": list(probe.parameters()), "lr": 1e-2}])
                step = step_modes.make_step("compiled", probe, optimizer, "sentence", step_modes.given_features,
                                            backend="aot_eager")
                feats, mask = torch.randn(batch, 3, N, 32), torch.ones(batch, N, dtype=torch.long)
                assert torch.isfinite(step((feats, mask, torch.zeros(batch, dtype=torch.long))))
    finally:
        torch._dynamo.reset()


@pytest.mark.slow  # torch.compile
def test_compiled_updates_of_many_optimizers_share_one_graph():
    """Every probe of a grid has an optimizer of its own; their compiled updates share one graph (one per set of
    parameter shapes and hyper-parameters), so past the compiler's recompile limit (8 by default) every optimizer
    still steps compiled, none compiles anew."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    try:
        for seed in range(10):
            torch.manual_seed(seed)
            probe = make_probe(get_task("sst2"), tiny_model("bert"), N)
            optimizer = step_modes.new_optimizer("compiled", [{"params": list(probe.parameters()), "lr": 1e-2}])
            step = step_modes.make_step("compiled", probe, optimizer, "sentence", step_modes.given_features,
                                        backend="aot_eager")
            before = [p.detach().clone() for p in probe.parameters()]
            feats, mask = torch.randn(4, 3, N, 32), torch.ones(4, N, dtype=torch.long)
            assert torch.isfinite(step((feats, mask, torch.arange(4) % 2)))
            assert all(not torch.equal(p, q) for p, q in zip(probe.parameters(), before))
            assert [float(s["step"]) for s in optimizer.state.values()] == [1.0] * len(before)
        graphs = counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()
    assert graphs == 2  # the loss's, shared by the probes of one shape, and the update's
