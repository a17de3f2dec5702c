"""Section tables built from a synthetic results table whose answers are known."""
from __future__ import annotations

import pandas as pd
import pytest
import scipy.stats

from papa.core.run_folder import RunFolder
from papa.method.selection import as_fraction
from papa.paper import baselines, grids
from papa.paper import tables as sections
from papa.runs.results import ResultRow, ResultsTable
from papa.sections import alternative_matrices, data_dependence, main_results


def _row(task, constants, selection, fraction, seed, value, corpus="task"):
    corpus = "none" if constants in ("none", "identity", "toeplitz", "zeros") else corpus
    return ResultRow(model="org/m", task=task, constants=constants, constants_corpus=corpus, selection=selection,
                     fraction=float(as_fraction(fraction)), fraction_label=fraction, n_input_dependent=0, seed=seed,
                     profile="quick", metric="accuracy", value=value,
                     run_id=f"{task}-{constants}-{corpus}-{selection}-{fraction}-{seed}")


@pytest.fixture
def results(tmp_path):
    rows = []
    for seed, noise in enumerate((-0.01, 0.0, 0.01)):
        rows += [_row("sst2", "none", "none", "1", seed, 0.90 + noise),
                 _row("sst2", "average", "lambda", "1/2", seed, 0.89 + noise),
                 _row("sst2", "average", "random", "1/2", seed, 0.80 + noise),
                 _row("sst2", "average", "none", "0", seed, 0.81 + noise),
                 _row("sst2", "average", "none", "0", seed, 0.70 + noise, corpus="mlm"),
                 _row("sst2", "zeros", "none", "0", seed, 0.60 + noise)]
    table = ResultsTable(tmp_path / "results.csv")
    table.append(rows)
    return table.read()


def test_main_curves_share_end_points(results):
    curves = sections.main_curves(results)
    assert list(curves["fraction_label"]) == ["1", "1/2", "0"]
    assert curves["mean"].round(6).tolist() == [0.90, 0.89, 0.81]
    assert (curves["n"] == 3).all() and (curves["ci95"] > 0).all()
    methods = sections.selection_curves(results, ["lambda", "random"])
    assert methods.groupby("selection")["mean"].apply(lambda s: round(s.iloc[1], 6)).to_dict() == {
        "lambda": 0.89, "random": 0.80}


def test_curves_over_orders_pool_each_orders_draws_as_the_claims_do(tmp_path):
    """λ drawn three times at 1/2 (the plain ranking, a disjoint part, a seed) and another profile's twice: a point is
    the mean of the draws' seed means, its interval the seeds' variance and the draws' spread (as the claims read
    it), and it says how many orders it pools."""
    rows = []
    for seed, noise in enumerate((-0.01, 0.0, 0.01)):
        rows += [_row("sst2", "none", "none", "1", seed, 0.90 + noise),
                 _row("sst2", "average", "none", "0", seed, 0.80 + noise),
                 _row("sst2", "average", "first_to_last", "1/2", seed, 0.84 + noise)]
        rows += [_row("sst2", "average", name, "1/2", seed, value + noise) for name, value in
                 (("lambda", 0.88), ("lambda@part1", 0.85), ("lambda@seed1", 0.87),
                  ("lambda@full", 0.86), ("lambda@full-part1", 0.82))]
    table = ResultsTable(tmp_path / "results.csv")
    table.append(rows)
    curves = sections.curves_over_orders(table.read(), ["lambda", "lambda@full", "first_to_last"])
    at = {(r.selection, r.fraction_label): r for r in curves.itertuples()}
    assert at["lambda", "1/2"].mean == pytest.approx((0.88 + 0.85 + 0.87) / 3) and at["lambda", "1/2"].orders == 3
    # the spread of the three draws' means (0.88, 0.85, 0.87), not of the nine runs
    assert at["lambda", "1/2"].n == 3 and at["lambda", "1/2"].std == pytest.approx(0.0152753, rel=1e-4)
    # the seeds' part: each seed's mean over the draws moves by the seed's noise (sd 0.01 over 3 seeds); the orders'
    # part: the draws' means' sd over 3 draws; Welch–Satterthwaite degrees of freedom (2 each)
    seeds_se, orders_se = 0.01 / 3 ** 0.5, 0.0152753 / 3 ** 0.5
    se = (seeds_se ** 2 + orders_se ** 2) ** 0.5
    df = se ** 4 / (seeds_se ** 4 / 2 + orders_se ** 4 / 2)
    assert at["lambda", "1/2"].ci95 == pytest.approx(scipy.stats.t.ppf(0.975, df) * se, rel=1e-4)
    assert at["lambda", "1/2"].high - at["lambda", "1/2"].mean == pytest.approx(at["lambda", "1/2"].ci95)
    assert at["lambda@full", "1/2"].mean == pytest.approx(0.84) and at["lambda@full", "1/2"].orders == 2
    assert at["first_to_last", "1/2"].orders == 1 and at["first_to_last", "1/2"].n == 3  # one order: over seeds
    assert at["lambda", "1"].orders == 1 and at["lambda", "1"].mean == pytest.approx(0.90)


