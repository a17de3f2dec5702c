"""How far λ moved and how much two rankings agree, on hand-made λ with known answers; recording λ
while it learns leaves what it learns unchanged."""
from __future__ import annotations

import math

import pytest
import torch

import papa
from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.constants import data_free_constants
from papa.probing.convergence import lambda_movement, learning_curve, ranking_agreement, replaced_heads, spearman
from papa.probing.features import encode_task
from papa.probing.ranking import LambdaTrace, learn_lambdas
from papa.probing.training import TrainSettings
from papa.tasks.data import Example
from papa.tasks.registry import get_task

# 2 layers x 4 heads, every λ different: the "lambda" order replaces heads from 0.1 upwards.
LAM = torch.tensor([[0.10, 0.20, 0.30, 0.40], [0.60, 0.70, 0.80, 0.90]])


def test_movement_of_lambda_and_its_logits():
    moved = lambda_movement(torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    assert moved == {"lambda_min": 0.5, "lambda_max": 0.5, "lambda_spread": 0.0, "logit_spread": 0.0,
                     "logit_std": 0.0}
    moved = lambda_movement(torch.sigmoid(torch.tensor([[-1.0, 1.0]], dtype=torch.float64)))
    assert moved["logit_spread"] == pytest.approx(2.0) and moved["logit_std"] == pytest.approx(1.0)
    assert moved["lambda_spread"] == pytest.approx(math.tanh(0.5))  # sigmoid(1) - sigmoid(-1)
    assert moved["lambda_min"] == pytest.approx(1 / (1 + math.e))
    with pytest.raises(ValueError, match=r"\[layers, heads\]"):
        lambda_movement(torch.tensor([0.5, 0.4]))


def test_identical_rankings_agree_fully():
    agreement = ranking_agreement(LAM, LAM.clone())
    assert agreement["spearman"] == pytest.approx(1.0)
    assert all(agreement[f"overlap_{side}_{f}"] == 1.0 for side in ("replaced", "kept") for f in ("1/2", "1/8"))
    # only the order counts: a monotone change of λ (e.g. more training of the same order) agrees fully too
    assert ranking_agreement(LAM, LAM ** 3)["spearman"] == pytest.approx(1.0)


def test_reversed_rankings_disagree_fully():
    reversed_lam = 1 - LAM
    agreement = ranking_agreement(LAM, reversed_lam, fractions=("1/2",))
    assert agreement["spearman"] == pytest.approx(-1.0)
    # half the heads replaced: one replaces layer 0, the other layer 1, no head in common
    assert agreement["overlap_replaced_1/2"] == 0.0 and agreement["overlap_kept_1/2"] == 0.0
    assert set(agreement) == {"spearman", "overlap_replaced_1/2", "overlap_kept_1/2"}


def test_overlap_is_the_share_of_common_heads_of_the_grids_sets():
    # 1/4 of 8 heads kept: the two largest λ. Swap the third largest with the largest: one kept head in common.
    other = LAM.clone()
    other[1, 3], other[1, 1] = LAM[1, 1], LAM[1, 3]
    agreement = ranking_agreement(LAM, other, fractions=("1/4",))
    assert agreement["overlap_kept_1/4"] == 0.5          # {(1,2),(1,3)} vs {(1,2),(1,1)}
    assert agreement["overlap_replaced_1/4"] == pytest.approx(5 / 6)
    assert torch.equal(replaced_heads(LAM, "1/4"), ~torch.tensor([[0, 0, 0, 0], [0, 0, 1, 1]], dtype=torch.bool))
    # nothing replaced at fraction 1: two empty sets agree
    assert ranking_agreement(LAM, 1 - LAM, fractions=("1",))["overlap_replaced_1"] == 1.0
    # 1/16 of 8 heads is half a head: rounded down as the grid rounds it, every head is replaced
    assert replaced_heads(LAM, "1/16", rounding="down").all()


def test_ties_take_average_ranks_as_scipy_does():
    a = torch.tensor([[0.5, 0.5, 0.4], [0.6, 0.5, 0.7]])
    b = torch.tensor([[0.3, 0.2, 0.1], [0.6, 0.6, 0.9]])
    # a's average ranks: (3, 3, 1, 5, 3, 6)
    # Pearson's r of the average ranks, by hand: a's ranks − 3.5 = (-.5, -.5, -2.5, 1.5, -.5, 2.5), b's
    # (3, 2, 1, 4.5, 4.5, 6) − 3.5 = (-.5, -1.5, -2.5, 1, 1, 2.5)
    assert spearman(a, b) == pytest.approx(14.5 / math.sqrt(15.5 * 17), rel=1e-12)
    # no order at all (λ untouched at its start): ρ is undefined
    assert math.isnan(spearman(torch.full((2, 3), 0.5), b))
    with pytest.raises(ValueError, match="shapes"):
        spearman(a, b[:, :2])


def test_learning_curve_compares_the_steps_both_traces_recorded():
    a, b = LambdaTrace(every=2), LambdaTrace(every=3)
    for step in (2, 4, 6):
        a.record(step, LAM, float(step))
    for step in (3, 6):
        b.record(step, 1 - LAM if step == 3 else LAM, float(step))
    (row,) = learning_curve(a, b)
    assert row["step"] == 6 and row["spearman"] == pytest.approx(1.0) and row["overlap_kept_1/8"] == 1.0
    assert row["lambda_spread_a"] == pytest.approx(0.8) and row["logit_spread_b"] > 0
    with pytest.raises(InputError, match="every"):
        LambdaTrace(every=0)


def _tiny_setup():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec = get_task("sst2")
    texts = ["the movie was good", "it was bad", "a very good film", "not good at all", "the plot is bad"] * 2
    data = encode_task(tok, spec, [Example(text=t, label=i % 2) for i, t in enumerate(texts)], max_length=16,
                       model_type="bert")
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, 16))
    return ctrl, spec, data


