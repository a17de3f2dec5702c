"""Every task metric as a function of per-example counts that add up, for resampling evaluation sets.

A resample is then ``weights @ statistics``. On the whole set `metric_from_sums` gives `compute_metric`'s value,
but for POS, where these counts close chunks at each sentence's end and seqeval does not (about 0.01 apart).
"""
from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from papa.tasks.metrics import get_metric


@functools.lru_cache(maxsize=1 << 17)
def _chunks(tags: tuple[str, ...]) -> frozenset[tuple]:
    # Cached: runs of a task score the same sentences, and seqeval reads about 10 µs a tag.
    from seqeval.metrics.sequence_labeling import get_entities

    with warnings.catch_warnings():  # POS tags have no IOB prefix; seqeval's metric reads them the same way
        warnings.filterwarnings("ignore", message=".*seems not to be NE tag.*")
        return frozenset(get_entities(list(tags)))


def per_example_statistics(metric: str, predictions: Any, references: Any,
                           label_names: Sequence[str] | None = None, num_labels: int | None = None) -> np.ndarray:
    """Counts of each evaluation example that sum to `metric`'s value: an array [examples, k]. ``neg_log_perplexity``
    takes each example's summed cross-entropy and scored tokens; ``seqeval_f1`` label id lists and `label_names`;
    ``matthews_correlation`` `num_labels` classes (default: the largest label seen + 1)."""
    get_metric(metric)
    if metric == "neg_log_perplexity":
        loss, tokens = np.asarray(predictions, dtype=np.float64), np.asarray(references, dtype=np.float64)
        if loss.shape != tokens.shape or loss.ndim != 1:
            raise ValueError(f"need one loss sum and one token count per example, got shapes {loss.shape} and "
                             f"{tokens.shape}")
        return np.stack([loss, tokens], axis=1)
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if metric == "seqeval_f1":
        if label_names is None:
            raise ValueError("seqeval_f1 needs label_names to turn label ids into tags")
        out = np.zeros((len(predictions), 3))
        for i, (pred, ref) in enumerate(zip(predictions, references)):
            p = _chunks(tuple(label_names[int(t)] for t in pred))
            t = _chunks(tuple(label_names[int(t)] for t in ref))
            out[i] = (len(p & t), len(p), len(t))
        return out
    pred, ref = np.asarray(predictions, dtype=np.int64), np.asarray(references, dtype=np.int64)
    if metric == "accuracy":
        return np.stack([pred == ref, np.ones_like(pred, dtype=bool)], axis=1).astype(np.float64)
    if metric == "f1":  # positive class 1: true positives, false positives, false negatives
        return np.stack([(pred == 1) & (ref == 1), (pred == 1) & (ref != 1), (pred != 1) & (ref == 1)],
                        axis=1).astype(np.float64)
    # matthews_correlation: one-hot of the (reference, prediction) cell of a confusion matrix
    c = num_labels or int(max(pred.max(initial=0), ref.max(initial=0))) + 1
    out = np.zeros((len(pred), c * c))
    out[np.arange(len(pred)), ref * c + pred] = 1.0
    return out


def metric_from_sums(metric: str, sums: np.ndarray) -> np.ndarray | float:
    """`metric` of summed per-example statistics: `sums` [..., k] (e.g. [resamples, k]) gives [...] values."""
    get_metric(metric)
    s = np.asarray(sums, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric == "neg_log_perplexity":
            value = -s[..., 0] / np.maximum(s[..., 1], 1.0)
        elif metric == "accuracy":
            value = s[..., 0] / np.maximum(s[..., 1], 1.0)
        elif metric == "f1":
            tp, fp, fn = s[..., 0], s[..., 1], s[..., 2]
            value = _ratio(2 * tp, 2 * tp + fp + fn)
        elif metric == "seqeval_f1":
            correct, predicted, true = s[..., 0], s[..., 1], s[..., 2]
            value = np.where(correct > 0, _ratio(2 * correct, predicted + true), 0.0)
        else:
            value = _mcc(s)
    return float(value) if np.ndim(value) == 0 else value


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """`numerator` / `denominator`, 0 where the denominator is not positive."""
    return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)


def _mcc(sums: np.ndarray) -> np.ndarray:
    """Matthews correlation of flattened confusion matrices [..., c*c] (rows: reference), as scikit-learn."""
    c = int(round(np.sqrt(sums.shape[-1])))
    conf = sums.reshape(*sums.shape[:-1], c, c)
    t, p = conf.sum(axis=-1), conf.sum(axis=-2)
    correct, total = np.trace(conf, axis1=-2, axis2=-1), conf.sum(axis=(-2, -1))
    cov_tp = correct * total - (t * p).sum(axis=-1)
    cov_pp = total ** 2 - (p * p).sum(axis=-1)
    cov_tt = total ** 2 - (t * t).sum(axis=-1)
    return _ratio(cov_tp, np.sqrt(cov_tt * cov_pp))


def metric_on_resamples(metric: str, statistics: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """`metric` on each resample of the evaluation examples: `statistics` [n, k] of one run, `weights` [R, n]
    (how many times each example is drawn; all ones = the whole set) -> [R] values."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != statistics.shape[0]:
        raise ValueError(f"weights must be [resamples, {statistics.shape[0]}] for {statistics.shape[0]} examples, "
                         f"got {w.shape}")
    return np.asarray(metric_from_sums(metric, w @ statistics), dtype=np.float64).reshape(-1)
