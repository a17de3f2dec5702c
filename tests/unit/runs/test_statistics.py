"""Paired estimates, evaluation-set resampling and the three verdicts, on numbers small enough to check by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from papa.probing.predictions import EvalPredictions
from papa.runs.statistics import (DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, PARTLY_READ, Estimate, Outcome, Scores,
                                  above, all_of, any_of, at_least, at_most, difference, estimate, holm, mean_of,
                                  over_orders, relative_drop, resample_weights, scores, spearman_test, within)


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
    assert above(difference(b, a), 0.0).verdict == HOLDS             # paired: a real drop
    assert within(difference(a, b), -0.01, 0.01).verdict == DOES_NOT_HOLD


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
    assert {t.verdict for t in (at_most(e, 1.0), at_least(e, 0.0), within(e, -1, 1), above(e))} == {INCONCLUSIVE}


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
    assert at_most(e, 0.04).verdict == most
    assert at_least(e, 0.0).verdict == least
    assert within(e, -0.05, 0.05).verdict == inside


def test_combining_parts():
    assert all_of([HOLDS, HOLDS]) == HOLDS
    assert all_of([HOLDS, INCONCLUSIVE]) == INCONCLUSIVE
    assert all_of([HOLDS, INCONCLUSIVE, DOES_NOT_HOLD]) == DOES_NOT_HOLD
    assert all_of([NOT_READ]) == all_of([]) == NOT_READ
    assert any_of([DOES_NOT_HOLD, HOLDS]) == HOLDS
    assert any_of([DOES_NOT_HOLD, INCONCLUSIVE]) == INCONCLUSIVE
    assert any_of([DOES_NOT_HOLD, DOES_NOT_HOLD]) == DOES_NOT_HOLD
    with pytest.raises(ValueError, match="unknown verdict"):
        all_of(["partly"])


def test_a_claim_with_unread_parts_is_partly_read_never_holds():
    """The old rule left unread parts out, so a claim read on one part of three printed "holds"."""
    assert all_of([HOLDS, NOT_READ, NOT_READ]) == PARTLY_READ
    assert all_of([HOLDS, PARTLY_READ]) == PARTLY_READ
    assert all_of([INCONCLUSIVE, NOT_READ]) == INCONCLUSIVE and all_of([DOES_NOT_HOLD, NOT_READ]) == DOES_NOT_HOLD


def _e(value, se_seeds, se_examples=0.0, seeds=5, resamples=1000):
    return Estimate(value=value, se_seeds=se_seeds, se_examples=se_examples, seeds=seeds,
                    examples=se_examples > 0, resamples=resamples)


def test_welch_satterthwaite_degrees_of_freedom():
    """CoLA's case: the evaluation bootstrap's standard error dominates the seeds' (0.162 vs 0.0175), so the
    combined error has about 10³ degrees of freedom (R − 1 = 999 bounds the bootstrap's), not k − 1 = 4."""
    e = _e(0.35, se_seeds=0.0175, se_examples=0.162)
    assert 900 < e.df < 1000
    t = stats.t.ppf(0.975, e.df)
    assert e.interval() == pytest.approx((0.35 - t * e.se, 0.35 + t * e.se))
    assert t < 1.97 < stats.t.ppf(0.975, 4)
    # seeds alone: k − 1; the two parts alike: in between
    assert _e(0.1, 0.02).df == 4
    assert 4 < _e(0.1, 0.02, 0.02).df < 20


def test_an_interval_of_the_bootstrap_is_not_widened_to_t_with_k_minus_1():
    """The old rule's t(4) reads this inconclusive: 0.05 − 2.78 × 0.020 < 0; with the combined error's degrees of
    freedom it holds (0.05 − 1.96 × 0.020 > 0)."""
    e = _e(0.05, se_seeds=0.001, se_examples=0.020)
    old_low = 0.05 - stats.t.ppf(0.975, 4) * e.se
    assert old_low < 0
    assert above(e).verdict == HOLDS


def test_a_test_keeps_the_p_values_of_its_two_sides():
    e = _e(0.05, se_seeds=0.01)
    t = above(e)
    assert t.p_holds == pytest.approx(stats.t.sf(5.0, 4)) and t.p_fails == pytest.approx(stats.t.cdf(5.0, 4))
    inside = within(_e(0.0, 0.01), -0.05, 0.05)  # TOST: the larger of the two one-sided p's
    assert inside.verdict == HOLDS and inside.p_holds == pytest.approx(stats.t.sf(5.0, 4))


def test_holm_step_down():
    assert holm([0.001, 0.02, 0.02], alpha=0.025) == [True, False, False]  # 0.02 > 0.025 / 2
    assert holm([0.004, 0.008, 0.02], alpha=0.025) == [True, True, True]   # 0.004 < 0.025/3, 0.008 < 0.025/2, 0.02
    assert holm([math.nan, 0.001], alpha=0.025) == [False, True]


def test_does_not_hold_on_any_one_comparison_is_corrected_for_their_number():
    """Ten comparisons, each just beyond its bound (one-sided p = 0.01): the old rule said "does not hold" on
    any one of them (family-wise error about 1 − 0.975¹⁰ = 22% when none truly fails); Holm's needs p ≤ 0.0025."""
    each = Outcome(DOES_NOT_HOLD, 0.99, 0.01)
    assert all_of([each]) == DOES_NOT_HOLD
    assert all_of([each] * 10) == INCONCLUSIVE
    assert all_of([Outcome(DOES_NOT_HOLD, 0.999, 0.001)] + [each] * 9) == DOES_NOT_HOLD


def test_sometimes_is_corrected_for_the_number_of_places():
    """"Sometimes performance improves" on one of four tasks at one-sided p = 0.02: the old rule said holds."""
    each = Outcome(HOLDS, 0.02, 0.98)
    assert any_of([each]) == HOLDS
    assert any_of([each] * 4) == INCONCLUSIVE
    assert any_of([Outcome(HOLDS, 0.001, 0.999), *[each] * 3]) == HOLDS


def test_spearman_is_exact_below_ten_models():
    """Three perfectly ranked models: scipy's asymptotic p is 0.0, the exact one-sided p 1/6: no evidence."""
    assert stats.spearmanr([1, 2, 3], [1, 2, 3]).pvalue < 0.05  # the old rule's p
    rho, p_more, p_less = spearman_test([1, 2, 3], [1, 2, 3])
    assert rho == 1.0 and p_more == pytest.approx(1 / 6) and p_less == 1.0
    assert spearman_test([0.1, 0.5, 0.3, 0.9], [1, 3, 2, 4])[1] == pytest.approx(1 / 24)
    rho, p_more, _ = spearman_test([1, 2, 3, 4, 5], [2, 1, 3, 4, 5])  # ρ = 0.9: 5 of 120 orders reach it
    assert rho == pytest.approx(0.9) and p_more == pytest.approx(5 / 120)
    assert spearman_test(range(12), range(12))[1] < 1e-6  # ten or more: the t approximation


def test_the_exact_spearman_p_is_the_share_of_orders_that_reach_the_observed_rho():
    """Counted here over every order of y's ranks (ties in both samples, and orders that tie the observed ρ)."""
    from itertools import permutations

    x, y = [0.2, 0.2, 0.5, 0.7, 0.9, 0.9], [1, 3, 2, 2, 5, 4]
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    rho = stats.pearsonr(rx, ry).statistic
    rhos = [stats.pearsonr(rx, order).statistic for order in permutations(ry)]
    got = spearman_test(x, y)
    assert got[0] == pytest.approx(rho)
    assert got[1] == pytest.approx(sum(r >= rho - 1e-12 for r in rhos) / len(rhos))
    assert got[2] == pytest.approx(sum(r <= rho + 1e-12 for r in rhos) / len(rhos))


def test_the_mean_of_independent_estimates():
    a, b = _e(0.1, 0.02), _e(0.3, 0.04, seeds=3)
    m = mean_of([a, b])
    assert m.value == pytest.approx(0.2) and m.se_seeds == pytest.approx(math.hypot(0.02, 0.04) / 2)
    parts = (0.01 ** 4 / 4 + 0.02 ** 4 / 2)
    assert m.df == pytest.approx(m.se_seeds ** 4 / parts)


def test_estimate_of_a_quantity_of_several_settings():
    # the mean over two tasks of the relative drop: a function of four settings' means
    o1, z1, o2, z2 = (_scores(v) for v in ([0.8, 0.9], [0.7, 0.8], [0.5, 0.5], [0.4, 0.5]))
    e = estimate(lambda a, b, c, d: ((a - b) / a + (c - d) / c) / 2, o1, z1, o2, z2)
    assert e.value == pytest.approx(((0.85 - 0.75) / 0.85 + (0.5 - 0.45) / 0.5) / 2)
    assert e.seeds == 2 and e.se_seeds > 0


def test_the_orders_spread_adds_its_variance_with_its_degrees_of_freedom():
    joint = Estimate(value=0.02, se_seeds=0.004, se_examples=0.003, seeds=5, examples=True, resamples=1000)
    wide = over_orders(joint, [0.01, 0.02, 0.03])
    assert wide.se_orders == pytest.approx(math.sqrt(0.0001 / 3)) and wide.df_orders == pytest.approx(2)
    assert wide.se == pytest.approx(math.sqrt(0.004 ** 2 + 0.003 ** 2 + 0.0001 / 3))
    parts = 0.004 ** 4 / 4 + 0.003 ** 4 / 999 + (0.0001 / 3) ** 2 / 2
    assert wide.df == pytest.approx(wide.se ** 4 / parts) and wide.orders == 3
    # Two arms (λ's rankings against random permutations): their variances add, Welch–Satterthwaite across them.
    both = over_orders(joint, [0.01, 0.02, 0.03], [0.0, 0.01, 0.03, 0.02, 0.04])
    v1, v2 = 0.0001 / 3, np.var([0.0, 0.01, 0.03, 0.02, 0.04], ddof=1) / 5
    assert both.se_orders ** 2 == pytest.approx(v1 + v2)
    assert both.df_orders == pytest.approx((v1 + v2) ** 2 / (v1 ** 2 / 2 + v2 ** 2 / 4)) and both.orders == 3
    # One draw says nothing of the order's variance: nothing is added, and the estimate says it had one order.
    one = over_orders(joint, [0.02], [0.01, 0.03])
    assert one.se_orders == pytest.approx(math.sqrt(np.var([0.01, 0.03], ddof=1) / 2)) and one.orders == 1
    assert over_orders(joint, [0.02]).se == joint.se
    # mean_of carries the orders' part: two independent tasks, each with its spread.
    mean = mean_of([wide, wide])
    assert mean.se_orders == pytest.approx(wide.se_orders / math.sqrt(2)) and mean.df_orders == pytest.approx(4)


def test_an_interval_over_orders_covers_the_mean_over_every_order_and_a_fixed_order_interval_does_not():
    # Each draw of the order (a λ ranking) shifts the score by its own effect u ~ N(0, 0.02); probe seeds add
    # N(0, 0.005). The quantity is the mean over draws of the order, estimated from 4 draws x 5 seeds; its true value
    # (over every possible order) is 0. Holding the 4 draws fixed, the interval misses it most of the time.
    rng = np.random.default_rng(7)
    covered_fixed = covered_orders = 0
    trials = 400
    for _ in range(trials):
        effects = rng.normal(0, 0.02, size=4)
        settings = [_scores(u + rng.normal(0, 0.005, size=5)) for u in effects]
        joint = estimate(lambda *draws: sum(draws) / len(draws), *settings)
        low, high = joint.interval()
        covered_fixed += low <= 0 <= high
        low, high = over_orders(joint, [s.values.mean() for s in settings]).interval()
        covered_orders += low <= 0 <= high
    assert covered_orders / trials >= 0.93
    assert covered_fixed / trials < 0.6
