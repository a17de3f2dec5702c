"""A printed reading recomputed by hand from the stored run, and the claim rules on the families a referee would try.

The hand computation reads the committed cpu run (``artifacts/cpu/``) without `papa.runs.compare` or
`papa.runs.statistics.estimate`: the rows from results.csv, each seed's accuracy from its stored predictions, the
paired difference, the seeds' and the evaluation bootstrap's standard errors, Welch–Satterthwaite's degrees of
freedom, the t interval and the equivalence test (TOST). Only the bootstrap's draws come from the library
(`resample_weights`: the draws every setting of a task shares are its definition, not a computation to check).
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import REPO
from papa.paper.claims import Part
from papa.paper.claims.rules import ALIKE_MARGIN, HALF_MARGIN, claim_reading, compared_part, control, tally_part
from papa.probing.predictions import load_predictions
from papa.runs.statistics import (ALPHA, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_INFORMATIVE, NOT_READ, PARTLY_READ,
                                  Estimate, Outcome, at_most, resample_weights, within)

CPU_RUN = REPO / "artifacts" / "cpu"
MODEL, TASK = "sentence-transformers/all-MiniLM-L6-v2", "sst2"
PART = f"WikiText's constants alike ({TASK})"


def _seed_rows(corpus: str) -> pd.DataFrame:
    """The protocol's rows of Table 2 on SST-2: every head replaced by average constants of `corpus`."""
    r = pd.read_csv(CPU_RUN / "results.csv")
    keep = ((r.model == MODEL) & (r.task == TASK) & (r.constants == "average") & (r.constants_corpus == corpus)
            & (r.fraction_label.astype(str) == "0") & (r.probe_inputs == "raw") & (r.layout == "official"))
    return r[keep].sort_values("seed")


def _correct(run_id: str) -> np.ndarray:
    p = load_predictions(CPU_RUN / "predictions" / f"{run_id}.safetensors")
    return (np.asarray(p.predicted) == np.asarray(p.reference)).astype(np.float64)


@pytest.fixture(scope="module")
def by_hand() -> dict:
    own, other = _seed_rows("task"), _seed_rows("mlm")
    assert list(own.seed) == list(other.seed) == [0, 1, 2, 3, 4]
    correct = {name: np.stack([_correct(i) for i in rows.run_id]) for name, rows in (("own", own), ("other", other))}
    # each stored prediction file gives its row's recorded accuracy
    for name, rows in (("own", own), ("other", other)):
        np.testing.assert_allclose(correct[name].mean(axis=1), rows.value.to_numpy(), atol=1e-6)
    k, n = correct["own"].shape
    diff = correct["other"].mean(axis=1) - correct["own"].mean(axis=1)        # per seed, paired
    value = diff.mean()
    se_seeds = diff.std(ddof=1) / math.sqrt(k)  # the jackknife of a mean difference is this
    weights = resample_weights(n, key=f"{MODEL}|{TASK}")                       # [R, n], shared by both settings
    resampled = (weights @ (correct["other"] - correct["own"]).T / n).mean(axis=1)  # [R]: mean over seeds
    se_examples = resampled.std(ddof=1)
    se = math.sqrt(se_seeds ** 2 + se_examples ** 2)
    df = se ** 4 / (se_seeds ** 4 / (k - 1) + se_examples ** 4 / (len(weights) - 1))
    half = stats.t.ppf(0.975, df) * se
    p_holds = max(stats.t.sf((value + ALIKE_MARGIN) / se, df), stats.t.cdf((value - ALIKE_MARGIN) / se, df))
    p_fails = min(stats.t.cdf((value + ALIKE_MARGIN) / se, df), stats.t.sf((value - ALIKE_MARGIN) / se, df))
    return {"value": value, "low": value - half, "high": value + half, "p_holds": p_holds, "p_fails": p_fails}


