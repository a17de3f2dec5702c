"""The paper's claims read off a synthetic run whose answers are known, and the summary `papa reproduce` ends with."""
from __future__ import annotations

import pandas as pd
import pytest

from papa.method.selection import as_fraction
from papa.paper.claims import VERDICTS, format_claims, read_claims, run_claims
from papa.reproduce.notebooks import reproduction_summary
from papa.runs.results import ResultRow, ResultsTable

# (task, constants, corpus, selection, fraction) -> mean; three seeds at mean - 0.01, mean, mean + 0.01.
MEANS = {
    ("sst2", "none", "none", "none", "1"): 0.90,
    ("sst2", "average", "task", "lambda", "1/2"): 0.89,      # 1 point below the original: no major drop
    ("sst2", "average", "task", "random", "1/2"): 0.80,      # λ beats random
    ("sst2", "average", "task", "none", "0"): 0.81,          # a relative drop of 10%
    ("sst2", "average", "mlm", "none", "0"): 0.81,           # another corpus's constants: the same
    ("sst2", "identity", "none", "none", "0"): 0.70,
    ("sst2", "toeplitz", "none", "none", "0"): 0.72,
    ("sst2", "zeros", "none", "none", "0"): 0.60,
    ("ner", "none", "none", "none", "1"): 0.80,
    ("ner", "average", "task", "lambda", "1/2"): 0.75,       # 5 points below: a major drop
    ("ner", "average", "task", "none", "0"): 0.76,           # 5%
    ("ner", "average", "mlm", "none", "0"): 0.60,            # far from the task's own
    ("ner", "identity", "none", "none", "0"): 0.70,
    ("ner", "toeplitz", "none", "none", "0"): 0.72,
    ("ner", "zeros", "none", "none", "0"): 0.77,             # zeros beat average on NER
    ("mlm", "none", "none", "none", "1"): -3.0,
    ("mlm", "average", "task", "none", "0"): -4.5,           # MLM loses 50%, the downstream tasks 7.5%
}


@pytest.fixture
def run_dir(tmp_path):
    rows = []
    for (task, kind, corpus, method, label), mean in MEANS.items():
        for seed, noise in enumerate((-0.01, 0.0, 0.01)):
            rows.append(ResultRow(model="org/roberta-base", task=task, constants=kind, constants_corpus=corpus,
                                  selection=method,
                                  fraction=float(as_fraction(label)), fraction_label=label, n_input_dependent=0,
                                  seed=seed, profile="quick", layout="official", metric="accuracy",
                                  value=mean + noise, run_id=f"{task}-{kind}-{corpus}-{method}-{label}-{seed}"))
    ResultsTable(tmp_path / "results.csv").append(rows)
    # Fig. 4's table: 10 heads, 9 diagonal, 4 mostly on special tokens, rows spread.
    patterns = pd.DataFrame({"layer": [0] * 5 + [1] * 5, "head": list(range(5)) * 2,
                             "special_mass": [0.6] * 4 + [0.1] * 6, "diagonal_share": [0.9] * 9 + [0.1],
                             "spread": [0.8] * 10, "special": [True] * 4 + [False] * 6,
                             "diagonal": [True] * 9 + [False]})
    (tmp_path / "tables").mkdir()
    patterns.to_csv(tmp_path / "tables" / "fig4_patterns_sst2.csv")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "fig2_main_results.png").write_bytes(b"")
    return tmp_path


def test_every_claim_gets_the_verdict_its_numbers_give(run_dir):
    readings = {r.claim: r for r in run_claims(run_dir, profile="quick", layout="official")}
    assert {k: r.verdict for k, r in readings.items()} == {
        "fig2_half": "partly", "fig2_all": "holds", "fig3": "not read", "fig4_diagonal": "holds",
        "fig4_special": "holds", "fig4_spread": "holds", "table1": "partly", "table2": "partly", "fig5": "holds",
        "fig6": "holds"}
    assert "largest drop at 1/2: 0.050 (ner)" in readings["fig2_half"].ours
    assert "within 2 points of the original on 1 of 2 tasks" in readings["fig2_half"].ours
    assert "mean relative drop at 0: 7.5%" in readings["fig2_all"].ours and "largest 10.0% (sst2" in \
        readings["fig2_all"].ours
    assert "1 model(s)" in readings["fig3"].ours
    assert readings["fig4_diagonal"].ours.startswith("90% of 10 heads diagonal (sst2")
    assert readings["fig4_diagonal"].evidence == "figures/fig4_constant_matrices_sst2.png"
    assert "on 1 of 2 tasks (not on ner)" in readings["table1"].ours
    assert "constants from mlm's inputs" in readings["table2"].ours and "largest difference 0.160, ner" in \
        readings["table2"].ours
    # Only SST-2 ran a second method: NER's λ-only points do not count as λ winning.
    assert "best of 2 methods at 1 of 1 fractions (sst2)" in readings["fig5"].ours
    assert "-3.00 -> -4.50 nats at 0, a relative drop of 50.0%, against 7.5%" in readings["fig6"].ours
    assert all(r.verdict in VERDICTS for r in readings.values())


def test_rows_of_another_profile_or_layout_are_not_read(run_dir):
    assert {r.verdict for r in run_claims(run_dir, profile="cpu")} == {"not read", "holds"}  # Fig. 4's table only
    assert all(r.verdict == "not read" for r in read_claims(ResultsTable(run_dir / "x.csv").read()))


