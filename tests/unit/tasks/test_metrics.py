"""Each metric on a case small enough to check by hand."""
from __future__ import annotations

import math

import pytest

from papa.tasks.metrics import METRICS, UnknownMetricError, compute_metric
from papa.tasks.registry import CONLL_NER_LABELS, CONLL_POS_LABELS, TASKS


def test_matthews_correlation() -> None:
    # TP=1 FP=1 TN=2 FN=0: (1*2 - 1*0) / sqrt((1+1)(1+0)(2+1)(2+0)) = 2 / sqrt(12)
    score = compute_metric("matthews_correlation", [1, 1, 0, 0], [1, 0, 0, 0])
    assert score == pytest.approx(2 / math.sqrt(12))


def test_matthews_correlation_perfect_and_inverted() -> None:
    assert compute_metric("matthews_correlation", [0, 1, 1], [0, 1, 1]) == pytest.approx(1.0)
    assert compute_metric("matthews_correlation", [1, 0, 0], [0, 1, 1]) == pytest.approx(-1.0)


def test_accuracy() -> None:
    assert compute_metric("accuracy", [0, 1, 2, 1], [0, 1, 1, 1]) == pytest.approx(0.75)


def test_f1_is_for_the_positive_class() -> None:
    # TP=1 FP=1 FN=1 -> P = R = 1/2 -> F1 = 1/2
    assert compute_metric("f1", [1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.5)
    # All negatives predicted correctly but the one positive missed: F1 of class 1 is 0, not accuracy.
    assert compute_metric("f1", [0, 0, 0, 0], [0, 0, 0, 1]) == pytest.approx(0.0)


def _ids(tags: list[str], names: tuple[str, ...]) -> list[int]:
    return [names.index(t) for t in tags]


def test_seqeval_f1_ner() -> None:
    ref = _ids(["B-PER", "I-PER", "O", "B-LOC"], CONLL_NER_LABELS)
    pred = _ids(["B-PER", "I-PER", "O", "O"], CONLL_NER_LABELS)
    # 2 gold entities, 1 predicted and correct: P = 1, R = 1/2, F1 = 2/3
    score = compute_metric("seqeval_f1", [pred], [ref], label_names=CONLL_NER_LABELS)
    assert score == pytest.approx(2 / 3)


def test_seqeval_f1_ner_entity_level_not_token_level() -> None:
    ref = _ids(["B-ORG", "I-ORG", "I-ORG"], CONLL_NER_LABELS)
    pred = _ids(["B-ORG", "I-ORG", "O"], CONLL_NER_LABELS)
    # 2 of 3 tokens right, but the only entity has the wrong span: F1 = 0
    assert compute_metric("seqeval_f1", [pred], [ref], label_names=CONLL_NER_LABELS) == 0.0


def test_seqeval_f1_pos_uses_seqeval_chunking() -> None:
    # seqeval reads "NNP" as prefix N + type NP, and merges adjacent same-type tags into one chunk:
    # gold chunks {NP[0:1], BZ[2]}, predicted {NP[0], N[1], BZ[2]}; 1 correct -> P 1/3, R 1/2, F1 0.4.
    ref = _ids(["NNP", "NNP", "VBZ"], CONLL_POS_LABELS)
    pred = _ids(["NNP", "NN", "VBZ"], CONLL_POS_LABELS)
    assert compute_metric("seqeval_f1", [pred], [ref], label_names=CONLL_POS_LABELS) == pytest.approx(0.4)
    assert compute_metric("seqeval_f1", [ref], [ref], label_names=CONLL_POS_LABELS) == pytest.approx(1.0)


def test_seqeval_f1_needs_label_names_and_equal_lengths() -> None:
    with pytest.raises(ValueError, match="label_names"):
        compute_metric("seqeval_f1", [[0]], [[0]])
    with pytest.raises(ValueError, match="sentence 0"):
        compute_metric("seqeval_f1", [[0, 0]], [[0]], label_names=CONLL_NER_LABELS)


def test_neg_log_perplexity() -> None:
    # mean cross-entropy ln(10) nats <=> perplexity 10 <=> score -ln(10)
    score = compute_metric("neg_log_perplexity", math.log(10.0), None)
    assert score == pytest.approx(-math.log(10.0))
    assert math.exp(-score) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        compute_metric("neg_log_perplexity", float("nan"), None)
    with pytest.raises(ValueError):
        compute_metric("neg_log_perplexity", -1.0, None)


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="2 predictions but 3 references"):
        compute_metric("accuracy", [0, 1], [0, 1, 1])


def test_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown metric 'bleu'.*accuracy") as err:
        compute_metric("bleu", [0], [0])
    assert isinstance(err.value, UnknownMetricError)


def test_every_task_metric_exists() -> None:
    assert {spec.metric for spec in TASKS.values()} <= set(METRICS)