@pytest.fixture(scope="module")
def table2():
    from docs import gen_measurements

    # profile_claims(CPU_RUN, "cpu"), as the pages read it, computed once per test session
    return next(r for r in gen_measurements.cpu_claims() if r.claim == "table2")


@pytest.mark.slow  # reads the whole stored run once
def test_the_printed_interval_is_the_one_computed_by_hand(by_hand):
    page = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    line = re.search(rf"\* {re.escape(PART)}: (\S+) \[(\S+), (\S+)\]; control: every head replaced \S+ "
                     rf"\[(\S+), \S+\], not beyond the margin {ALIKE_MARGIN:g} — \*(\w[\w ]*)\*", page)
    assert line, f"docs/results.md prints no line for {PART}"
    printed = [float(v) for v in line.groups()[:3]]
    assert printed == [round(by_hand[k], 3) for k in ("value", "low", "high")]
    assert by_hand["p_holds"] < ALPHA  # inside ±0.02 by both one-sided tests...
    # ...but the all-heads drop's own interval does not clear the margin: the part could not have failed
    assert float(line.group(4)) <= ALIKE_MARGIN and line.group(5) == "not informative"


@pytest.mark.slow  # reads the whole stored run once
def test_the_readings_p_values_are_the_ones_computed_by_hand(by_hand, table2):
    part = next(p for p in table2.parts if p.name == PART)
    assert part.test.p_holds == pytest.approx(by_hand["p_holds"], rel=1e-9)
    assert part.test.p_fails == pytest.approx(by_hand["p_fails"], rel=1e-9)
    # Holm across the claim's every comparison read, on the "does not hold" side, by hand
    read = [p for p in table2.parts if p.verdict != NOT_READ]
    ordered = sorted(p.test.p_fails for p in read)
    adjusted, running = {}, 0.0
    for rank, p in enumerate(ordered):
        running = max(running, min(1.0, (len(read) - rank) * p))
        adjusted.setdefault(p, running)
    assert part.test.family == len(read) and part.test.p_adjusted == pytest.approx(adjusted[part.test.p_fails])


@pytest.mark.slow  # reads the whole stored run once
def test_notebook_claim_cell_and_printed_summary_say_the_pages_verdicts(table2):
    """The same reading, verdict and every part's numbers, reaches the page, `papa reproduce`'s summary and notebook
    05's closing cell."""
    from docs import gen_measurements
    from papa.paper.claims import format_claims
    from papa.sections.registry import section_claims

    page = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    assert f"**Table 2, another corpus's constants: {table2.verdict_text}.**" in page
    flat = [" ".join(text.split()) for text in (format_claims([table2], CPU_RUN),
                                                section_claims(gen_measurements.cpu_run(), "cpu",
                                                               "05_data_dependence"))]
    read = [p for p in table2.parts if p.verdict != NOT_READ]
    assert len(read) == 4
    for text in flat:
        assert f"Table 2 {table2.verdict_text} " in text
    for part in read:
        assert f"* {part.name}: {part.numbers} — *{part.verdict}*" in page
        for text in flat:
            assert f"{part.name}: {part.numbers} ({part.verdict})" in text


# ---- the rules on families a referee would try ------------------------------------------------------------------

def _member(name: str, verdict: str, p_holds: float, p_fails: float) -> Part:
    return Part(name, verdict, "", Outcome(verdict, p_holds, p_fails))


def _read(parts):
    return claim_reading("table1", "Table 1", "04", "", parts)


def test_one_significant_failure_among_many_inconclusive_comparisons():
    """Nine inconclusive comparisons and one that fails at p = 0.001: the inconclusive ones count in Holm's m
    (10 × 0.001 = 0.01 < 0.025), and the claim does not hold; at p = 0.004 (× 10 = 0.04) it is inconclusive."""
    quiet = [_member(f"beats zeros ({i})", INCONCLUSIVE, 0.3, 0.4) for i in range(9)]
    strong = _read([tally_part("beats every data-free matrix", [*quiet, _member("beats zeros (x)", DOES_NOT_HOLD,
                                                                                0.999, 0.001)])])
    assert strong.verdict == DOES_NOT_HOLD
    failing = next(m for m in strong.parts[0].members if m.name == "beats zeros (x)")
    assert failing.test.family == 10 and failing.test.p_adjusted == pytest.approx(0.01)
    weak = _read([tally_part("beats every data-free matrix", [*quiet, _member("beats zeros (x)", DOES_NOT_HOLD,
                                                                              0.996, 0.004)])])
    assert weak.verdict == INCONCLUSIVE
    assert "inconclusive on 10" in weak.parts[0].numbers


