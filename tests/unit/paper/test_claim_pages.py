"""The docs' claim pages rendered from readings: every verdict and number comes from the reading, the decoders'
apart, a partly read claim says how much was read."""
from __future__ import annotations

import pandas as pd

from papa.paper.claim_pages import claim_by_claim, curve_table, decoder_claims, notebook_time, results_in_brief
from papa.paper.claims import read_claims
from papa.runs.results import ResultsTable
from tests.unit.paper.test_claims import MEANS, _rows, _stability


def _readings(tmp_path, decoder: bool = False):
    rows = _rows(MEANS)
    if decoder:
        rows += _rows({("lm", "none", "none", "none", "1"): -4.0, ("lm", "average", "task", "none", "0"): -9.0,
                       ("sst2", "none", "none", "none", "1"): 0.80, ("sst2", "average", "task", "none", "0"): 0.76},
                      model="org/decoder", layout="standard")
    table = ResultsTable(tmp_path / "results.csv")
    table.append(rows)
    return read_claims(table.read(), stability=_stability({"sst2": 0.95, "ner": 0.95}))


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
    assert "LM (own head) at 0 drops more than sst2" in decoder_claims(readings)
    brief = results_in_brief(readings).splitlines()
    assert len(brief) == len(readings) and any("decoders: **" in line for line in brief)


def test_notebook_times_and_curve_tables(tmp_path):
    pd.DataFrame({"notebook": ["01_method", "02_main_results"], "profile": ["cpu"] * 2, "seconds": [43.1, 23.6],
                  "output": ["a", "b"]}).to_csv(tmp_path / "notebook_times.csv", index=False)
    assert "records 67 s of notebook execution" in notebook_time(tmp_path) and "01 43 s, 02 24 s" in notebook_time(tmp_path)
    curves = pd.DataFrame({"task": ["lm", "lm", "lm"], "selection": ["none", "lambda", "none"],
                           "fraction_label": ["1", "1/2", "0"], "mean": [-4.0, -5.0, -9.0], "ci95": [0.0, 0.0, 0.0]})
    table = curve_table(curves, {"lm/lambda": "LM"})
    assert table.splitlines()[2] == "| LM | -4.000 | -5.000 | -9.000 |"
