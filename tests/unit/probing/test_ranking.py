"""Learning λ (paper 3.2) on a tiny model: λ moves, the ranking covers every head, modes are restored."""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch

import papa
from conftest import tiny_model, tiny_tokenizer
from papa.core.artifacts import read_safetensors_metadata
from papa.core.errors import CorruptArtifactError, IncompatibleArtifactError
from papa.method.constants import data_free_constants
from papa.method.rankings import HeadRanking
from papa.method.selection import check_order
from papa.probing.checkpoint import TrainingCheckpoint
from papa.probing.features import encode_task
from papa.probing.ranking import LambdaTrace, learn_lambdas
from papa.probing.training import TrainSettings
from papa.tasks.data import Example
from papa.tasks.registry import get_task


def test_lambdas_move_and_rank_all_heads(arch):
    model, tok = tiny_model(arch), tiny_tokenizer(arch)
    spec = get_task("sst2")
    texts = ["the movie was good", "it was bad", "a very good film", "not good at all"] * 4
    data = encode_task(tok, spec, [Example(text=t, label=i % 2) for i, t in enumerate(texts)], max_length=16,
                       model_type=arch)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, 16))
    ctrl.replace([(0, 0)])
    modes_before = ctrl.modes.clone()
    lambdas = learn_lambdas(ctrl, spec, data, TrainSettings(1e-2, 4, 2), seed=0, progress=False)
    assert lambdas.shape == (ctrl.num_layers, ctrl.num_heads)
    assert (lambdas - 0.5).abs().max() > 1e-3  # trained away from the 0.5 start
    assert torch.equal(ctrl.modes, modes_before) and torch.all(ctrl.theta == 0)  # state restored
    assert all(p.grad is None for p in model.parameters())  # the backbone stayed frozen
    ranking = HeadRanking.from_lambdas(lambdas, signature=ctrl.signature, task="sst2", seed=0)
    assert check_order(ranking.order, ctrl.num_layers, ctrl.num_heads) == ranking.order
    first = ranking.order[0]
    assert lambdas[first] == lambdas.min()


class _KilledAt(TrainingCheckpoint):
    """A checkpoint whose training is interrupted once it has taken `kill_at` steps: killed (steps after its last
    save are lost), or sent SIGINT/SIGTERM (it saves, then stops)."""

    kill_at: int = 0
    how: str = "kill"

    def due(self, steps: int, last: bool) -> bool:
        if steps == self.kill_at:
            if self.how == "kill":
                raise KeyboardInterrupt
            os.kill(os.getpid(), getattr(signal, self.how))
        return super().due(steps, last)


def _lambda_setup(arch: str = "bert"):
    model, tok = tiny_model(arch), tiny_tokenizer(arch)
    spec = get_task("sst2")
    texts = ["the movie was good", "it was bad", "a very good film", "not good at all", "fine", "awful stuff"] * 3
    data = encode_task(tok, spec, [Example(text=t, label=i % 2) for i, t in enumerate(texts)], max_length=16,
                       model_type=arch)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, 16))
    return ctrl, spec, data


@pytest.mark.slow  # a subprocess per case, each importing torch and learning λ
@pytest.mark.parametrize("kill_at, how", [(5, "kill"), (9, "kill"), (11, "kill"), (7, "SIGINT"), (3, "SIGTERM")])
def test_lambda_learning_killed_and_run_again_ends_as_an_uninterrupted_run(tmp_path, kill_at, how):
    """Killed within epoch 1 (saved at 4: an epoch's end), within epoch 2, twice; interrupted, it saves where it
    stopped."""
    ctrl, spec, data = _lambda_setup()
    settings = TrainSettings(1e-2, 4, 3)  # 18 examples: 5 steps per epoch (the last batch holds 2), 15 steps
    identity = {"task": "sst2", "seed": 0}
    reference = LambdaTrace(every=2)
    expected = learn_lambdas(ctrl, spec, data, settings, seed=0, progress=False, trace=reference)

    path = tmp_path / "lambda.checkpoint.safetensors"
    killed = _KilledAt(path, identity, every_steps=4, every_seconds=None)
    killed.kill_at, killed.how = kill_at, how
    handler = signal.getsignal(signal.SIGINT)  # Python's default, or "ignore" in a shell's background job
    with pytest.raises(KeyboardInterrupt):
        learn_lambdas(ctrl, spec, data, settings, seed=0, progress=False, trace=LambdaTrace(every=2),
                      checkpoint=killed)
    assert torch.all(ctrl.theta == 0)  # the interrupted run left the heads as they were
    saved = json.loads(read_safetensors_metadata(path)["papa_checkpoint"])["steps"]
    assert saved == (kill_at if how != "kill" else 4 * ((kill_at - 1) // 4))
    assert signal.getsignal(signal.SIGINT) is handler  # the handlers were put back
    if kill_at == 11:  # killed twice: the second run resumes from the first's checkpoint and is killed again
        again = _KilledAt(path, identity, every_steps=4, every_seconds=None)
        again.kill_at = 14
        with pytest.raises(KeyboardInterrupt):
            learn_lambdas(ctrl, spec, data, settings, seed=0, progress=False, trace=LambdaTrace(every=2),
                          checkpoint=again)
    trace = LambdaTrace(every=2)
    resumed = learn_lambdas(ctrl, spec, data, settings, seed=0, progress=False, trace=trace,
                            checkpoint=TrainingCheckpoint(path, identity, every_steps=4, every_seconds=None))
    assert torch.equal(resumed, expected)
    assert trace.steps == reference.steps == [2, 4, 6, 8, 10, 12, 14, 15]
    assert all(torch.equal(a, b) for a, b in zip(trace.lambdas, reference.lambdas))
    assert all(b >= a for a, b in zip(trace.seconds, trace.seconds[1:]))  # the clock runs on over the runs


def test_a_checkpoint_of_other_training_is_refused(tmp_path):
    ctrl, spec, data = _lambda_setup()
    settings = TrainSettings(1e-2, 4, 1)
    path = tmp_path / "lambda.checkpoint.safetensors"
    learn_lambdas(ctrl, spec, data, settings, seed=0, progress=False,
                  checkpoint=TrainingCheckpoint(path, {"seed": 0, "examples": 18}, every_steps=2))
    with pytest.raises(IncompatibleArtifactError, match=r"checkpoint of other training \(seed: 0 there, 1 now\)"):
        learn_lambdas(ctrl, spec, data, settings, seed=1, progress=False,
                      checkpoint=TrainingCheckpoint(path, {"seed": 1, "examples": 18}, every_steps=2))
    path.write_text("not a checkpoint")
    with pytest.raises(CorruptArtifactError, match="delete .* to start this training over"):
        learn_lambdas(ctrl, spec, data, settings, seed=0, progress=False,
                      checkpoint=TrainingCheckpoint(path, {"seed": 0, "examples": 18}))
    assert torch.all(ctrl.theta == 0)
