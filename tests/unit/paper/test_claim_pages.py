"""The docs' claim pages rendered from readings: every verdict and number comes from the reading, the decoders'
apart, a partly read claim says how much was read."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from docs.claim_pages import (claim_by_claim, curve_table, decoder_claims, in_one_line, in_plain_words, lm_probe_curve,
                              results_in_brief)
from papa.core.run_folder import RunFolder
from papa.paper.claims import RunTables
from papa.runs.results import ResultsTable
from papa.sections.registry import read_claims
from tests.unit.paper.test_claims import MEANS, result_rows, stability_table


def _readings(tmp_path, decoder: bool = False):
    rows = result_rows(MEANS)
    if decoder:
        zero = ("average", "task", "none", "0")
        rows += result_rows({("lm", "none", "none", "none", "1"): -4.0, ("lm", *zero): -9.0,
                             ("lm_probe", "none", "none", "none", "1"): -6.0, ("lm_probe", *zero): -7.0,
                             ("sst2", "none", "none", "none", "1"): 0.80, ("sst2", *zero): 0.76},
                            model="org/decoder", layout="standard")
    table = ResultsTable(tmp_path / "results.csv")
    table.append(rows)
    return read_claims(RunTables(table.read(), agreement=stability_table({"sst2": 0.95, "ner": 0.95})))


def test_the_claim_section_says_each_verdict_and_part(tmp_path):
    readings = _readings(tmp_path)
    text = claim_by_claim(readings)
    for r in readings:
        assert f"**{r.where}, " in text and f": {r.verdict_text}.**" in text
        for part in r.parts:
            assert part.name in text and part.numbers in text
    assert "partly read (1 of 2 parts)" in text  # Fig. 5: reversed λ not run
    assert "* decoders (beyond the paper" not in text


def test_a_decoder_gets_lines_of_its_own(tmp_path):
    readings = _readings(tmp_path, decoder=True)
    text = claim_by_claim(readings)
    fig6 = next(r for r in readings if r.claim == "fig6")
    assert fig6.decoder is not None
    assert f"* decoders (beyond the paper; notebook `08_decoders`, `{fig6.decoder.evidence}`): " \
           f"**{fig6.decoder.verdict_text}**" in text
    assert "LM probe (from scratch) at 0 drops more than sst2" in decoder_claims(readings)
    assert "LM (own head)" not in decoder_claims(readings)  # described in notebook 08, not a part of the claim
    brief = results_in_brief(readings).splitlines()
    assert len(brief) == len(readings) and any("decoders: **" in line for line in brief)


def test_the_plain_words_count_every_part_and_name_what_holds(tmp_path):
    """The README's lead: its counts are the readings' own, encoders and decoder apart."""
    readings = _readings(tmp_path, decoder=True)
    encoder, decoder = in_plain_words(readings).splitlines()
    parts = [p for r in readings for p in r.parts if p.verdict != "descriptive"]
    held = [f"{r.where}: {p.name}" for r in readings for p in r.parts if p.verdict == "holds"]
    assert encoder.startswith(f"* **On the encoder**, of the {len(parts)} parts")
    assert all(name in encoder for name in held) and decoder.startswith("* **On the decoder**")
    unread = sum(p.verdict == "not read" for p in parts)
    assert f"{unread} could not be read" in encoder


def test_the_one_line_names_each_contradicted_part_and_counts_the_rest(tmp_path):
    """The README's takeaway: per model kind, the tested parts that do not hold are named, and the line's
    counts are the readings' own."""
    readings = _readings(tmp_path, decoder=True)
    line = in_one_line(readings)
    for whose, read in (("the encoder", readings), ("the decoder", [r.decoder for r in readings if r.decoder])):
        tested = [p for r in read for p in r.parts if p.verdict in ("holds", "inconclusive", "does not hold")]
        against = [f"{r.where}: {p.name}" for r in read for p in r.parts if p.verdict == "does not hold"]
        assert f"on {whose}, the data contradict {len(against) or 'none'} of the {len(tested)} parts" in line
        assert all(name in line for name in against)
    assert line.startswith("**In one line:** ") and in_one_line([]).endswith("no part of the paper's claims.")