def test_the_correction_counts_comparisons_across_parts_and_tallies():
    """A failure at p = 0.008 alone decides a part (0.008 < 0.025); beside a three-member tally that holds, Holm's m
    is 4 (4 × 0.008 = 0.032) and the verdict it had alone is withdrawn: the claim reads inconclusive."""
    alone = _read([_member("beats zeros (cola)", DOES_NOT_HOLD, 0.992, 0.008)])
    assert alone.verdict == DOES_NOT_HOLD
    held = [_member(f"beats uniform ({t})", HOLDS, 1e-6, 1 - 1e-6) for t in ("sst2", "mrpc", "ner")]
    together = _read([_member("beats zeros (cola)", DOES_NOT_HOLD, 0.992, 0.008), tally_part("beats uniform", held)])
    assert together.parts[0].verdict == INCONCLUSIVE and together.parts[0].test.family == 4
    assert together.parts[1].verdict == HOLDS
    assert together.verdict == INCONCLUSIVE


def test_sometimes_needs_one_place_that_survives_holm():
    """"Sometimes improves": one task of four at p = 0.01 does not survive (4 × 0.01 = 0.04), at p = 0.005 it does."""
    def sometimes(p):
        members = [_member("improves (a)", HOLDS, p, 1 - p)] + [
            _member(f"improves ({t})", INCONCLUSIVE, 0.4, 0.6) for t in "bcd"]
        return claim_reading("fig2_half", "Fig. 2", "02", "", [tally_part("sometimes improves", members, anywhere=True)])

    assert sometimes(0.01).verdict == INCONCLUSIVE
    assert sometimes(0.005).verdict == HOLDS
    assert sometimes(0.005).parts[0].numbers.startswith("holds on 1 of 4 (Holm over 4, smallest adjusted p 0.020)")


def test_a_claim_whose_parts_disagree_reads_as_its_weakest_part_and_prints_each():
    """A sentence with two parts, one that holds and one that fails beyond Holm (2 × 0.001 < 0.025): the claim does
    not hold, and its line prints both parts with their own verdicts; with the failing part inconclusive instead, the
    claim is inconclusive, never "holds"."""
    def claim(p_fails):
        verdict = DOES_NOT_HOLD if p_fails < ALPHA else INCONCLUSIVE
        return _read([_member("beats zeros (sst2)", HOLDS, 1e-6, 1 - 1e-6),
                      _member("beats uniform (sst2)", verdict, 1 - p_fails, p_fails)])

    mixed = claim(0.001)
    assert mixed.verdict == DOES_NOT_HOLD
    assert [p.verdict for p in mixed.parts] == [HOLDS, DOES_NOT_HOLD]
    assert "beats zeros (sst2):  (holds)" in mixed.ours and "beats uniform (sst2):  (does not hold)" in mixed.ours
    assert claim(0.2).verdict == INCONCLUSIVE


# ---- a part that holds only where it could have failed ----------------------------------------------------------

def _five_seeds(value: float, se: float) -> Estimate:
    """An estimate over five seeds (t interval on 4 degrees of freedom: ± 2.776 se)."""
    return Estimate(value, se, 0.0, 5, False)


