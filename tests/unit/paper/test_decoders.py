"""Notebook 08's readings on a synthetic results table: the LM objective beside a downstream probe."""
from __future__ import annotations

import pandas as pd
import pytest

from papa.method.selection import as_fraction
from papa.paper import tables as sections
from papa.runs.results import ResultRow, ResultsTable
from papa.sections import decoders


def _row(task, constants, selection, fraction, seed, value, metric):
    return ResultRow(model="org/decoder", task=task, constants=constants,
                     constants_corpus="none" if constants == "none" else "task", selection=selection,
                     fraction=float(as_fraction(fraction)), fraction_label=fraction, n_input_dependent=0, seed=seed,
                     profile="quick", metric=metric, value=value, run_id=f"{task}-{selection}-{fraction}-{seed}")


@pytest.fixture
def curves(tmp_path):
    rows = []
    for seed in (0, 1):
        rows += [_row("lm", "none", "none", "1", seed, -3.0, "neg_log_perplexity"),
                 _row("lm", "average", "lambda", "1/2", seed, -4.5, "neg_log_perplexity"),
                 _row("lm", "average", "none", "0", seed, -9.0, "neg_log_perplexity"),
                 _row("sst2", "none", "none", "1", seed, 0.80, "accuracy"),
                 _row("sst2", "average", "lambda", "1/2", seed, 0.76, "accuracy"),
                 _row("sst2", "average", "none", "0", seed, 0.60, "accuracy")]
    table = ResultsTable(tmp_path / "results.csv")
    table.append(rows)
    return sections.main_curves(table.read())


def test_relative_drops_put_perplexity_and_accuracy_on_one_axis(curves):
    drops = decoders.relative_drops(curves).set_index(["task", "fraction_label"])["relative_drop"]
    assert drops[("lm", "1")] == pytest.approx(0.0) and drops[("sst2", "1")] == pytest.approx(0.0)
    assert drops[("lm", "1/2")] == pytest.approx(0.5) and drops[("lm", "0")] == pytest.approx(2.0)
    assert drops[("sst2", "1/2")] == pytest.approx(0.05) and drops[("sst2", "0")] == pytest.approx(0.25)


def test_objective_vs_probes(curves):
    table = decoders.objective_vs_probes(curves)
    assert list(table.index.get_level_values("fraction_label")) == ["1/2", "0"]
    assert table["objective_suffers_more"].all()
    assert table.loc[("org/decoder", "0"), "probes_mean_relative_drop"] == pytest.approx(0.25)
    line = decoders.objective_vs_probes_summary(table)
    assert "decoder at 0: the LM objective loses 200.0%, the probes lose 25.0% on average" in line
    assert "the objective suffers more" in line
    assert decoders.objective_vs_probes(curves[curves.task == "sst2"]).empty
    decoders.relative_drop_curves(decoders.relative_drops(curves))  # draws without error
    with pytest.raises(ValueError, match="no results"):
        decoders.relative_drop_curves(decoders.relative_drops(curves.iloc[:0]))


def test_probes_at_their_majority_baseline_are_left_out(curves):
    """A probe that does not beat its majority class says nothing about attention: it is not averaged in."""
    baselines = pd.DataFrame({"task": ["sst2"], "majority": [0.80]})
    learns = sections.probes_learn(curves, baselines)
    assert not learns.loc[("org/decoder", "sst2"), "learns"]
    table = decoders.objective_vs_probes(curves, learns=learns)
    assert table["probes_mean_relative_drop"].isna().all() and table["probes_left_out"].eq("sst2").all()
    assert not table["objective_suffers_more"].any()
    line = decoders.objective_vs_probes_summary(table)
    assert "decoder at 0: the LM objective loses 200.0%, no probe to read (sst2: not above the majority" in line
    assert "suffers" not in line
    kept = decoders.objective_vs_probes(curves, learns=sections.probes_learn(curves, baselines.assign(majority=0.5)))
    assert kept["probes_left_out"].eq("").all()
    assert kept.loc[("org/decoder", "0"), "probes_mean_relative_drop"] == pytest.approx(0.25)


def test_hidden_state_scale_finds_massive_first_token_activations():
    """The measurement behind a decoder probe stuck at its majority class: first-token |h| against the others."""
    import torch

    from conftest import tiny_model, tiny_tokenizer

    model, tokenizer = tiny_model("llama", lm_head=True), tiny_tokenizer("llama")
    texts = ["the cat sat on the mat", "a good movie"]
    plain = decoders.hidden_state_scale(model, tokenizer, texts, max_length=16)
    assert list(plain.index) == [0, 1, 2] and (plain["ratio"] < 20).all()

    def massive(module, args, output):  # what a sink-forming layer does to the first token's residual stream
        states = output[0] if isinstance(output, tuple) else output
        states[:, 0] *= 1000.0

    handle = model.model.layers[0].register_forward_hook(massive)
    try:
        scaled = decoders.hidden_state_scale(model, tokenizer, texts, max_length=16)
    finally:
        handle.remove()
    assert scaled.loc[0, "ratio"] == pytest.approx(plain.loc[0, "ratio"])  # the embeddings are untouched
    assert scaled.loc[1, "ratio"] > 100
    assert scaled.loc[2, "ratio"] < 20  # the last hidden state comes after the model's final norm
    assert torch.isfinite(torch.tensor(scaled.to_numpy())).all()


def test_a_speed_up_above_the_ceiling_is_named_noise_and_every_mode_has_its_share():
    """A speed-up above the ceiling (1.238x beside a 1.16x ceiling in notebook 08) is named noise, and the original
    has its share, not NaN."""
    timings = pd.DataFrame({"seconds": [2.0, 1.9, 1.6], "speed-up": [1.0, 2.0 / 1.9, 1.25]},
                           index=["original", "all heads constant", "attention-free (Q/K dropped)"])
    table = decoders.against_ceiling(timings, 1.16, tokens=760)
    assert table["share of ceiling"].notna().all()
    assert table.loc["original", "share of ceiling"] == pytest.approx(1 / 1.16)
    assert table["reading"].tolist() == ["", "", "above the ceiling: timing noise"]
    assert table.loc["original", "tokens/s"] == 380 and table.attrs == {"ceiling": 1.16, "tokens": 760}
