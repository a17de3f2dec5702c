"""Task encoding (labels aligned to the PAPA layout), feature caching, and the probe training loop."""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.probing.features import FeatureSource, encode_task
from papa.probing.probes import IGNORE_INDEX
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.tasks.data import Example
from papa.tasks.registry import get_task


def test_token_labels_on_first_subtoken_only():
    tok = tiny_tokenizer("deberta-v2")  # character pieces: words split into several sub-tokens
    spec = get_task("pos")
    data = encode_task(tok, spec, [Example(words=("ab", "c"), label=(3, 7))], max_length=8, model_type="deberta-v2")
    # slots: [CLS] ▁a b ▁c [PAD] [PAD] [PAD] [SEP]
    assert data.labels[0].tolist() == [IGNORE_INDEX, 3, IGNORE_INDEX, 7] + [IGNORE_INDEX] * 4


def test_sentence_and_pair_labels():
    tok = tiny_tokenizer("bert")
    data = encode_task(tok, get_task("mrpc"), [Example(text="the cat", text_pair="a dog", label=1),
                                               Example(text="it", text_pair="was", label=0)],
                       max_length=10, model_type="bert")
    assert data.labels.tolist() == [1, 0] and data.inputs["input_ids"].shape == (2, 10)


def test_mlm_masks_only_real_non_special_tokens_deterministically():
    tok = tiny_tokenizer("bert")
    examples = [Example(text="the cat sat on the mat and the dog ran to the big mat")] * 40
    a = encode_task(tok, get_task("mlm"), examples, max_length=20, model_type="bert")
    b = encode_task(tok, get_task("mlm"), examples, max_length=20, model_type="bert")
    assert torch.equal(a.inputs["input_ids"], b.inputs["input_ids"]) and torch.equal(a.labels, b.labels)
    selected = a.labels != IGNORE_INDEX
    assert selected.any()
    assert not selected[:, 0].any() and not selected[:, -1].any()  # [CLS] and the final [SEP]
    assert not selected[a.inputs["attention_mask"] == 0].any()
    assert 0.05 < selected.float().sum() / (a.inputs["attention_mask"].sum() - 80) < 0.3


def test_empty_examples_are_an_error():
    with pytest.raises(ValueError, match="no examples"):
        encode_task(tiny_tokenizer("bert"), get_task("sst2"), [], max_length=8, model_type="bert")


def _toy_sst2(tok):
    good = ["it was very good", "a good film", "the movie was good", "good plot and good actor"]
    bad = ["it was very bad", "a bad film", "the movie was bad", "bad plot and bad actor"]
    examples = [Example(text=t, label=1) for t in good] + [Example(text=t, label=0) for t in bad]
    return encode_task(tok, get_task("sst2"), examples * 4, max_length=12, model_type="bert")


def test_every_feature_store_gives_the_same_training(monkeypatch, tmp_path):
    """Stored in memory or on disk, the probe reads the same features bit for bit; run again for every batch
    (``backbone``), the same to float tolerance."""
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    data = _toy_sst2(tok)
    spec = get_task("sst2")
    settings = TrainSettings(learning_rate=1e-2, batch_size=8, epochs=3)
    results = {}
    for store in ("host", "disk", "backbone"):
        source = FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path, store=store)
        assert source.placement == store and source.cached == (store != "backbone")
        torch.manual_seed(0)
        probe = make_probe(spec, model, 12)
        losses = train_probe(probe, "sentence", source, settings, seed=0, progress=False)
        results[store] = (losses, evaluate_probe(probe, spec, source))
        source.close()
    assert results["host"] == results["disk"]
    assert results["host"][0] == pytest.approx(results["backbone"][0], abs=1e-6)
    assert results["host"][1] == results["backbone"][1] == 1.0  # the toy task is learnt (on its training data)


def test_training_is_seeded():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    data, spec = _toy_sst2(tok), get_task("sst2")
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    runs = []
    for seed in (3, 3, 4):
        torch.manual_seed(seed)
        probe = make_probe(spec, model, 12)
        runs.append(train_probe(probe, "sentence", source, TrainSettings(1e-3, 8, 1), seed=seed, progress=False))
    assert runs[0] == runs[1] and runs[0] != runs[2]


def test_token_scores_read_only_labelled_slots_sentence_by_sentence():
    """The token probe classifies only labelled slots (training and evaluation); the metric still sees each
    sentence's own predictions, as it does when every slot is classified."""
    from papa.tasks.metrics import compute_metric

    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    spec = get_task("ner")
    words = [("the", "cat", "sat"), ("a", "dog"), ("it", "was", "the", "big", "mat")]
    examples = [Example(words=w, label=tuple((i + j) % spec.num_labels for j in range(len(w))))
                for i, w in enumerate(words)]
    data = encode_task(tok, spec, examples, max_length=12, model_type="bert")
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    torch.manual_seed(0)
    probe = make_probe(spec, model, 12)
    feats, mask, labels = source(torch.arange(len(data)))
    every_slot = probe(feats, mask).argmax(-1)  # [examples, n]: the old way, every slot classified
    keep = labels != IGNORE_INDEX
    preds = [row[k].tolist() for row, k in zip(every_slot, keep)]
    refs = [row[k].tolist() for row, k in zip(labels, keep)]
    assert [len(p) for p in preds] == [3, 2, 5]
    expected = compute_metric(spec.metric, preds, refs, label_names=spec.label_names)
    assert evaluate_probe(probe, spec, source, batch_size=2) == pytest.approx(expected)


def test_features_over_the_memory_budget_go_to_disk_and_over_every_budget_fail(monkeypatch, tmp_path):
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    data = _toy_sst2(tok)
    monkeypatch.setenv("PAPA_FEATURE_CACHE_GB", "1e-9")
    source = FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path)
    assert source.placement == "disk"
    source.close()
    monkeypatch.setenv("PAPA_FEATURE_DISK_GB", "1e-9")
    with pytest.raises(InputError, match="more than every budget .* PAPA_FEATURE_STORE=backbone"):
        FeatureSource(model, data, trainable_backbone=False, progress=False, folder=tmp_path)
    monkeypatch.delenv("PAPA_FEATURE_CACHE_GB")  # the default: a share of the memory available, far above this
    assert FeatureSource(model, data, trainable_backbone=False, progress=False).placement == "host"
