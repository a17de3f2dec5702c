"""Majority-class baselines on the real data: the numbers the README's acceptance bar is read against."""
from __future__ import annotations

import pytest

from papa.tasks.baselines import majority_baseline, majority_label
from papa.tasks.data import Example, load_examples
from papa.tasks.registry import get_task


def test_toy_baselines_per_metric():
    sst2, cola, mrpc = get_task("sst2"), get_task("cola"), get_task("mrpc")
    train = [Example(text="a", label=1)] * 3 + [Example(text="b", label=0)]
    evaluation = [Example(text="c", label=1), Example(text="d", label=0), Example(text="e", label=0)]
    assert majority_label(sst2, train) == 1
    assert majority_baseline(sst2, train, evaluation) == pytest.approx(1 / 3)
    assert majority_baseline(cola, train, evaluation) == 0.0           # a constant prediction: MCC 0
    assert majority_baseline(mrpc, train, evaluation) == pytest.approx(0.5)  # F1 of "all positive": 2·(1/3)/(4/3)
    assert majority_label(sst2, [Example(text="x", label=1), Example(text="y", label=0)]) == 0  # ties: smaller id


def test_token_baseline_labels_every_word():
    ner = get_task("ner")
    o, per = ner.label_names.index("O"), ner.label_names.index("B-PER")
    train = [Example(words=("a", "b", "c"), label=(o, o, per))]
    assert majority_label(ner, train) == o
    assert majority_baseline(ner, train, [Example(words=("d", "e"), label=(per, o))]) == 0.0  # no entity found
    assert majority_baseline(ner, [Example(words=("a",), label=(per,))],
                             [Example(words=("d", "e"), label=(per, o))]) == pytest.approx(2 / 3)


def test_vocabulary_tasks_have_no_majority_class():
    with pytest.raises(ValueError, match="no majority baseline"):
        majority_label(get_task("mlm"), [Example(text="a")])


def test_real_validation_baselines(data_dir):
    """GLUE's validation sets: MRPC is 68% paraphrases (F1 0.81 for "all paraphrase"), SST-2 51% positive."""
    mrpc, sst2 = get_task("mrpc"), get_task("sst2")
    mrpc_f1 = majority_baseline(mrpc, load_examples(mrpc, "train", data_dir), load_examples(mrpc, "eval", data_dir))
    assert mrpc_f1 == pytest.approx(0.812, abs=0.001)
    sst2_acc = majority_baseline(sst2, load_examples(sst2, "train", data_dir, limit=2000),
                                 load_examples(sst2, "eval", data_dir))
    assert 0.49 < sst2_acc < 0.52
    ner = get_task("ner")
    assert majority_baseline(ner, load_examples(ner, "train", data_dir, limit=500),
                             load_examples(ner, "eval", data_dir, limit=500)) == 0.0  # all "O": no entity


def test_the_unigram_baseline_by_hand():
    """Train tokens 1, 1, 2 over a vocabulary of 4: k maximises the training tokens' leave-one-out likelihood
    2·log((1 + k)/(2 + 4k)) + log(k/(2 + 4k)); the evaluation tokens are scored with it and never choose it."""
    import math

    from papa.tasks.baselines import UNIGRAM_SMOOTHING, unigram_baseline

    def loo(k):
        return 2 * math.log((1 + k) / (2 + 4 * k)) + math.log(k / (2 + 4 * k))

    best = max(UNIGRAM_SMOOTHING, key=loo)
    score, k = unigram_baseline([1, 1, 2], [1, 3], 4)
    assert k == best
    assert score == pytest.approx((math.log((2 + k) / (3 + 4 * k)) + math.log(k / (3 + 4 * k))) / 2)
    assert unigram_baseline([1, 1, 2], [3, 3, 3], 4)[1] == k  # other evaluation tokens: the same smoothing
    assert unigram_baseline([1, 1, 2], [1, 1], 4)[0] > math.log(1 / 4)  # the frequent token: better than uniform
    with pytest.raises(ValueError, match="outside the vocabulary"):
        unigram_baseline([1, 1, 9], [1], 4)
