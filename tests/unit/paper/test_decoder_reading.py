"""The decoder read as the paper reads Fig. 6 and Fig. 5, on a hand-built run: the LM with its own frozen head is
described, never a part of Fig. 6's claim, and the sentences notebook 08 prints state the run's numbers."""
from __future__ import annotations

import pandas as pd
import pytest

from papa.paper.claims import RunTables
from papa.paper.claims.reading import claim_runs
from papa.runs.results import ResultsTable
from papa.sections import decoders
from papa.sections.head_selection import fig5_sentence, selection_comparisons
from papa.sections.mlm_electra import own_head_sentence
from papa.sections.registry import read_claims
from tests.unit.paper.test_claims import result_rows, stability_table

MODEL = "org/decoder"
ZERO = ("average", "task", "none", "0")
# The LM with its own head: -4 nats at 1, -9 with every head constant; λ (three draws) below that at 1/2 and 1/8,
# within 0.005 nats of first → last, below random at 1/2 (its three permutations near -6.5), undecided at 1/8.
LM = {("lm", "none", "none", "none", "1"): -4.0, ("lm", *ZERO): -9.0,
      **{("lm", "average", "task", draw, "1/2"): mean
         for draw, mean in (("lambda", -9.20), ("lambda@seed1", -9.21), ("lambda@part1", -9.19),
                            ("first_to_last", -9.195), ("random", -6.4), ("random@1", -6.5), ("random@2", -6.6))},
      **{("lm", "average", "task", draw, "1/8"): mean
         for draw, mean in (("lambda", -9.10), ("lambda@seed1", -9.11), ("lambda@part1", -9.09),
                            ("first_to_last", -9.104), ("random", -8.0), ("random@1", -9.0), ("random@2", -10.0))}}
# An LM probe trained from scratch and a downstream probe, at 1 and with every head constant.
PROBES = {("lm_probe", "none", "none", "none", "1"): -6.0, ("lm_probe", *ZERO): -7.0,
          ("sst2", "none", "none", "none", "1"): 0.80, ("sst2", *ZERO): 0.76}
CHANCE = pd.DataFrame({"model": [MODEL] * 3, "task": ["lm", "lm_probe", "sst2"], "chance": [-10.8, -10.8, 0.5],
                       "how": ["uniform over the vocabulary"] * 2 + ["majority class"],
                       "context_free": [-7.8, -7.8, 0.5],
                       "context_free_how": ["unigram of 1,000 tokens", "unigram of 1,000 tokens", "majority class"]})


def _run(tmp_path, chance: pd.DataFrame | None = CHANCE) -> RunTables:
    table = ResultsTable(tmp_path / "results.csv")
    table.append([*result_rows(LM, model=MODEL, layout="standard"),
                  *result_rows(PROBES, model=MODEL, layout="standard", probe_inputs="standardized")])
    return RunTables(table.read(), agreement=stability_table({"lm": 0.9}, model=MODEL, heads=270), chance=chance)


def test_the_own_head_is_described_not_a_part_of_fig6(tmp_path):
    run = _run(tmp_path)
    assert {"1", "0", "1/2", "1/8"} <= set(run.results[run.results.task == "lm"].fraction_label.astype(str))
    fig6 = {r.claim: r for r in read_claims(run)}["fig6"].decoder
    names = [p.name for p in fig6.parts]
    assert not [n for n in names if "own head" in n] and "LM (own head)" not in fig6.ours
    assert "LM probe (from scratch) at 0 drops more than sst2" in names
    assert fig6.verdict_text == "partly read (2 of 4 parts)"  # the LM probe's two scales; MLM's nats, ELECTRA not
    # the own head's numbers are said in its description instead
    sentence = own_head_sentence(claim_runs(run)[1])
    assert sentence.startswith("decoder's LM with its own head scores -4.000 nats with every head input-dependent and "
                               "-9.000 nats with every head constant, 1.200 nats below the strongest predictor that "
                               "needs no model (-7.800 nats, unigram of 1,000 tokens).")
    assert "frozen" in sentence and "not comparable with the downstream probes', retrained" in sentence
    assert decoders.own_head_description(run, "quick") == sentence  # the rows notebook 08's profile made


def test_the_own_heads_baseline_is_named_as_the_run_wrote_it(tmp_path):
    uniform = own_head_sentence(claim_runs(_run(tmp_path, CHANCE[["model", "task", "chance", "how"]]))[1])
    assert "-9.000 nats with every head constant, 1.800 nats above chance (-10.800 nats, uniform over the " \
           "vocabulary)." in uniform
    missing = own_head_sentence(claim_runs(_run(tmp_path / "none", None))[1])
    assert ("-9.000 nats with every head constant; the strongest predictor that needs no model is not written yet "
            "(tables/decoder_chance_levels.csv).") in missing
    lone = RunTables(_run(tmp_path / "lone").results.query("task != 'lm'"))
    assert own_head_sentence(claim_runs(lone)[1]) == ""
    assert decoders.own_head_description(lone, "quick").startswith("No LM scored with its own head")


