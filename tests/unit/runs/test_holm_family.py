"""Holm's correction over a claim's whole family: every comparison read enters m, whatever its own
verdict, so stronger evidence never weakens a family's verdict and another comparison never strengthens it."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from papa.runs.statistics import (ALPHA, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_READ, Outcome, all_of, any_of,
                                  corrected, holm, holm_adjusted)


def _holds_side(p: float) -> Outcome:
    """A one-sided comparison with p-value `p` of "holds" (and 1 − p of "does not hold"), read at ALPHA."""
    q = 1 - p
    return Outcome(HOLDS if p < ALPHA else DOES_NOT_HOLD if q < ALPHA else INCONCLUSIVE, p, q)


def _fails_side(p: float) -> Outcome:
    """The same with `p` the p-value of "does not hold"."""
    q = 1 - p
    return Outcome(DOES_NOT_HOLD if p < ALPHA else HOLDS if q < ALPHA else INCONCLUSIVE, q, p)


def test_fig2_sometimes_improves_at_4befcb8_is_inconclusive():
    """The stored run's five one-sided p of "improves" (cola, sst2, sst2 with the full profile's ranking, ner, pos):
    the rule at 4befcb8 ran Holm on the one p already below α and printed "holds on 1 of 5"; with m = 5 the
    smallest adjusted p is 5 × 0.0198 = 0.099."""
    family = [_holds_side(p) for p in (0.784, 0.804, 0.0198, 0.788, 0.602)]
    assert any_of(family) == INCONCLUSIVE
    fixed = corrected(family, "holds")
    assert fixed[2].verdict == INCONCLUSIVE and fixed[2].p_adjusted == pytest.approx(0.099)
    assert {t.family for t in fixed} == {5}


@pytest.mark.parametrize("side, make, combine, verdict", [
    ("holds", _holds_side, any_of, HOLDS), ("fails", _fails_side, all_of, DOES_NOT_HOLD)])
def test_one_significant_among_inconclusive_is_corrected_for_all_of_them(side, make, combine, verdict):
    """At 4befcb8 one comparison at p = .02 beside three inconclusive ones kept its verdict (m = 1), while four at
    p = .02 read inconclusive (m = 4): more evidence weakened the family. Now both read inconclusive."""
    one = [make(0.02), make(0.3), make(0.4), make(0.5)]
    four = [make(0.02)] * 4
    assert combine(one) == INCONCLUSIVE and combine(four) == INCONCLUSIVE
    assert combine([make(0.001), make(0.3), make(0.4), make(0.5)]) == verdict  # 4 × 0.001 < 0.025


def test_a_part_not_read_is_not_in_the_family():
    family = [_holds_side(0.02), Outcome(NOT_READ), Outcome(NOT_READ)]
    assert any_of(family) == HOLDS
    assert corrected(family, "holds")[0].family == 1


def test_a_comparison_without_an_interval_counts_in_m_and_is_never_rejected():
    assert holm([math.nan, 0.001]) == [False, True]
    assert holm_adjusted([math.nan, 0.001]) == [1.0, 0.002]
    assert any_of([Outcome(INCONCLUSIVE), _holds_side(0.02)]) == INCONCLUSIVE  # 2 × 0.02 > 0.025


def test_holm_adjusted_p_values_by_hand():
    # sorted 0.01, 0.02, 0.04 with m = 3: 0.03, max(0.03, 0.04), max(0.04, 0.04)
    assert holm_adjusted([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm_adjusted([0.6, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1


_p = st.floats(min_value=1e-6, max_value=1 - 1e-6)


def _rejected(tests, side):
    key = HOLDS if side == "holds" else DOES_NOT_HOLD
    return [t.verdict == key for t in corrected(tests, side)]


@settings(max_examples=300, deadline=None)
@given(st.lists(_p, min_size=1, max_size=8), st.data())
def test_stronger_evidence_never_weakens_the_family(ps, data):
    i = data.draw(st.integers(0, len(ps) - 1))
    stronger = list(ps)
    stronger[i] = data.draw(st.floats(min_value=1e-7, max_value=ps[i]))
    for side, make in (("holds", _holds_side), ("fails", _fails_side)):
        before = _rejected([make(p) for p in ps], side)
        after = _rejected([make(p) for p in stronger], side)
        assert all(a or not b for a, b in zip(after, before)), (side, ps, stronger)
    assert not (any_of([_holds_side(p) for p in ps]) == HOLDS and any_of([_holds_side(p) for p in stronger]) != HOLDS)
    assert not (all_of([_fails_side(p) for p in ps]) == DOES_NOT_HOLD
                and all_of([_fails_side(p) for p in stronger]) != DOES_NOT_HOLD)


@settings(max_examples=300, deadline=None)
@given(st.lists(_p, min_size=1, max_size=8), _p)
def test_adding_a_comparison_never_strengthens_the_family(ps, extra):
    for side, make in (("holds", _holds_side), ("fails", _fails_side)):
        before = _rejected([make(p) for p in ps], side)
        after = _rejected([make(p) for p in [*ps, extra]], side)
        assert all(b or not a for a, b in zip(after[:-1], before)), (side, ps, extra)
    grown = [_holds_side(p) for p in [*ps, extra]]
    if not _rejected(grown, "holds")[-1]:  # the added comparison does not decide it: the verdict cannot move its way
        assert any_of(grown) != HOLDS or any_of([_holds_side(p) for p in ps]) == HOLDS
    assert all_of([_fails_side(p) for p in [*ps, extra]]) != DOES_NOT_HOLD \
        or all_of([_fails_side(p) for p in ps]) == DOES_NOT_HOLD or _rejected([_fails_side(p) for p in [*ps, extra]],
                                                                                "fails")[-1]
