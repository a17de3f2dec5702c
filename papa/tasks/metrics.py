"""Task metrics (paper Sec. 4.1), each a function over predictions and references.

MCC, accuracy and F1 from scikit-learn, seqeval F1 (NER and POS, as HF ``run_ner``), negative log-perplexity (MLM).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from papa.core.errors import PapaError

__all__ = ["METRICS", "UnknownMetricError", "compute_metric", "matthews_correlation", "accuracy", "f1", "seqeval_f1",
           "neg_log_perplexity", "get_metric"]


class UnknownMetricError(PapaError, ValueError):
    """No metric of that name."""


def _check_same_length(predictions: Sequence[Any], references: Sequence[Any]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if len(predictions) == 0:
        raise ValueError("no predictions to score")


def matthews_correlation(
    predictions: Sequence[int], references: Sequence[int], label_names: Sequence[str] | None = None
) -> float:
    """Matthews correlation coefficient (CoLA)."""
    from sklearn.metrics import matthews_corrcoef  # scikit-learn is imported where a metric is computed (seconds)

    _check_same_length(predictions, references)
    return float(matthews_corrcoef(list(references), list(predictions)))


def accuracy(
    predictions: Sequence[int], references: Sequence[int], label_names: Sequence[str] | None = None
) -> float:
    """Fraction of exact matches (SST-2, MNLI)."""
    from sklearn.metrics import accuracy_score

    _check_same_length(predictions, references)
    return float(accuracy_score(list(references), list(predictions)))


def f1(predictions: Sequence[int], references: Sequence[int], label_names: Sequence[str] | None = None) -> float:
    """Binary F1 of the positive class, id 1 (MRPC: ``equivalent``)."""
    from sklearn.metrics import f1_score

    _check_same_length(predictions, references)
    return float(f1_score(list(references), list(predictions), pos_label=1, average="binary", zero_division=0.0))


def seqeval_f1(
    predictions: Sequence[Sequence[int]],
    references: Sequence[Sequence[int]],
    label_names: Sequence[str] | None = None,
) -> float:
    """Micro F1 over chunks by seqeval's default mode, of per-sentence label id lists (``label_names`` maps them to
    tags); POS tags without an IOB prefix form seqeval's own chunks, as HF ``run_ner`` reports."""
    import seqeval.metrics  # here, not at import: only tagging tasks need it (and a GPU image may lack it)

    if label_names is None:
        raise ValueError("seqeval_f1 needs label_names to turn label ids into tags")
    _check_same_length(predictions, references)
    y_pred, y_true = [], []
    for i, (pred, ref) in enumerate(zip(predictions, references)):
        if len(pred) != len(ref):
            raise ValueError(f"sentence {i}: {len(pred)} predicted tags but {len(ref)} reference tags")
        y_pred.append([label_names[int(t)] for t in pred])
        y_true.append([label_names[int(t)] for t in ref])
    with warnings.catch_warnings():
        # seqeval warns on every tag without an IOB prefix (all POS tags); the result is what we want.
        warnings.filterwarnings("ignore", message=".*seems not to be NE tag.*")
        return float(seqeval.metrics.f1_score(y_true, y_pred))


def neg_log_perplexity(
    predictions: float, references: Any = None, label_names: Sequence[str] | None = None
) -> float:
    """Negative log-perplexity of masked tokens: ``predictions`` is their mean cross-entropy (nats)."""
    loss = float(predictions)
    if not math.isfinite(loss) or loss < 0:
        raise ValueError(f"mean masked-token cross-entropy must be finite and >= 0, got {predictions!r}")
    # log(perplexity) = mean cross-entropy, so the higher-is-better score is its negative.
    return -loss


METRICS: dict[str, Callable[..., float]] = {
    "matthews_correlation": matthews_correlation,
    "accuracy": accuracy,
    "f1": f1,
    "seqeval_f1": seqeval_f1,
    "neg_log_perplexity": neg_log_perplexity,
}


def compute_metric(
    name: str, predictions: Any, references: Any, label_names: Sequence[str] | None = None
) -> float:
    """Score ``predictions`` against ``references`` with metric ``name`` (see ``METRICS``)."""
    return get_metric(name)(predictions, references, label_names)


def get_metric(name: str) -> Callable[..., float]:
    """The function of metric ``name`` (see ``METRICS``); an `UnknownMetricError` naming the known ones if none."""
    try:
        return METRICS[name]
    except (KeyError, TypeError):
        raise UnknownMetricError(f"unknown metric {name!r}; known metrics: {', '.join(METRICS)}") from None