def test_fig5s_sentence_states_the_failing_and_undecided_comparisons_and_lambda_below_every_head(tmp_path):
    run = _run(tmp_path)
    decoder = claim_runs(run)[1]
    fig5 = {r.claim: r for r in read_claims(run)}["fig5"].decoder
    assert fig5.verdict == "does not hold"
    text = fig5_sentence(decoder)
    assert text == decoders.fig5_explanation(run, "quick")
    found = {(c.method, c.fraction): c.estimate for c in selection_comparisons(decoder)}
    assert found["random", "1/2"].value == pytest.approx(-2.7)
    assert text.startswith("Fig. 5 does not hold on the decoder (Holm's correction over its 4 comparisons read). "
                           f"On lm, λ scores below random at 1/2 (λ − random {found['random', '1/2'].text(3)} nats); ")
    assert (f"λ is undecided against first → last at 1/2 (λ − first → last {found['first_to_last', '1/2'].text(3)} "
            f"nats) and 1/8 ({found['first_to_last', '1/8'].text(3)} nats): within 0.005 nats of it") in text
    assert f"λ is undecided against random at 1/8 (λ − random {found['random', '1/8'].text(3)} nats)" in text
    assert found["first_to_last", "1/2"].text(3).startswith("-0.005 [")
    assert "At 1/2 and 1/8 λ scores below every head constant (-9.000 nats): λ − every head constant -0.200 [" in text
    assert "nats at 1/2 and -0.100 [" in text and "does worse than replacing them all" in text
    assert text.endswith("Reversed λ was not run, so 'reversed λ is the worst' is not read.")


def test_fig5s_sentence_names_a_ranking_the_gate_does_not_read(tmp_path):
    run = _run(tmp_path)
    unstable = RunTables(run.results, agreement=stability_table({"lm": 0.2}, model=MODEL, heads=270),
                         chance=CHANCE)
    text = fig5_sentence(claim_runs(unstable)[1])
    assert text.startswith("Fig. 5 not read on the decoder. On lm, not read at 2 points (lm's λ rankings of 3 draws")
    assert "every head constant" not in text  # an order the gate does not read is not compared with anything
    assert fig5_sentence(claim_runs(RunTables(run.results.query("task != 'lm'")))[1]) == ""


def test_a_decoder_without_an_lm_probe_says_what_fig6_reads_instead(tmp_path):
    """The LM ran with its own head alone: Fig. 6's decoder line stays, not read, and says why."""
    alone = RunTables(_run(tmp_path).results.query("task != 'lm_probe'"), chance=CHANCE)
    fig6 = {r.claim: r for r in read_claims(alone)}["fig6"].decoder
    assert fig6 is not None and fig6.verdict == "not read"
    part = fig6.parts[0]
    assert part.name == "LM probe (from scratch) drops more" and "described, not read" in part.numbers


def test_a_chance_level_is_the_finite_context_free_one_else_the_written_chance_else_none():
    from papa.paper.claims.scores import ClaimRun

    results = pd.DataFrame({"model": [], "task": []})
    levels = pd.DataFrame({"model": ["m", "m", "m"], "task": ["lm", "sst2", "pos"],
                           "chance": [-9.0, 0.5, float("nan")], "context_free": [-7.5, float("nan"), float("nan")]})
    run = ClaimRun(results, None, None, levels, decoders=True)
    assert run.chance("m", "lm") == -7.5  # the strongest predictor that needs no model
    assert run.chance("m", "sst2") == 0.5  # no finite context-free level: the written chance
    assert run.chance("m", "pos") is None  # nothing finite written: read as not written, never NaN
    assert run.chance("m", "ner") is None  # no row
    assert ClaimRun(results, None, None, levels[["model", "task"]]).chance("m", "lm") is None  # no column
    assert ClaimRun(results, None, None, None).chance("m", "lm") is None  # no table


def test_the_named_baseline_is_the_level_chance_returns():
    from papa.paper.claims.scores import ClaimRun

    levels = pd.DataFrame({"model": ["m", "m"], "task": ["lm", "pos"], "chance": [-9.0, 0.2],
                           "how": ["uniform over the vocabulary", None], "context_free": [-7.5, float("inf")],
                           "context_free_how": ["unigram of the training tokens", "never finite"]})
    run = ClaimRun(pd.DataFrame({"model": [], "task": []}), None, None, levels, decoders=True)
    assert run.chance_source("m", "lm") == ("the strongest predictor that needs no model",
                                            "unigram of the training tokens")
    # an infinite context-free level is not the one `chance` returns, so it is not the one named either
    assert run.chance("m", "pos") == 0.2 and run.chance_source("m", "pos") == ("chance", "")
