"""Majority-class baselines: the score of predicting the training set's most frequent label for every example (or
every word, for token tasks), in the task's own metric. A probe that does not beat it has learnt nothing from its
features (CoLA's MCC is 0 there, MRPC's F1 that of calling every pair a paraphrase)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

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