def test_curve_tables():
    curves = pd.DataFrame({"task": ["lm", "lm", "lm"], "selection": ["none", "lambda", "none"],
                           "fraction_label": ["1", "1/2", "0"], "mean": [-4.0, -5.0, -9.0], "ci95": [0.0, 0.0, 0.0]})
    table = curve_table(curves, {"lm/lambda": "LM"})
    assert table.splitlines()[2] == "| LM | -4.000 | -5.000 | -9.000 |"


def test_the_paper_protocol_answer_reads_every_pair_of_the_full_profile_draws(tmp_path):
    """The paper-protocol table: a task is "not stable across data" when its disjoint halves disagree, "stable so far" while a
    draw is missing, "not measured" without rankings; the cpu profile's draws do not count."""
    import torch

    from docs.claim_pages import paper_protocol_answer
    from papa.method.rankings import HeadRanking

    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 100 + 0.45
    swapped = base.flatten().flip(0).reshape(3, 4)  # ρ = −1 with base

    def save(task: str, suffix: str, lambdas, profile: str = "full") -> Path:
        path = tmp_path / f"org-m__{task}__lambda-average-task-official-n64-{profile}{suffix}.safetensors"
        HeadRanking.from_lambdas(lambdas, task=task, profile=profile, model_name="org/m").save(path)
        return path

    save("mrpc", "", base), save("mrpc", "-part1", base), save("mrpc", "-part2", swapped)
    save("sst2", "", base), save("sst2", "-part1", base ** 2), save("sst2", "-part2", base ** 3)
    save("cola", "", base, profile="cpu"), save("cola", "-part1", swapped, profile="cpu")
    rows = {line.split(" | ")[0].strip("| "): line for line in
            paper_protocol_answer(tmp_path, "org/m", ("mrpc", "sst2", "cola")).splitlines()[2:]}
    assert "| -1.00 [-1.00, -1.00] |" in rows["MRPC"]
    assert rows["MRPC"].endswith("**not stable across data** (disjoint halves below ρ 0.8 beyond their interval) |")
    assert "seed0–part1 1.00 [1.00, 1.00], seed0–part2 -1.00 [-1.00, -1.00]" in rows["MRPC"]
    assert rows["SST-2"].endswith("| 1.00 [1.00, 1.00] | seed0–part1 1.00 [1.00, 1.00], seed0–part2 1.00 [1.00, 1.00] "
                                  "| – | stable so far; not learned yet: a second seed |")
    assert rows["CoLA"].endswith("| not measured |")
    save("ner", "-part1", base), save("ner", "-part2", base ** 2)  # the halves alone: say which draws are still owed
    ner = paper_protocol_answer(tmp_path, "org/m", ("ner",)).splitlines()[2]
    assert ner.endswith("| 1.00 [1.00, 1.00] | – | – | stable so far; not learned yet: the whole set, a second seed |")
    # a pair whose ρ passes 0.8 by a hair over 12 heads holds 0.8 in its interval: neither stable nor unstable
    near = base.flatten().clone()
    for i, j in ((0, 4), (1, 3), (5, 7), (8, 10)):  # Σd² = 56 over 12 heads: ρ = 1 − 6·56 / (12·143) = 0.804
        near[[i, j]] = near[[j, i]]
    ranking = save("pos", "", base)
    save("pos", "-part1", near.reshape(3, 4)), save("pos", "-part2", near.reshape(3, 4))
    pos = paper_protocol_answer(tmp_path, "org/m", ("pos",)).splitlines()[2]
    assert pos.endswith("| neither shown stable nor unstable (seed0–part1 at ρ 0.80 [0.41, 0.95]: its interval holds "
                        "0.8) so far; not learned yet: a second seed |")
    # each draw's curve: the step it settled at, of its last, and the minutes of λ learning its clock recorded
    from papa.probing.ranking import LambdaTrace
    from papa.runs.lambda_curves import curve_path, save_curve

    trace = LambdaTrace(every=100)
    trace.record(100, swapped, 60.0), trace.record(200, base, 150.0), trace.record(300, base, 240.0)
    curve_path(ranking).parent.mkdir()
    save_curve(curve_path(ranking), trace, ranking.name)
    pos = paper_protocol_answer(tmp_path, "org/m", ("pos",)).splitlines()[2]
    assert "| seed0: 200 of 300 (4 min) |" in pos


