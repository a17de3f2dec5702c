"""Learning λ (paper 3.2) on a tiny model: λ moves, the ranking covers every head, modes are restored."""
from __future__ import annotations

import torch

import papa
from papa.method.constants import data_free_constants
from papa.method.rankings import HeadRanking
from papa.method.selection import check_order
from papa.probing.features import encode_task
from papa.probing.ranking import learn_lambdas
from papa.probing.training import TrainSettings
from papa.tasks.data import Example
from papa.tasks.registry import get_task

from conftest import tiny_model, tiny_tokenizer


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
