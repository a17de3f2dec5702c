"""Bootstrap intervals of Fig. 4's pattern shares on tiny random models: the whole corpus's row is the extraction's
summary, the interval holds it, a seed fixes it, and bad arguments are refused before any work."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.controller import controller_of
from papa.method.extract import extract_constants
from papa.paper.pattern_intervals import Bootstrap, block_spans, pattern_share_intervals
from papa.paper.patterns import head_patterns, pattern_summary, special_slots
from papa.tasks.corpus import Corpus

N = 16
TEXTS = ["the cat sat on the mat", "a dog ran", "it was a very good movie", "the plot is bad", "john runs in paris",
         "mary ran to london", "the actor was not good", "a big dog sat", "the film was very very bad",
         "it is small", "the cat and the dog", "john and mary sat on a mat in london"]
PAIRS = ["a cat", "the dog sat", "good", "bad film", "paris", "london is big", "not good", "small", "very bad", "it",
         "the mat", "john runs"]
SETTINGS = {  # arch: (layout, pairs)
    "bert": ("sep_last", False),
    "roberta": ("sep_last", True),
    "llama": ("standard", False),
}


def _setup(arch: str):
    layout, pairs = SETTINGS[arch]
    model, tok = tiny_model(arch), tiny_tokenizer(arch)
    special = special_slots(tok, N, pair=pairs, model_type=model.config.model_type, layout=layout)
    return model, tok, (PAIRS if pairs else None), layout, special


@pytest.mark.parametrize("arch", sorted(SETTINGS))
def test_whole_corpus_value_is_the_extractions_summary(arch):
    model, tok, pairs, layout, special = _setup(arch)
    corpus = Corpus("", TEXTS, pairs)
    table = pattern_share_intervals(model, tok, corpus, max_length=N, special=special, layout=layout,
                                    bootstrap=Bootstrap(blocks=5, resamples=200), progress=False)
    whole = extract_constants(model, tok, corpus, max_length=N, layout=layout, progress=False)
    expected = pattern_summary(head_patterns(whole, special)).drop("heads")
    pd.testing.assert_series_equal(table["value"], expected, check_names=False, atol=1e-6, rtol=0)
    assert list(table.index) == list(expected.index)
    shares = table[["value", "low", "high"]]
    assert ((shares >= 0) & (shares <= 1)).all().all() and (table["low"] <= table["high"]).all()
    if arch != "llama":
        assert (table["low"] <= table["value"]).all() and (table["value"] <= table["high"]).all()
    # (not the tiny decoder's: its attention is near uniform, spread ~1, and a draw averages fewer distinct
    # sentences, so its rows are less uniform: every draw's spread lies below the value, a percentile interval's
    # known bias for a concave statistic of an average)
    heads = model.config.num_hidden_layers * model.config.num_attention_heads
    assert table.attrs | {"seed": 0} == {"heads": heads, "blocks": 5, "sentences": len(TEXTS), "resamples": 200,
                                         "level": 0.95, "seed": 0, "corpus": ""}
    assert (table["blocks"] == 5).all() and (table["heads"] == heads).all()
    assert controller_of(model) is None  # detached again, as extraction leaves a model


def test_a_seed_fixes_the_interval_and_the_model_is_left_as_found():
    model, tok, pairs, layout, special = _setup("bert")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    run = lambda seed: pattern_share_intervals(  # noqa: E731
        model, tok, Corpus("", TEXTS), max_length=N, special=special, layout=layout,
        bootstrap=Bootstrap(blocks=6, resamples=100, seed=seed), progress=False)
    first = run(3)
    pd.testing.assert_frame_equal(first, run(3))
    other = run(4)
    pd.testing.assert_series_equal(first["value"], other["value"])  # the value never depends on the draws
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_one_block_per_sentence_when_there_are_fewer_sentences():
    model, tok, pairs, layout, special = _setup("bert")
    table = pattern_share_intervals(model, tok, Corpus("", TEXTS[:4]), max_length=N, special=special, layout=layout,
                                    bootstrap=Bootstrap(blocks=50, resamples=20), progress=False)
    assert table.attrs["blocks"] == 4 and table.attrs["sentences"] == 4


@pytest.mark.parametrize("size, blocks", [(12, 5), (100, 50), (101, 50), (3, 50), (7, 2)])
def test_block_spans_cover_the_corpus_in_order(size, blocks):
    spans = block_spans(size, blocks)
    assert len(spans) == min(size, blocks)
    assert spans[0][0] == 0 and spans[-1][1] == size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    lengths = [end - start for start, end in spans]
    assert min(lengths) >= 1 and max(lengths) - min(lengths) <= 1


@pytest.mark.parametrize("change, named", [
    (dict(blocks=1), "blocks"),
    (dict(blocks=2.5), "blocks"),
    (dict(resamples=0), "resamples"),
    (dict(level=1.0), "level"),
    (dict(level=0), "level"),
    (dict(texts=[]), "texts"),
    (dict(texts=["one sentence"]), "texts"),
    (dict(text_pairs=["a", "b"]), "text_pairs"),
    (dict(special=[0, N]), "max_length"),
])
def test_bad_arguments_are_refused_before_any_work(change, named):
    # no model at all: an argument checked after the first extraction would fail on it, not with an InputError
    kwargs = dict(texts=TEXTS, text_pairs=None, max_length=N, special=[0], blocks=4, resamples=10, level=0.9) | change
    corpus = Corpus("", kwargs.pop("texts"), kwargs.pop("text_pairs"))
    bootstrap = Bootstrap(**{k: kwargs.pop(k) for k in ("blocks", "resamples", "level")})
    with pytest.raises(InputError, match=named):
        pattern_share_intervals(None, None, corpus, bootstrap=bootstrap, **kwargs)