def test_profile_agreement_reads_every_pair_across_the_two_profiles(tmp_path):
    """How far the short-trained rankings are from the paper-protocol ones: ρ over every (cpu draw, full draw) pair,
    beside each profile's own pairs; a profile with no draws of a task shows dashes, not a number."""
    import torch

    from docs.claim_pages import profile_agreement
    from papa.method.rankings import HeadRanking
    from papa.paper.grids import saved_ranking_path

    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 100 + 0.45
    swapped = base.flatten().flip(0).reshape(3, 4)  # ρ = −1 with base

    def save(task: str, profile: str, lambdas, seed: int = 0, part: int = 0) -> None:
        path = saved_ranking_path(RunFolder.at(tmp_path), "org/m", task, profile, seed=seed, part=part)
        path.parent.mkdir(parents=True, exist_ok=True)
        HeadRanking.from_lambdas(lambdas, task=task, profile=profile, model_name="org/m").save(path)

    save("sst2", "cpu", base), save("sst2", "cpu", base ** 2, seed=1)
    save("sst2", "full", swapped), save("sst2", "full", swapped, part=1)
    save("cola", "cpu", base)
    rows = {line.split(" | ")[0].strip("| "): line for line in
            profile_agreement(tmp_path, "org/m", ("sst2", "cola")).splitlines()[2:]}
    assert rows["SST-2"] == "| SST-2 | seed0, seed1 | seed0, part1 | 1.00 | 1.00 | -1.00 | -1.00 |"
    assert rows["CoLA"] == "| CoLA | seed0 | – | – | – | – | – |"


def test_the_lm_probes_curve_is_printed_beside_the_strongest_baseline(tmp_path):
    assert "No learning curve" in lm_probe_curve(tmp_path)
    (tmp_path / "tables").mkdir()
    pd.DataFrame({"model": ["m"] * 2, "task": ["lm_probe"] * 2, "metric": ["neg_log_perplexity"] * 2,
                  "train_examples": [120, 60], "n": [5, 5], "mean": [-7.25, -7.92], "ci95": [0.01, 0.02]}
                 ).to_csv(tmp_path / "tables" / "decoder_lm_probe_curve.csv", index=False)
    pd.DataFrame({"task": ["lm_probe"], "context_free": [-7.8], "context_free_how": ["unigram of the lm task"],
                  "same_tokens": [-8.2], "same_tokens_how": ["unigram of its own"]}
                 ).to_csv(tmp_path / "tables" / "decoder_chance_levels.csv", index=False)
    text = lm_probe_curve(tmp_path).splitlines()
    assert text[2:4] == ["| 60 | -7.920 ± 0.020 (5 seeds) |", "| 120 | -7.250 ± 0.010 (5 seeds) |"]
    assert "scores -7.800 nats (unigram of the lm task)" in text[-1] and "-8.200 (unigram of its own)" in text[-1]


def test_a_table_marks_the_rows_the_claims_do_not_read(tmp_path, monkeypatch):
    """docs/results.md's Fig. 2 table marks every row the claims do not read: the λ orders of CoLA and SST-2 too, not
    MRPC alone."""
    import papa.paper.claims
    from docs.claim_pages import orders_table

    ResultsTable(tmp_path / "results.csv").append(result_rows(MEANS))
    (tmp_path / "tables").mkdir()
    pd.DataFrame({"model": ["org/roberta-base"] * 2, "task": ["sst2", "ner"], "learns": [True, False],
                  "majority": [0.5, 0.9]}).to_csv(tmp_path / "tables" / "probes_vs_majority.csv", index=False)
    monkeypatch.setattr(papa.paper.claims, "unread_rankings",
                        lambda out, models, profile: {"sst2": "moves"} if profile == "quick" else {})
    rows = orders_table(tmp_path, "org/roberta-base", [("sst2", "lambda"), ("sst2", "random"), ("ner", "lambda")],
                        "quick").splitlines()[2:5]
    # the reasons the notebooks' tables give (papa.paper.read_marks.ReadMarks), worded alike
    assert rows[0].startswith("| SST-2 accuracy, λ (not read: λ ranking unstable (moves)) |")
    assert rows[1].startswith("| SST-2 accuracy, random |")
    assert rows[2].startswith("| NER F1 (seqeval), λ (not read: probe ≤ majority class (0.900)) |")