def _half_part(task: str, half_drop: float, all_heads_drop: float, se: float = 0.002) -> Part:
    """"No major drop at 1/2" on `task`, gated by the drop with every head replaced."""
    drop = _five_seeds(half_drop, se)
    gate = control("every head replaced", _five_seeds(all_heads_drop, se), HALF_MARGIN)
    return compared_part(f"drop at 1/2 ({task})", at_most(drop, HALF_MARGIN), drop.text(), gate)


def test_a_part_whose_control_shows_no_effect_is_not_informative():
    """The half drop 0.001 ± 0.006 holds under the margin 0.02 either way; it counts as holding only where replacing
    every head drops by more than the margin, interval and all: 0.06 ± 0.006 (informative), 0.005 ± 0.006 (inside
    the margin: not informative), 0.02 ± 0.006 (at the edge, its interval straddles the margin: the control does not
    show the effect, not informative). A part that fails keeps its verdict: failing shows it could fail."""
    cases = {"informative": 0.06, "inside": 0.005, "edge": 0.02}
    reading = claim_reading("fig2_half", "Fig. 2", "02", "", [_half_part(t, 0.001, d) for t, d in cases.items()])
    verdicts = {p.name: p.verdict for p in reading.parts}
    assert verdicts == {"drop at 1/2 (informative)": HOLDS, "drop at 1/2 (inside)": NOT_INFORMATIVE,
                        "drop at 1/2 (edge)": NOT_INFORMATIVE}
    assert reading.verdict == PARTLY_READ and reading.verdict_text == "partly read (1 of 3 parts; 2 not informative)"
    inside = reading.parts[1]
    assert inside.numbers.endswith("; control: every head replaced +0.005 [-0.001, +0.011], not beyond the margin 0.02")
    assert reading.parts[0].numbers.endswith("beyond the margin 0.02") and "not beyond" not in reading.parts[0].numbers
    # just past the edge: the control's lower end 0.0262 − 0.0056 clears 0.02
    assert _read_one(_half_part("x", 0.001, 0.0262)).verdict == HOLDS
    failing = _read_one(_half_part("x", 0.05, 0.005))
    assert failing.verdict == DOES_NOT_HOLD and failing.parts[0].verdict == DOES_NOT_HOLD
    undecided = _read_one(_half_part("x", 0.02, 0.005))
    assert undecided.parts[0].verdict == NOT_INFORMATIVE  # inconclusive, and could not have failed either


def _read_one(part: Part):
    return claim_reading("fig2_half", "Fig. 2", "02", "", [part])


def test_a_claim_of_uninformative_parts_alone_is_not_informative_and_counts_say_so():
    """Every part uninformative: the claim is not informative (never "holds"); the page's tallies count the
    informative parts and name the uninformative ones apart."""
    from docs.claim_pages import in_one_line, in_plain_words

    alike = [compared_part(f"alike ({t})", within(_five_seeds(0.001, 0.002), -ALIKE_MARGIN, ALIKE_MARGIN), "",
                           control("every head replaced", _five_seeds(0.004, 0.002), ALIKE_MARGIN, either_side=True))
             for t in ("a", "b")]
    reading = claim_reading("table2", "Table 2", "05", "", alike)
    assert reading.verdict == NOT_INFORMATIVE
    assert [p.verdict for p in reading.parts] == [NOT_INFORMATIVE, NOT_INFORMATIVE]
    line = in_one_line([reading])
    assert "contradict none of the 0 parts" in line and "2 more could not have failed (not informative)" in line
    words = in_plain_words([reading])
    assert "0 could be tested and could have failed" in words and "2 are not informative" in words
    assert "Not informative: Table 2: alike (a); Table 2: alike (b)." in words
    # an improvement beyond the margin shows the constants matter too: the two-sided control clears it
    both = control("every head replaced", _five_seeds(-0.06, 0.002), ALIKE_MARGIN, either_side=True)
    assert both.shows_effect and not control("x", _five_seeds(-0.06, 0.002), ALIKE_MARGIN).shows_effect
    # a control that did not run shows nothing
    assert not control("every head replaced", None, ALIKE_MARGIN).shows_effect
