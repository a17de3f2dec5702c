"""The README's first screen says what the committed run ran and what it found, every number from its tables
(`docs.first_page`)."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import REPO
from papa.paper.claims import RunTables
from papa.paper.paper_numbers import paper_score

TABLES = REPO / "artifacts" / "cpu" / "tables"


@pytest.fixture(scope="module")
def committed():
    from docs import gen_measurements

    return gen_measurements.cpu_run(), gen_measurements.cpu_claims()  # read once per test session


def test_the_first_page_says_none_of_the_papers_models_ran_and_what_each_model_is(committed):
    from docs.first_page import what_was_run
    from papa.method.models import PACKAGED_MODELS

    run, _ = committed
    text = what_was_run(run)
    assert text.startswith("**What was run.** None of the paper's seven models (bert-base-uncased, roberta-base, ")
    encoder, decoder = (f"* **{m}**: {PACKAGED_MODELS[m].kind}." for m in ("all-MiniLM-L6-v2", "SmolLM2-135M-Instruct-Q4_1"))
    assert text.index(encoder) < text.index(decoder)  # the encoder first
    assert "5 seeds" in text and "500 (MRPC) to 3,000 (CoLA) training examples per task" in text
    assert "Every verdict below is about these models at these sizes." in text


def test_a_run_of_a_paper_model_says_so():
    from docs.first_page import what_was_run

    results = pd.DataFrame({"model": ["roberta-base"], "task": ["sst2"], "profile": ["cpu"]})
    text = what_was_run(RunTables(results))
    assert "1 of the paper's seven models" in text and "were run" in text
    assert "* **roberta-base**: a model given by name." in text


def test_what_the_run_found_comes_from_its_tables(committed):
    from docs.first_page import what_run_found

    run, claims = committed
    text = what_run_found(run, claims)
    curves = pd.read_csv(TABLES / "fig2_main_results.csv", index_col=0, dtype={"fraction_label": str})
    sst2 = curves[(curves.task == "sst2") & (curves.fraction_label == "1")]["mean"].iloc[0]
    assert f"SST-2 {sst2:.3f} ({paper_score('sst2'):.2f})" in text
    cuts = pd.read_csv(TABLES / "layout_truncation_counts.csv", index_col=0)
    worst = cuts[cuts.split == "eval"].sort_values("official cut %").iloc[-1]
    assert f"cuts {worst['official cut %']:.1f}% of " in text
    idle = sum(p.verdict == "not informative" for r in claims for p in r.parts)
    assert f"**On the encoder, {idle} of the " in text
    learns = pd.read_csv(TABLES / "probes_vs_majority.csv")
    for row in learns[~learns.learns].itertuples():
        assert f"({row.mean:.3f} against its majority class's {row.majority:.3f})" in text
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert text in readme  # the page holds what the tables give today