def test_claims_and_ranks(results):
    curves = sections.main_curves(results)
    claims = sections.fraction_claims(curves).iloc[0]
    assert claims["drop_at_half"] == pytest.approx(0.01)
    assert claims["relative_drop_at_0"] == pytest.approx(0.09 / 0.90)
    summary = main_results.performance_vs_drop(curves)
    assert summary.loc[0, "original"] == pytest.approx(0.90) and summary.loc[0, "tasks"] == 1


def test_fig3_reads_the_tasks_the_claims_read(results):
    """With the probes' table Fig. 3 averages the tasks whose probe learns, as the claims do (at 4befcb8 notebook 02
    printed 5.3% with MRPC beside the claims' 6.7% without it)."""
    other = results[results.task == "sst2"].assign(task="mrpc", value=lambda r: r.value * 0.5)
    curves = sections.main_curves(pd.concat([results, other]))
    learns = pd.DataFrame({"learns": [True, False]},
                          index=pd.MultiIndex.from_tuples([("m", "sst2"), ("m", "mrpc")], names=["model", "task"]))
    assert main_results.performance_vs_drop(curves, learns=learns).loc[0, "relative_drop"] == pytest.approx(0.10)


def test_tables(results):
    t1 = alternative_matrices.alternatives_table(results, ["zeros", "average"])
    assert list(t1.index.get_level_values("constants")) == ["none", "zeros", "average"]
    assert t1.loc[("m", "average"), "sst2"].startswith("0.810 ± ")
    t2 = data_dependence.data_dependence_table(results, "mlm")
    assert list(t2.index.get_level_values("constants_corpus")) == ["the task's own", "WikiText"]  # as pages name them
    assert t2.loc[("m", "WikiText"), "sst2"].startswith("0.700")


def test_format_and_other_corpus(tmp_path):
    assert sections.format_cell(0.5, float("nan")) == "0.500"
    assert sections.format_cell(float("nan"), 0.1) == "—"
    (tmp_path / "glue_data" / "SST-2").mkdir(parents=True)
    (tmp_path / "glue_data" / "SST-2" / "train.tsv").write_text("sentence\tlabel\n")
    assert grids.task_available("sst2", str(tmp_path))
    assert grids.available_corpus(data_dir=str(tmp_path)) == "mlm"  # no MNLI files here
    assert data_dependence.grids(["m"], ["sst2"], data_dir=str(tmp_path))["other"].constants_corpus == "mlm"
    path = sections.save_table(pd.DataFrame({"a": [1]}), RunFolder.at(str(tmp_path)), "t")
    assert path.read_text().splitlines()[0] == ",a"
    # sums taken in another order on a rerun differ in the last bits: the file does not
    one, other = 0.1 + 0.2 + 0.3, 0.3 + 0.2 + 0.1
    assert one != other
    first = sections.save_table(pd.DataFrame({"rho": [one]}), RunFolder.at(str(tmp_path)), "a").read_bytes()
    assert sections.save_table(pd.DataFrame({"rho": [other]}), RunFolder.at(str(tmp_path)), "b").read_bytes() == first
    # another CPU's vector unit moves a value by a few units in the last place: the same bytes (10 digits)
    import numpy as np

    moved = np.nextafter(np.nextafter(one, 1.0), 1.0) * (1 + 4e-16)
    assert moved != one
    assert sections.save_table(pd.DataFrame({"rho": [moved]}), RunFolder.at(str(tmp_path)), "c").read_bytes() == first
    assert "0.6," in sections.save_table(pd.DataFrame({"rho": [one], "x": [1]}), RunFolder.at(str(tmp_path)), "d").read_text()


