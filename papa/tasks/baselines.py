"""Baselines a probe must beat: the training set's majority label in the task's own metric, and for tasks that
predict the vocabulary the unigram frequency (`unigram_baseline`)."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from papa.tasks.data import Example
from papa.tasks.metrics import compute_metric
from papa.tasks.registry import TaskSpec


def majority_label(spec: TaskSpec, train: Sequence[Example]) -> int:
    """The most frequent label of `train` (of its words, for a token task); ties go to the smaller id."""
    if spec.num_labels == 0:
        raise ValueError(f"task {spec.name!r} predicts the vocabulary, not a class: it has no majority baseline")
    counts = Counter(w for e in train for w in e.label) if spec.kind == "token" else Counter(e.label for e in train)
    if not counts:
        raise ValueError(f"task {spec.name!r}: no training labels to count")
    return min(counts, key=lambda label: (-counts[label], label))


def majority_baseline(spec: TaskSpec, train: Sequence[Example], evaluation: Sequence[Example]) -> float:
    """`spec`'s metric on `evaluation` when every example (word) is given `train`'s majority label."""
    label = majority_label(spec, train)
    if spec.kind == "token":
        refs = [list(e.label) for e in evaluation]
        preds = [[label] * len(r) for r in refs]
    else:
        refs = [e.label for e in evaluation]
        preds = [label] * len(refs)
    return compute_metric(spec.metric, preds, refs, label_names=spec.label_names)


#: The add-k smoothing constants `unigram_baseline` chooses among (by the training tokens' leave-one-out likelihood).
UNIGRAM_SMOOTHING = tuple(10.0 ** (e / 4) for e in range(-16, 5))


def unigram_baseline(train_targets: Iterable[int], eval_targets: Iterable[int], vocab_size: int) -> tuple[float, float]:
    """(mean log-probability in nats per token, k) of `eval_targets` under the add-k smoothed frequencies of
    `train_targets` over `vocab_size` tokens, k chosen from `UNIGRAM_SMOOTHING` by the training tokens' leave-one-out
    likelihood."""
    train, evaluation = Counter(train_targets), Counter(eval_targets)
    n = sum(train.values())
    if n < 2 or not evaluation:
        raise ValueError(f"a unigram baseline needs at least 2 training and 1 evaluation token, got {n} and "
                         f"{sum(evaluation.values())}")
    if any(not 0 <= t < vocab_size for t in (*train, *evaluation)):
        raise ValueError(f"a target token lies outside the vocabulary of {vocab_size} tokens")

    def leave_one_out(k: float) -> float:
        return sum(c * math.log((c - 1 + k) / (n - 1 + k * vocab_size)) for c in train.values())

    k = max(UNIGRAM_SMOOTHING, key=leave_one_out)
    total = sum(evaluation.values())
    score = sum(c * math.log((train.get(t, 0) + k) / (n + k * vocab_size)) for t, c in evaluation.items()) / total
    return score, k
