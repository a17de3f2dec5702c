"""Per-example evaluation outcomes: every task kind's metric recomputed from them (on all examples: the run's value;
on a resample: the metric of the resampled lists), and their file (round trip, corrupt and mismatched files)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import CorruptArtifactError, IncompatibleArtifactError, InputError
from papa.probing.features import FeatureSource, encode_task
from papa.probing.predictions import (PREDICTIONS_HEADER_KEY, EvalPredictions, load_predictions, metric_on,
                                      save_predictions)
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.tasks.data import Example
from papa.tasks.metrics import compute_metric
from papa.tasks.registry import get_task

_WORDS = ("the", "cat", "sat", "on", "mat", "john", "runs", "big")


def _examples(task: str, n: int = 11) -> list[Example]:
    spec = get_task(task)
    if spec.kind == "token":
        return [Example(words=_WORDS[i % 3:i % 3 + 2 + i % 4],
                        label=tuple((3 * i + j) % spec.num_labels for j in range(2 + i % 4))) for i in range(n)]
    if spec.vocabulary_targets:
        return [Example(text=" ".join(_WORDS[: 2 + i % 6]) + " and the dog ran to the big mat") for i in range(n)]
    pair = "a dog ran" if spec.kind == "pair" else None
    return [Example(text=" ".join(_WORDS[i % 4:i % 4 + 3]), text_pair=pair, label=i % spec.num_labels)
            for i in range(n)]


def _scored(task: str, arch: str = "bert"):
    """A probe of `task` trained one epoch on a tiny model, its spec and evaluation source."""
    spec = get_task(task)
    causal = spec.predicts_next_token
    model = tiny_model(arch, lm_head=causal, init_std=0.2)
    tok = tiny_tokenizer(arch)
    data = encode_task(tok, spec, _examples(task), max_length=24, model_type=model.config.model_type,
                       layout="standard" if causal else None)
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    torch.manual_seed(0)
    probe = make_probe(spec, model, 24, len(tok))
    train_probe(probe, spec.kind, source, TrainSettings(1e-2, 4, 1), seed=0, progress=False)
    return probe, spec, source


KINDS = [("sst2", "bert"), ("cola", "bert"), ("mrpc", "bert"), ("mnli", "bert"), ("ner", "bert"), ("pos", "bert"),
         ("mlm", "bert"), ("lm", "llama"), ("lm_probe", "llama")]


@pytest.mark.parametrize("task,arch", KINDS)
def test_metric_on_every_example_is_the_runs_value(task, arch):
    probe, spec, source = _scored(task, arch)
    value = evaluate_probe(probe, spec, source, batch_size=3)  # several batches, a short last one
    again, predictions = evaluate_probe(probe, spec, source, batch_size=3, return_predictions=True)
    assert again == value  # asking for predictions leaves the value as it was, bit for bit
    assert predictions.kind == spec.kind and predictions.num_examples == len(source.data)
    every = np.arange(predictions.num_examples)
    if spec.vocabulary_targets:
        # the run summed float32 batch losses; the per-example sums add up to the same to float rounding
        assert metric_on(predictions, spec) == pytest.approx(value, rel=1e-6, abs=1e-9)
        assert metric_on(predictions, spec.metric, every) == pytest.approx(value, rel=1e-6, abs=1e-9)
    else:
        assert metric_on(predictions, spec) == value
        assert metric_on(predictions, spec.metric, every) == value
        assert metric_on(predictions, spec, list(every)) == value


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_lm_loss_is_the_same_bit_for_bit_with_predictions(dtype):
    """With predictions the batch losses come from one log_softmax (cross_entropy's own decomposition) in the
    logits' dtype; the value is cross_entropy's, in bfloat16 too."""
    spec, tok = get_task("lm"), tiny_tokenizer("llama")
    model = tiny_model("llama", lm_head=True, init_std=0.2).to(dtype)
    data = encode_task(tok, spec, _examples("lm"), max_length=24, model_type="llama", layout="standard")
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    probe = make_probe(spec, model, 24)
    value = evaluate_probe(probe, spec, source, batch_size=3)
    assert evaluate_probe(probe, spec, source, batch_size=3, return_predictions=True)[0] == value


@pytest.mark.parametrize("task,arch", KINDS)
def test_a_resample_scores_the_resampled_examples(task, arch):
    probe, spec, source = _scored(task, arch)
    _, predictions = evaluate_probe(probe, spec, source, return_predictions=True)
    draw = np.random.default_rng(1).integers(0, predictions.num_examples, size=2 * predictions.num_examples)
    if spec.vocabulary_targets:
        expected = -predictions.loss[draw].sum() / predictions.tokens[draw].sum()
        assert metric_on(predictions, spec, draw) == pytest.approx(expected, rel=1e-12)
        return
    preds, refs = predictions.metric_inputs()
    expected = compute_metric(spec.metric, [preds[i] for i in draw], [refs[i] for i in draw],
                              label_names=spec.label_names)
    assert metric_on(predictions, spec, draw) == expected


def test_token_predictions_keep_each_sentences_sequence():
    p = EvalPredictions.from_sequences([[1, 2], [], [3]], [[1, 1], [], [4]], label_names=get_task("ner").label_names)
    assert p.offsets.tolist() == [0, 2, 2, 3] and p.predicted.tolist() == [1, 2, 3] and p.num_examples == 3
    assert p.metric_inputs([2, 0, 2]) == ([[3], [1, 2], [3]], [[4], [1, 1], [4]])
    with pytest.raises(ValueError, match="read-only"):
        p.predicted[0] = 5  # shared by every resample


def test_bad_indices_and_metrics_are_named():
    p = EvalPredictions.from_labels("sentence", [0, 1, 1], [0, 1, 0], ("negative", "positive"))
    for indices, match in (([3], "index 3 is outside the 3"), ([-1], "index -1"), ([], "empty"),
                           ([0.5], "integers"), ([[0, 1]], "flat")):
        with pytest.raises(InputError, match=match):
            metric_on(p, "accuracy", indices)
    with pytest.raises(InputError, match="cannot be computed from sentence predictions"):
        metric_on(p, "seqeval_f1")
    with pytest.raises(InputError, match="another task"):
        metric_on(p, get_task("cola"))
    with pytest.raises(ValueError, match="unknown metric"):
        metric_on(p, "bleu")


def test_inconsistent_predictions_are_refused():
    names = ("negative", "positive")
    with pytest.raises(InputError, match="3 predicted labels but 2 reference"):
        EvalPredictions.from_labels("sentence", [0, 1, 1], [0, 1], names)
    with pytest.raises(InputError, match="label 2 is not a label id of the 2 labels"):
        EvalPredictions.from_labels("sentence", [0, 2], [0, 1], names)
    with pytest.raises(InputError, match="need label_names"):
        EvalPredictions.from_sequences([[0]], [[0]], label_names=())
    with pytest.raises(InputError, match="sentence 1: 1 predicted labels but 2"):
        EvalPredictions.from_sequences([[0], [1]], [[0], [1, 1]], label_names=("O", "B-PER"))
    with pytest.raises(InputError, match="finite"):
        EvalPredictions.from_losses("mlm", [1.0, float("nan")], [3, 2])
    with pytest.raises(InputError, match="keep loss, tokens; predicted is not one of them"):
        EvalPredictions("lm", predicted=np.array([1]), loss=np.array([1.0]), tokens=np.array([1]))
    with pytest.raises(InputError, match="unknown task kind"):
        EvalPredictions("regression", predicted=np.array([1]), reference=np.array([1]))


# ---- the file ----------------------------------------------------------------------------------------------------

META = {"run_id": "0123456789abcdef", "task": "sst2", "metric": "accuracy", "value": 0.5, "seed": 0}


def _sst2(n: int = 872) -> EvalPredictions:
    rng = np.random.default_rng(0)
    return EvalPredictions.from_labels("sentence", rng.integers(0, 2, n), rng.integers(0, 2, n),
                                       get_task("sst2").label_names)


def test_round_trip_keeps_every_array_and_the_metadata(tmp_path):
    ner = get_task("ner")
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, 50)
    seqs = lambda: [rng.integers(0, ner.num_labels, k).tolist() for k in lengths]  # noqa: E731
    cases = [(_sst2(), META),
             (EvalPredictions.from_sequences(seqs(), seqs(), ner.label_names),
              {**META, "task": "ner", "metric": "seqeval_f1"}),
             (EvalPredictions.from_losses("lm", rng.random(20) * 50, rng.integers(1, 64, 20)),
              {**META, "task": "lm", "metric": "neg_log_perplexity"})]
    for original, meta in cases:
        path = save_predictions(tmp_path / f"{meta['task']}.safetensors", original, meta)
        loaded = load_predictions(path)
        assert loaded.kind == original.kind and loaded.label_names == original.label_names
        for name in ("predicted", "reference", "offsets", "loss", "tokens"):
            a, b = getattr(original, name), getattr(loaded, name)
            assert (a is None and b is None) or (np.array_equal(a, b) and a.dtype == b.dtype)
        assert loaded.metadata == meta
        assert metric_on(loaded, meta["metric"]) == metric_on(original, meta["metric"])
    assert not list(tmp_path.glob(".*.tmp"))


def test_labels_are_stored_compactly(tmp_path):
    path = save_predictions(tmp_path / "p.safetensors", _sst2(), META)
    assert path.stat().st_size < 5 * 1024  # 872 examples x 2 labels as int16 (3.4 KiB), plus the header


def test_metadata_must_name_the_run(tmp_path):
    with pytest.raises(InputError, match="missing: run_id"):
        save_predictions(tmp_path / "p.safetensors", _sst2(), {"task": "sst2", "metric": "accuracy"})
    with pytest.raises(InputError, match="JSON"):
        save_predictions(tmp_path / "p.safetensors", _sst2(), {**META, "when": object()})
    assert not list(tmp_path.iterdir())


def _rewrite(path, tensors=None, **header_changes):
    """Write a predictions file as `save_predictions` would, with some of its header or tensors changed."""
    header = json.loads(_header(path))
    header.update(header_changes)
    from safetensors.numpy import load_file

    save_file(tensors if tensors is not None else load_file(str(path)), str(path),
              metadata={PREDICTIONS_HEADER_KEY: json.dumps(header)})


def _header(path) -> str:
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        return f.metadata()[PREDICTIONS_HEADER_KEY]


@pytest.mark.parametrize("damage,match", [
    ("truncate", "not a readable safetensors file"),
    ("foreign", "not papa predictions"),
    ("garbled_header", "unreadable predictions metadata"),
    ("older", "predictions file that is in artifact format 1; this papa reads format 2"),
    ("count", "header says 871 examples but the arrays hold 872"),
    ("kind", "hold the arrays loss, tokens"),
    ("labels", "label 7 is not a label id of the 2 labels"),
    ("task", "made for task 'cola'"),
    ("metric", "metric 'seqeval_f1' does not read sentence predictions"),
    ("lengths", "872 predicted labels but 871 reference labels"),
])
def test_corrupt_or_mismatched_files_are_named(tmp_path, damage, match):
    path = save_predictions(tmp_path / "p.safetensors", _sst2(), META)
    predicted, reference = _sst2().predicted.astype(np.int16), _sst2().reference.astype(np.int16)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == "foreign":
        save_file({"x": np.zeros(3)}, str(path), metadata={"other": "{}"})
    elif damage == "garbled_header":
        save_file({"predicted": predicted, "reference": reference}, str(path),
                  metadata={PREDICTIONS_HEADER_KEY: "{not json"})
    elif damage == "older":
        _rewrite(path, format_version=1)
    elif damage == "count":
        _rewrite(path, num_examples=871)
    elif damage == "kind":
        _rewrite(path, kind="mlm")
    elif damage == "labels":
        _rewrite(path, {"predicted": np.full(872, 7, dtype=np.int16), "reference": reference})
    elif damage == "task":
        _rewrite(path, task="cola")  # a sentence task, but scored by MCC
    elif damage == "metric":
        _rewrite(path, metric="seqeval_f1")
    elif damage == "lengths":
        _rewrite(path, {"predicted": predicted, "reference": reference[:-1]})
    with pytest.raises(IncompatibleArtifactError if damage == "older" else CorruptArtifactError, match=match):
        load_predictions(path)


def test_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no predictions file"):
        load_predictions(tmp_path / "none.safetensors")


@pytest.mark.parametrize("form", ["labels", "sequences", "losses"])
def test_keeping_some_examples_scores_those_examples(form):
    names = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    rng = np.random.default_rng(0)
    if form == "labels":
        p, metric = EvalPredictions.from_labels("sentence", rng.integers(0, 2, 40), rng.integers(0, 2, 40)), "f1"
    elif form == "sequences":
        lengths = rng.integers(1, 7, 30)
        seqs = lambda: [rng.integers(0, 5, n).tolist() for n in lengths]  # noqa: E731
        p, metric = EvalPredictions.from_sequences(seqs(), seqs(), names), "seqeval_f1"
    else:
        p, metric = EvalPredictions.from_losses("lm", rng.uniform(0, 9, 25), rng.integers(1, 9, 25)), \
            "neg_log_perplexity"
    kept = np.delete(np.arange(p.num_examples), [0, 7])
    fewer = p.keeping(kept)
    assert fewer.num_examples == p.num_examples - 2 and fewer.label_names == p.label_names
    assert metric_on(fewer, metric) == pytest.approx(metric_on(p, metric, kept), abs=1e-12)
    assert metric_on(fewer, metric) != pytest.approx(metric_on(p, metric), abs=1e-12)  # two fewer examples moved it
    with pytest.raises(InputError, match="outside"):
        p.keeping([p.num_examples])