def test_grids_need_models_and_tasks_and_a_known_runner():
    with pytest.raises(ValueError, match="at least one model and one task"):
        grids.Grids((), ("sst2",))
    with pytest.raises(ValueError, match="unknown runner 'curve'"):
        grids.Grids(("m",), ("sst2",), runner="curve")


def test_training_sizes_say_what_each_kind_trained_on(results):
    sized = results.assign(extra=['{"train_examples": 400, "epochs": 4}' if k == "zeros" else
                                  '{"train_examples": 8551, "epochs": 15}' for k in results["constants"]])
    table = alternative_matrices.training_sizes(sized)
    assert table.loc["zeros", "sst2"] == "400 × 4" and table.loc["average", "sst2"] == "8551 × 15"
    assert alternative_matrices.training_sizes(results).loc["none", "sst2"] == "? × ?"  # rows without sizes say so


def test_the_grids_own_probe_is_placed_on_its_learning_curve(results):
    sized = results.assign(extra='{"train_examples": 500, "epochs": 4}')
    curves = pd.DataFrame({"model": ["org/m"] * 2, "task": ["sst2"] * 2, "metric": ["accuracy"] * 2,
                           "train_examples": [250, 1000], "n": [3, 3], "mean": [0.85, 0.92], "ci95": [0.01, 0.01]})
    points = main_results.grid_points(sized, curves)
    assert list(points.columns) == list(curves.columns) and len(points) == 1  # original attention, fraction 1 only
    assert points["train_examples"].item() == 500 and points["mean"].item() == pytest.approx(0.90)
    assert main_results.grid_points(sized, curves.assign(task="cola")).empty


@pytest.mark.integration
def test_chance_levels_are_the_majority_class_or_a_uniform_guess(data_dir):
    """The scale a drop is normalised to: SST-2's majority class of the profile's training subset, scored on its
    evaluation subset; the LM's −log of the vocabulary's size."""
    import math

    table = baselines.chance_levels("smollm2", 49152, ["lm", "sst2"], profile="quick", data_dir=str(data_dir))
    majority = baselines.majority_baselines(["sst2"], profile="quick", data_dir=str(data_dir))["majority"].iloc[0]
    assert list(table.index) == [("SmolLM2-135M-Instruct-Q4_1", "lm"), ("SmolLM2-135M-Instruct-Q4_1", "sst2")]
    assert table.loc[("SmolLM2-135M-Instruct-Q4_1", "lm"), "chance"] == pytest.approx(-math.log(49152))
    assert table.loc[("SmolLM2-135M-Instruct-Q4_1", "sst2"), "chance"] == majority


def test_the_strongest_unigram_is_fit_on_any_training_text_the_run_has():
    """The LM probe's baseline on equal terms is a unigram of its own training tokens; the strongest
    context-free predictor is the best unigram of any task's training tokens (the LM task's, 26 times as many),
    scored on the probe's evaluation tokens, and the table names whose."""
    evaluation = [1, 1, 2, 1]
    targets = {"lm": ([1] * 300 + [2] * 100 + [3] * 10, [5]), "lm_probe": ([3, 3, 1, 2], evaluation)}
    levels = baselines.unigram_levels("lm_probe", targets, 8)
    assert levels["context_free"] > levels["same_tokens"]
    assert levels["context_free_how"].startswith("unigram of the lm task's training subset's 410 target tokens")
    assert levels["same_tokens_how"].startswith("unigram of the training subset's 4 target tokens")
    own = baselines.unigram_levels("lm_probe", {"lm_probe": targets["lm_probe"]}, 8)
    assert own["context_free"] == own["same_tokens"] == levels["same_tokens"]


def _sized(results: pd.DataFrame, trained: str, frozen: str) -> pd.DataFrame:
    """`results` with Table 1's two trained kinds added at fraction 0 (sizes `trained`, the others `frozen`)."""
    extra = results.assign(extra=frozen)
    trained_rows = [extra[(extra.constants == "zeros")].assign(constants=kind, constants_corpus="task", extra=trained)
                    for kind in ("trainable_toeplitz", "trainable_average")]
    return pd.concat([extra, *trained_rows], ignore_index=True)