def test_recording_lambda_changes_nothing_it_learns():
    ctrl, spec, data = _tiny_setup()
    settings = TrainSettings(1e-2, 4, 2)  # 10 examples in batches of 4: 3 steps an epoch, 6 in all
    plain = learn_lambdas(ctrl, spec, data, settings, seed=3, lambda_lr=0.05, progress=False)
    trace = LambdaTrace(every=4)
    traced = learn_lambdas(ctrl, spec, data, settings, seed=3, lambda_lr=0.05, progress=False, trace=trace)
    assert torch.equal(plain, traced)  # bit for bit
    assert trace.steps == [4, 6] and trace.total_steps == 6  # every 4 steps, and after the last one
    assert torch.equal(trace.lambdas[-1], traced) and not torch.equal(trace.lambdas[0], traced)
    assert trace.seconds == sorted(trace.seconds)
    final_only = LambdaTrace()
    learn_lambdas(ctrl, spec, data, settings, seed=3, lambda_lr=0.05, progress=False, trace=final_only)
    assert final_only.steps == [6] and torch.equal(final_only.lambdas[0], plain)
    # λ's own learning rate moves it further than the probe's
    slow = learn_lambdas(ctrl, spec, data, settings, seed=3, progress=False)
    assert lambda_movement(plain)["logit_spread"] > lambda_movement(slow)["logit_spread"]


def test_a_settling_curve_compares_every_record_with_the_final_ranking():
    from papa.probing.convergence import settled_at, settling_curve
    from papa.probing.ranking import LambdaTrace

    final = torch.linspace(0.3, 0.7, 12).reshape(3, 4)
    trace = LambdaTrace(every=10)
    noise = torch.tensor([0.3, -0.2, 0.25, -0.1, 0.2, -0.3, 0.1, -0.25, 0.15, -0.05, 0.05, -0.15]).reshape(3, 4)
    # near the final order at step 20, away from it again at 30 (ρ 0.74), near it from 40 on
    for step, weight in ((10, 1.0), (20, 0.05), (30, 1.0), (40, 0.001), (50, 0.0)):
        trace.record(step, (0.5 + (final - 0.5) * 0.1 + weight * noise * 0.05).clamp(0.01, 0.99), step / 10)
    trace.record(60, final, 6.0)
    rows = settling_curve(trace)
    assert [r["step"] for r in rows] == [10, 20, 30, 40, 50, 60] and rows[-1]["spearman"] == pytest.approx(1)
    assert rows[-1]["overlap_kept_1/16"] == 1 and rows[0]["seconds"] == 1.0
    assert rows[0]["spearman"] < 0.9 <= rows[1]["spearman"] and rows[2]["spearman"] < 0.9
    assert settled_at(rows) == 40  # not 20: it left the final order again at 30
    assert settled_at(rows[-1:]) is None
