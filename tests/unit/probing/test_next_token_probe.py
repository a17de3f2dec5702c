"""Task lm_probe (kind "next_token"): next-token prediction by a probe trained from scratch on a causal LM's frozen
hidden states, the decoder's counterpart of the paper's MLM probe (Fig. 6). LM's labels, MLM's probe, all L+1 layers,
standardised inputs by default; encoders are refused before any work."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import papa
from conftest import CAUSAL_ARCHS, tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.core.run_folder import RunFolder
from papa.probing.features import FeatureSource, encode_task, feature_layers, hidden_features
from papa.probing.predictions import metric_on
from papa.probing.probes import IGNORE_INDEX, TokenProbe, probe_loss
from papa.probing.standardize import input_statistics, probe_inputs_for
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.tasks.baselines import majority_label
from papa.tasks.data import Example
from papa.tasks.registry import POSITION_KINDS, VOCABULARY_KINDS, check_task_fits_model, get_task

TEXTS = ["the cat sat on the mat", "a dog", "it was a very good film and the plot was big", "mary runs",
         "john ran to london", "the actor is not bad"]
N = 16


def _examples(texts=TEXTS) -> list[Example]:
    return [Example(text=t) for t in texts]


def _encoded(model, tok, task: str = "lm_probe", texts=TEXTS):
    return encode_task(tok, get_task(task), _examples(texts), max_length=N, model_type=model.config.model_type,
                       layout="standard")


def test_the_task_is_lms_text_and_labels_with_a_trained_probe():
    spec, lm, mlm = get_task("lm_probe"), get_task("lm"), get_task("mlm")
    assert spec.kind == "next_token" and spec.metric == "neg_log_perplexity" and spec.label_names == ()
    assert spec.hparams == mlm.hparams == lm.hparams and spec.num_labels == 0
    assert (spec.hub, spec.local, spec.holdout_every, spec.holdout_offset) == (
        lm.hub, lm.local, lm.holdout_every, lm.holdout_offset)
    assert (spec.holdout_every, spec.holdout_offset) == (10, 5)
    assert spec.trains_probe and spec.vocabulary_targets and spec.predicts_next_token and not spec.token_level
    assert "next_token" in VOCABULARY_KINDS and "next_token" in POSITION_KINDS
    # a trained probe reads standardised inputs on a decoder by default, as the downstream probes do
    assert probe_inputs_for(True, None, trains_probe=spec.trains_probe) == "standardized"
    with pytest.raises(ValueError, match="vocabulary"):
        majority_label(spec, _examples())  # no classes: no majority baseline


@pytest.mark.parametrize("arch", CAUSAL_ARCHS)
def test_labels_are_lms_for_the_same_examples(arch):
    model, tok = tiny_model(arch, lm_head=True), tiny_tokenizer(arch)
    probe_data, lm_data = _encoded(model, tok, "lm_probe"), _encoded(model, tok, "lm")
    assert probe_data.kind == "next_token" and lm_data.kind == "lm"
    assert torch.equal(probe_data.labels, lm_data.labels)
    assert probe_data.inputs.keys() == lm_data.inputs.keys()
    assert all(torch.equal(probe_data.inputs[k], lm_data.inputs[k]) for k in lm_data.inputs)
    # and they are the next real token
    ids, real = probe_data.inputs["input_ids"], probe_data.inputs["attention_mask"].bool()
    assert torch.equal(probe_data.labels[:, :-1][real[:, 1:]], ids[:, 1:][real[:, 1:]])
    assert not probe_data.last_layer_only and lm_data.last_layer_only


def test_an_encoder_is_refused_before_any_work():
    spec = get_task("lm_probe")
    with pytest.raises(InputError, match="probe an encoder with mlm") as err:
        check_task_fits_model(spec, False, "bert-base-uncased")
    assert "next token" in str(err.value) and "smollm2" in str(err.value)
    check_task_fits_model(spec, True, "smollm2")  # a causal LM fits
    bert_tok = tiny_tokenizer("bert")
    with pytest.raises(InputError, match="probe an encoder with mlm"):
        encode_task(bert_tok, spec, _examples(), max_length=N, model_type="bert")
    from papa.runs.experiment import GridConfig

    # resolved from the model's local config, before a model or any data is loaded
    with pytest.raises(InputError, match="probe an encoder with mlm"):
        GridConfig(task="lm_probe", model=papa.DEFAULT_MODEL).resolved()


def test_the_feature_store_keeps_only_the_labelled_positions_of_every_layer():
    model, tok = tiny_model("llama", lm_head=True, init_std=0.2), tiny_tokenizer("llama")
    data = _encoded(model, tok)
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    labelled = data.labels != IGNORE_INDEX
    real = data.inputs["attention_mask"].bool()
    assert int(labelled.sum()) < int(real.sum())  # each text's last real token has no next token: not kept
    layers = model.config.num_hidden_layers + 1
    assert feature_layers(model, data.last_layer_only) == layers
    assert torch.equal(source.store.keep, labelled)
    assert source.store.values.shape == (int(labelled.sum()), layers, model.config.hidden_size)
    idx = torch.tensor([3, 0, 5, 0])
    feats, _, labels = source(idx)
    with torch.no_grad():
        padded = hidden_features(model, data.batch(idx)[0])
    at = labelled[idx][:, None, :, None]
    assert torch.equal(feats, torch.where(at, padded, torch.zeros(())))
    assert torch.equal(labels, data.labels[idx])
    source.close()


def test_a_probe_trained_from_scratch_learns_the_next_token():
    model, tok = tiny_model("llama", lm_head=True, init_std=0.2), tiny_tokenizer("llama")
    spec = get_task("lm_probe")
    data = _encoded(model, tok)
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    torch.manual_seed(0)
    probe = make_probe(spec, model, N, len(tok))
    # MLM's probe, on all L+1 hidden states, with a vocabulary-sized output; nothing of the model's own head
    assert isinstance(probe, TokenProbe) and probe.num_labels == len(tok)
    assert probe.num_layers == model.config.num_hidden_layers + 1
    assert not {id(p) for p in probe.parameters()} & {id(p) for p in model.parameters()}
    statistics = input_statistics(probe, source)  # the decoder's default inputs: over the labelled slots
    assert statistics.count == int((data.labels != IGNORE_INDEX).sum())
    probe.set_input_statistics(statistics)
    before = evaluate_probe(probe, spec, source)
    losses = train_probe(probe, spec.kind, source, TrainSettings(learning_rate=1e-2, batch_size=3, epochs=8), seed=0,
                         progress=False)
    assert len(losses) == 8 * 2 and np.mean(losses[-2:]) < np.mean(losses[:2])
    value = evaluate_probe(probe, spec, source)
    assert np.isfinite(value) and value <= 0 and value > before
    again, predictions = evaluate_probe(probe, spec, source, batch_size=4, return_predictions=True)
    assert again == pytest.approx(value, rel=1e-6)
    assert predictions.kind == "next_token" and predictions.form == "losses"
    assert predictions.num_examples == len(data)
    assert predictions.tokens.tolist() == (data.labels != IGNORE_INDEX).sum(dim=1).tolist()
    assert metric_on(predictions, spec) == pytest.approx(again, rel=1e-6, abs=1e-9)
    source.close()


def test_the_loss_is_the_mean_over_labelled_slots():
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor([[1, 2, IGNORE_INDEX, 3, IGNORE_INDEX], [IGNORE_INDEX] * 4 + [6]])
    keep = labels != IGNORE_INDEX
    expected = torch.nn.functional.cross_entropy(logits[keep], labels[keep])
    torch.testing.assert_close(probe_loss("next_token", logits, labels), expected)


def test_lambdas_learn_with_the_probe_from_scratch():
    """λ ranks heads for lm_probe as for MLM: θ trains together with a fresh probe (standardised, the default)."""
    from papa.method.extract import extract_constants
    from papa.probing.ranking import learn_lambdas

    model, tok = tiny_model("llama", lm_head=True, init_std=0.2), tiny_tokenizer("llama")
    data = _encoded(model, tok)
    ctrl = papa.attach(model)
    try:
        ctrl.set_constants(extract_constants(model, tok, TEXTS, max_length=N, layout="standard", progress=False))
        lambdas = learn_lambdas(ctrl, get_task("lm_probe"), data, TrainSettings(learning_rate=0.05, batch_size=2,
                                                                                 epochs=1),
                                progress=False, standardize=True)
        assert lambdas.shape == (2, 4) and not torch.allclose(lambdas, torch.full_like(lambdas, 0.5))
        assert torch.all(ctrl.modes == 0)  # back to keep
    finally:
        papa.detach(model)


def test_a_grid_trains_a_standardised_probe_per_seed_and_keeps_its_predictions(tmp_path, data_dir, monkeypatch):
    """End to end on WikiText: a decoder's grid trains the probe (not the LM head: the seeds differ), on standardised
    inputs by default, and stores each run's per-example losses beside its row."""
    from papa.probing.standardize import load_input_statistics
    from papa.runs.experiment import GridConfig, run_grid
    from papa.runs.predictions_store import load_run_predictions
    from papa.runs.profiles import PROFILES, Profile

    monkeypatch.setitem(PROFILES, "lm-probe-test", Profile(
        "lm-probe-test", train_limit=8, eval_limit=6, corpus_limit=8, rank_limit=8, rank_epochs=1, epochs=1,
        seeds=(0, 1), fractions=("1", "0")))
    path = tmp_path / "tiny-llama"
    tiny_model("llama", lm_head=True).save_pretrained(path)
    tiny_tokenizer("llama").save_pretrained(path)
    out = tmp_path / "out"
    rows = run_grid(GridConfig(task="lm_probe", model=str(path), profile="lm-probe-test", constants=("zeros",),
                               folder=str(out), data_dir=str(data_dir)), progress=False)
    assert len(rows) == 4 and set(rows["probe_inputs"]) == {"standardized"} and set(rows["layout"]) == {"standard"}
    assert np.isfinite(rows["value"]).all() and (rows["value"] <= 0).all()
    for _, runs in rows.groupby("fraction_label"):
        assert runs["value"].nunique() == 2  # a probe trained per seed, unlike lm's one scoring
    found = load_run_predictions(RunFolder.at(out), rows["run_id"])
    for row in rows.itertuples():
        assert found[row.run_id].kind == "next_token"
        assert metric_on(found[row.run_id], "neg_log_perplexity") == pytest.approx(row.value, rel=1e-6)
    statistics = sorted((out / "probe_inputs").glob("*.safetensors"))
    assert len(statistics) == 2  # one per point (fraction), over its labelled training slots
    stats, _ = load_input_statistics(statistics[0])
    assert stats.mean.shape == (3, 32)  # all L+1 hidden states