def test_summary_says_what_the_quick_profile_is_and_where_to_look(run_dir):
    text = reproduction_summary("quick", out_dir=run_dir)
    head, claims = text.split("\n  Fig. 2", 1)
    words = " ".join(head.split())
    assert "is a smoke test" in words and "NOT the paper's evidence" in words and "PROFILE=cpu" in words
    lines = text.splitlines()
    assert max(len(line) for line in lines if str(run_dir) not in line) <= 116
    assert sum(line.lstrip().startswith(("Fig. 2 ", "Fig. 3 ", "Fig. 4 ", "Fig. 5 ", "Fig. 6 ", "Table "))
               for line in lines) == 10
    flat = " ".join(text.split())
    assert f"-> {run_dir / 'figures' / 'fig2_main_results.png'} Fig. 2" in flat  # written: no mark
    assert f"{run_dir / 'figures' / 'fig5_head_selection.png'} (not written)" in flat
    only_02 = reproduction_summary("quick", names=("02_main_results",), out_dir=run_dir)
    assert "Fig. 2" in only_02 and "Table 1" not in only_02 and "Fig. 4" not in only_02
    assert "no claim of the paper" in reproduction_summary("quick", names=("01_method",), out_dir=run_dir)
    assert format_claims([], run_dir) == ""


def test_tasks_whose_probe_does_not_learn_are_left_out(run_dir):
    """notebook 02's probes-vs-majority table: a probe at its majority baseline says nothing about attention."""
    from papa.paper import sections

    curves = sections.main_curves(ResultsTable(run_dir / "results.csv").read())
    baselines = pd.DataFrame({"task": ["sst2", "ner"], "majority": [0.5, 0.795]})  # NER's interval reaches 0.795
    learns = sections.probes_learn(curves, baselines)
    assert learns.loc[("org/roberta-base", "sst2"), "learns"] and not learns.loc[("org/roberta-base", "ner"), "learns"]
    assert learns.loc[("org/roberta-base", "sst2"), "margin"] == pytest.approx(0.9 - 0.0248 - 0.5, abs=1e-3)
    sections.save_table(learns, run_dir, sections.LEARNS_TABLE)
    readings = {r.claim: r for r in run_claims(run_dir, profile="quick", layout="official")}
    assert readings["fig2_half"].verdict == "holds"  # NER's 5-point drop is no longer read
    assert "on 1 of 1 tasks" in readings["table1"].ours
    assert "fig6" in readings and readings["fig6"].verdict == "holds"  # MLM has no majority class: kept
    text = " ".join(reproduction_summary("cpu", out_dir=run_dir).split())
    assert "Left out of every claim: ner (roberta-base), whose probe does not beat its majority-class baseline" in text


def test_a_decoders_own_lm_objective_reads_fig6_beside_the_encoders_mlm(run_dir):
    """Claim (f) on a causal LM: its perplexity with its own frozen head (task lm) against its probes."""
    rows = ResultsTable(run_dir / "results.csv").read()
    decoder = []
    # and an encoder not pretrained with MLM, whose from-scratch MLM probe gets better without attention
    minilm = "st/all-MiniLM-L6-v2"
    for model, task, label, mean in (("org/decoder", "lm", "1", -4.0), ("org/decoder", "lm", "0", -9.0),
                                     ("org/decoder", "sst2", "1", 0.80), ("org/decoder", "sst2", "0", 0.76),
                                     (minilm, "mlm", "1", -8.7), (minilm, "mlm", "0", -8.1),
                                     (minilm, "sst2", "1", 0.78), (minilm, "sst2", "0", 0.75)):
        kind = "none" if label == "1" else "average"
        for seed in range(3):
            decoder.append(ResultRow(model=model, task=task, constants=kind,
                                     constants_corpus="none" if label == "1" else "task", selection="none",
                                     fraction=float(as_fraction(label)), fraction_label=label, n_input_dependent=0,
                                     seed=seed, profile="quick", layout="standard", metric="accuracy", value=mean,
                                     run_id=f"{model}-{task}-{label}-{seed}"))
    ResultsTable(run_dir / "results.csv").append(decoder)
    reading = {r.claim: r for r in run_claims(run_dir, profile="quick")}["fig6"]
    assert reading.verdict == "holds" and "the objective drops more for 2 of 2 models" in reading.ours
    assert "LM -4.00 -> -9.00 nats at 0, a relative drop of 125.0%, against 5.0% on the downstream tasks (decoder)" \
        in reading.ours
    assert reading.ours.endswith("(not read: MLM probes of all-MiniLM-L6-v2, not pretrained with MLM)")
    # a profile's layout is the encoders'; a decoder's rows are always in the decoder layout, and are read beside them
    official = {r.claim: r for r in run_claims(run_dir, profile="quick", layout="official")}["fig6"]
    assert "(decoder)" in official.ours
    assert len(rows) < len(ResultsTable(run_dir / "results.csv").read())

    # notebook 08's own probes-vs-majority table: a decoder probe at its majority baseline leaves the decoder out
    from papa.paper import sections

    learns = pd.DataFrame({"model": ["org/decoder"], "task": ["sst2"], "mean": [0.8], "ci95": [0.0], "n": [3],
                           "majority": [0.8], "margin": [0.0], "learns": [False]})
    sections.save_table(learns.set_index(["model", "task"]), run_dir, sections.DECODER_LEARNS_TABLE)
    reading = {r.claim: r for r in run_claims(run_dir, profile="quick")}["fig6"]
    assert "(decoder)" not in reading.ours and "2 models" not in reading.ours
    assert "Left out of every claim: sst2 (decoder)" in " ".join(reproduction_summary("cpu", out_dir=run_dir).split())
