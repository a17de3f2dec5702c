"""Paired estimates, evaluation-set resampling and the three verdicts, on numbers small enough to check by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from papa.probing.predictions import EvalPredictions
from papa.runs.statistics import (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, Estimate, Scores, above, all_of,
                                  any_of, at_least, at_most, difference, estimate, relative_drop, resample_weights,
                                  scores, within)


def _scores(values, seeds=None):
    return Scores(tuple(seeds or range(len(values))), np.array(values, dtype=float), None)


def test_a_difference_is_the_paired_t_interval():
    a = _scores([0.80, 0.70, 0.75, 0.78, 0.72])
    b = _scores([0.78, 0.69, 0.72, 0.77, 0.70])
    e = difference(a, b)
    d = b.values - a.values
    assert e.value == pytest.approx(d.mean())
    assert e.se_seeds == pytest.approx(d.std(ddof=1) / math.sqrt(5))
    low, high = e.interval()
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / math.sqrt(5)
    assert (low, high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert not e.examples


def test_paired_and_unpaired_readings_disagree():
    # Seeds move both settings together (probe initialisation): the paired difference is clearly negative although
    # the two settings' own 95% intervals overlap widely, so an unpaired reading calls them alike.
    base = np.array([0.10, 0.20, 0.15, 0.25, 0.12])
    a, b = _scores(base), _scores(base - np.array([0.030, 0.025, 0.028, 0.032, 0.027]))
    t = stats.t.ppf(0.975, 4)
    reach = t * (base.std(ddof=1) + (base - 0.03).std(ddof=1)) / math.sqrt(5)
    assert abs(a.values.mean() - b.values.mean()) < reach  # unpaired: the intervals overlap
    assert above(difference(b, a), 0.0) == HOLDS             # paired: a real drop
    assert within(difference(a, b), -0.01, 0.01) == DOES_NOT_HOLD


def test_pairing_uses_the_shared_seeds_only():
    a = _scores([1.0, 2.0, 3.0], seeds=[0, 1, 2])
    b = _scores([2.0, 3.0, 9.0], seeds=[0, 1, 5])
    e = difference(a, b)
    assert e.seeds == 2 and e.value == pytest.approx(1.0) and e.se_seeds == pytest.approx(0.0)
    with pytest.raises(ValueError, match="share no seed"):
        difference(_scores([1.0], seeds=[0]), _scores([1.0], seeds=[1]))


def test_one_seed_has_no_interval_and_reads_inconclusive():
    e = difference(_scores([0.5]), _scores([0.9]))
    assert math.isnan(e.interval()[0]) and "one seed" in e.text()
    assert at_most(e, 1.0) == at_least(e, 0.0) == within(e, -1, 1) == above(e) == INCONCLUSIVE


def test_relative_drop_of_the_means():
    e = relative_drop(_scores([0.8, 0.6]), _scores([0.6, 0.6]))
    assert e.value == pytest.approx((0.7 - 0.6) / 0.7)


def test_resampling_adds_the_evaluation_sets_uncertainty():
    rng = np.random.default_rng(0)
    n = 400
    ref = rng.integers(0, 2, n)
    weights = resample_weights(n, 300, key="sst2")
    assert weights.shape == (300, n) and (weights.sum(axis=1) == n).all()
    np.testing.assert_array_equal(weights, resample_weights(n, 300, key="sst2"))  # same draws every time
    assert not np.array_equal(weights, resample_weights(n, 300, key="cola"))
    runs = {}
    for name, p_right in (("a", 0.8), ("b", 0.7)):
        stats_, values = {}, {}
        for seed in range(3):
            pred = np.where(rng.random(n) < p_right, ref, 1 - ref)
            pred_obj = EvalPredictions.from_labels("sentence", pred, ref)
            stats_[seed] = pred_obj.example_statistics("accuracy")
            values[seed] = float((pred == ref).mean())
        runs[name] = scores(values, stats_, metric="accuracy", weights=weights)
    e = difference(runs["a"], runs["b"])
    assert e.examples and e.se_examples > 0
    # the spread of a difference of accuracies on 400 examples: sqrt(p(1-p)/n)-sized, a few points
    assert 0.005 < e.se_examples < 0.05
    without = difference(_scores(runs["a"].values), _scores(runs["b"].values))
    assert without.value == pytest.approx(e.value) and without.se < e.se
    # a seed without predictions leaves the examples out, and says so
    partial = scores({0: 0.8, 1: 0.7}, {0: np.ones((n, 2))}, metric="accuracy", weights=weights)
    assert partial.resampled is None


@pytest.mark.parametrize("interval, most, least, inside", [
    ((0.01, 0.03), HOLDS, HOLDS, HOLDS),                      # well inside (-0.05, 0.05), below 0.04, above 0
    ((0.03, 0.06), INCONCLUSIVE, HOLDS, INCONCLUSIVE),        # straddles 0.04 / 0.05
    ((0.06, 0.09), DOES_NOT_HOLD, HOLDS, DOES_NOT_HOLD),      # all beyond
    ((-0.02, 0.01), HOLDS, INCONCLUSIVE, HOLDS),
    ((-0.09, -0.06), HOLDS, DOES_NOT_HOLD, DOES_NOT_HOLD),
])
def test_verdicts_of_an_interval(interval, most, least, inside):
    low, high = interval
    half = (high - low) / 2
    e = Estimate(value=low + half, se_seeds=half / stats.t.ppf(0.975, 4), se_examples=0.0, seeds=5, examples=False)
    assert e.interval() == pytest.approx(interval)
    assert at_most(e, 0.04) == most
    assert at_least(e, 0.0) == least
    assert within(e, -0.05, 0.05) == inside


def test_combining_parts():
    assert all_of([HOLDS, HOLDS, NOT_READ]) == HOLDS
    assert all_of([HOLDS, INCONCLUSIVE]) == INCONCLUSIVE
    assert all_of([HOLDS, INCONCLUSIVE, DOES_NOT_HOLD]) == DOES_NOT_HOLD
    assert all_of([NOT_READ]) == all_of([]) == NOT_READ
    assert any_of([DOES_NOT_HOLD, HOLDS]) == HOLDS
    assert any_of([DOES_NOT_HOLD, INCONCLUSIVE]) == INCONCLUSIVE
    assert any_of([DOES_NOT_HOLD, DOES_NOT_HOLD]) == DOES_NOT_HOLD
    with pytest.raises(ValueError, match="unknown verdict"):
        all_of(["partly"])


def test_estimate_of_a_quantity_of_several_settings():
    # the mean over two tasks of the relative drop: a function of four settings' means
    o1, z1, o2, z2 = (_scores(v) for v in ([0.8, 0.9], [0.7, 0.8], [0.5, 0.5], [0.4, 0.5]))
    e = estimate(lambda a, b, c, d: ((a - b) / a + (c - d) / c) / 2, o1, z1, o2, z2)
    assert e.value == pytest.approx(((0.85 - 0.75) / 0.85 + (0.5 - 0.45) / 0.5) / 2)
    assert e.seeds == 2 and e.se_seeds > 0
