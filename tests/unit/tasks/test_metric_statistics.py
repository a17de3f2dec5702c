"""Per-example statistics give every metric's value: on the whole set and on any resample of its examples."""
from __future__ import annotations

import numpy as np
import pytest

from papa.tasks.metric_statistics import metric_from_sums, metric_on_resamples, per_example_statistics
from papa.tasks.metrics import METRICS, UnknownMetricError, compute_metric
from papa.tasks.registry import CONLL_NER_LABELS, CONLL_POS_LABELS


def _classification(rng, n, classes=2):
    ref = rng.integers(0, classes, n).tolist()
    pred = [r if rng.random() < 0.7 else int(rng.integers(0, classes)) for r in ref]
    return pred, ref


def _tagging(rng, n, labels):
    ref = [rng.integers(0, len(labels), int(rng.integers(1, 9))).tolist() for _ in range(n)]
    pred = [[t if rng.random() < 0.6 else int(rng.integers(0, len(labels))) for t in sent] for sent in ref]
    return pred, ref


def _case(metric, rng, n=60):
    """(predictions, references, label_names, the lists of a resample given its indices)."""
    if metric == "seqeval_f1":
        pred, ref = _tagging(rng, n, CONLL_NER_LABELS)
        return pred, ref, CONLL_NER_LABELS
    if metric == "neg_log_perplexity":
        return rng.uniform(0, 40, n).tolist(), rng.integers(1, 12, n).tolist(), None
    return (*_classification(rng, n, 3 if metric == "accuracy" else 2), None)


def _direct(metric, pred, ref, labels, idx):
    """The metric computed by `compute_metric` on the resampled lists."""
    p, r = [pred[i] for i in idx], [ref[i] for i in idx]
    if metric == "neg_log_perplexity":
        return compute_metric(metric, sum(p) / sum(r), None)
    return compute_metric(metric, p, r, label_names=labels)


@pytest.mark.parametrize("metric", sorted(METRICS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_whole_set_and_resamples_equal_the_metric(metric, seed):
    rng = np.random.default_rng(seed)
    pred, ref, labels = _case(metric, rng)
    stats = per_example_statistics(metric, pred, ref, label_names=labels)
    n = len(pred)
    draws = [np.arange(n)] + [rng.integers(0, n, n) for _ in range(5)]
    weights = np.stack([np.bincount(d, minlength=n) for d in draws])
    got = metric_on_resamples(metric, stats, weights)
    want = [_direct(metric, pred, ref, labels, d) for d in draws]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_pos_chunks_close_at_sentence_ends():
    # seqeval lets a "chunk" of prefix-less tags (POS) run on across the separator it puts between sentences, so
    # its POS score depends on the sentences' order; per-sentence counts close chunks at sentence ends: close to it
    rng = np.random.default_rng(0)
    pred, ref = _tagging(rng, 300, CONLL_POS_LABELS)
    stats = per_example_statistics("seqeval_f1", pred, ref, label_names=CONLL_POS_LABELS)
    whole = compute_metric("seqeval_f1", pred, ref, label_names=CONLL_POS_LABELS)
    assert metric_from_sums("seqeval_f1", stats.sum(0)) == pytest.approx(whole, abs=0.01)


def test_degenerate_cases_score_as_the_libraries_do():
    # one class predicted everywhere: MCC 0 (scikit-learn), F1 0 when nothing positive is predicted
    for metric, pred, ref in (("matthews_correlation", [1, 1, 1], [0, 1, 1]), ("f1", [0, 0, 0], [1, 0, 1]),
                              ("matthews_correlation", [0, 0], [0, 0])):
        stats = per_example_statistics(metric, pred, ref)
        assert metric_from_sums(metric, stats.sum(0)) == pytest.approx(compute_metric(metric, pred, ref))
    tags = CONLL_NER_LABELS
    stats = per_example_statistics("seqeval_f1", [[0, 0]], [[0, 0]], label_names=tags)  # no chunks at all
    assert metric_from_sums("seqeval_f1", stats.sum(0)) == compute_metric("seqeval_f1", [[0, 0]], [[0, 0]],
                                                                         label_names=tags)


def test_bad_input_is_refused():
    with pytest.raises(UnknownMetricError):
        per_example_statistics("bleu", [1], [1])
    with pytest.raises(ValueError, match="2 predictions but 1"):
        per_example_statistics("accuracy", [1, 0], [1])
    with pytest.raises(ValueError, match="label_names"):
        per_example_statistics("seqeval_f1", [[1]], [[1]])
    with pytest.raises(ValueError, match=r"weights must be \[resamples, 2\]"):
        metric_on_resamples("accuracy", per_example_statistics("accuracy", [1, 0], [1, 1]), np.ones((3, 5)))