def test_table1_marks_trained_rows_that_trained_on_another_size(results):
    """The trained constants' rows say in the table itself that they are not reproduced, with the sizes their rows
    and the original attention's recorded; the other rows, and trained rows sized like the others, carry no mark."""
    kinds = ["zeros", "trainable_toeplitz", "trainable_average", "average"]
    apart = _sized(results, '{"train_examples": 200, "epochs": 1}', '{"train_examples": 2000, "epochs": 4}')
    table = alternative_matrices.alternatives_table(apart, kinds)
    note = table[alternative_matrices.NOTE_COLUMN]
    expected = "not reproduced: 200 examples, 1 epoch (the other rows: 2000 examples, 4 epochs)"
    assert note[("m", "trainable_toeplitz")] == note[("m", "trainable_average")] == expected
    assert (note.drop([("m", "trainable_toeplitz"), ("m", "trainable_average")]) == "").all()
    assert table.loc[("m", "trainable_average"), "sst2"].startswith("0.600 ± ")  # the scores as before
    alike = _sized(results, '{"train_examples": 8, "epochs": 1}', '{"train_examples": 8, "epochs": 1}')
    assert (alternative_matrices.alternatives_table(alike, kinds)[alternative_matrices.NOTE_COLUMN] == "").all()
    unsized = _sized(results, "", "")  # sizes not recorded: nothing to say
    assert (alternative_matrices.alternatives_table(unsized, kinds)[alternative_matrices.NOTE_COLUMN] == "").all()


def test_the_note_names_each_tasks_sizes_as_a_range(results):
    other = results.assign(task="cola")
    both = pd.concat([_sized(results, '{"train_examples": 200, "epochs": 1}', '{"train_examples": 2000, "epochs": 4}'),
                      _sized(other, '{"train_examples": 200, "epochs": 1}', '{"train_examples": 3000, "epochs": 15}')])
    notes = alternative_matrices.trained_size_notes(both)
    assert notes[("m", "trainable_average")] == ("not reproduced: 200 examples, 1 epoch (the other rows: "
                                                  "2000–3000 examples, 4–15 epochs)")


def _objective_curves(model: str) -> pd.DataFrame:
    """An MLM curve (−log perplexity) beside SST-2's, at fractions 1, 1/2 and 0."""
    rows = [(task, label, value) for task, values in (("mlm", (-8.4, -8.2, -8.1)), ("sst2", (0.80, 0.79, 0.76)))
            for label, value in zip(("1", "1/2", "0"), values)]
    return pd.DataFrame({"model": model, "task": [r[0] for r in rows], "selection": "lambda",
                         "fraction_label": [r[1] for r in rows], "mean": [r[2] for r in rows]})


def test_an_objectives_drop_is_in_nats_and_its_reading_is_marked():
    """MLM's row has no relative drop (a log perplexity's zero is arbitrary) but its change in nats, and says that
    the claim does not read the MLM probe of a model not pretrained with MLM; SST-2's row keeps its relative drop."""
    claims = sections.fraction_claims(_objective_curves("sentence-transformers/all-MiniLM-L6-v2"))
    mlm, sst2 = claims.loc[("all-MiniLM-L6-v2", "mlm", "lambda")], claims.loc[("all-MiniLM-L6-v2", "sst2", "lambda")]
    assert pd.isna(mlm["relative_drop_at_0"]) and mlm["drop_at_0"] == pytest.approx(-0.3)
    assert mlm["drop_at_half"] == pytest.approx(-0.2)
    assert mlm[sections.OBJECTIVE_COLUMN] == "not read: all-MiniLM-L6-v2 not pretrained with MLM"
    assert sst2["relative_drop_at_0"] == pytest.approx(0.05) and sst2["drop_at_0"] == pytest.approx(0.04)
    assert sst2[sections.OBJECTIVE_COLUMN] == "—"
    assert sections.fraction_claims(_objective_curves("roberta-base")).loc[
        ("roberta-base", "mlm", "lambda"), sections.OBJECTIVE_COLUMN] == "read"  # an MLM-pretrained encoder
    downstream = sections.fraction_claims(_objective_curves("m").query("task == 'sst2'"))
    assert list(downstream.columns) == ["original", "at_half", "drop_at_half", "at_0", "relative_drop_at_0"]
