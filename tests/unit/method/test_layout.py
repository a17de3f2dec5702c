"""The PAPA input layout (Appendix A): [SEP] last, pair separator at n/2, trimming, position ids."""
from __future__ import annotations

import functools

import pytest
import torch

from papa.method import layout
from papa.method.layout import position_ids

# papa's own layout, named: the library's default is the model's (`official` for an encoder; test_layout_official.py)
encode = functools.partial(layout.encode, layout="sep_last")

from conftest import ARCHS, tiny_model, tiny_tokenizer


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("n", [16, 17])
def test_single_and_pair_layout(arch, n):
    tok = tiny_tokenizer(arch)
    sep, cls, pad = tok.sep_token_id, tok.cls_token_id, tok.pad_token_id
    single = encode(tok, ["the cat", "a dog sat"], max_length=n).inputs
    assert single["input_ids"].shape == (2, n)
    assert (single["input_ids"][:, 0] == cls).all() and (single["input_ids"][:, -1] == sep).all()
    assert (single["attention_mask"][:, -1] == 1).all() and (single["attention_mask"][:, -2] == 0).all()
    assert ((single["input_ids"] == pad) == (single["attention_mask"] == 0)).all()

    pair = encode(tok, ["the cat", "a dog sat"], ["it was", "good"], max_length=n).inputs
    ids, mask = pair["input_ids"], pair["attention_mask"]
    half = n // 2
    assert (ids[:, half] == sep).all() and (ids[:, -1] == sep).all() and (ids[:, 0] == cls).all()
    assert (mask[:, half + 1] == 1).all()  # the second sentence starts right after the middle separator
    n_sep = tok("a", "b")["input_ids"].count(sep)
    assert ((ids == sep).sum(1) == n_sep).all()  # RoBERTa's </s></s> gives 3 separators, BERT's 2
    if n_sep == 3:
        assert (ids[:, half - 1] == sep).all()
    assert (mask[:, half - 1 if n_sep == 3 else half] == 1).all()


def test_roberta_double_separator_and_token_types():
    tok = tiny_tokenizer("roberta")
    batch = encode(tok, ["ab"], ["cd"], max_length=12).inputs
    tokens = tok.convert_ids_to_tokens(batch["input_ids"][0])
    assert tokens[:3] == ["<s>", "a", "b"] and tokens[5:9] == ["</s>", "</s>", "c", "d"] and tokens[-1] == "</s>"
    assert "token_type_ids" not in batch
    bert = tiny_tokenizer("bert")
    types = encode(bert, ["the cat"], ["a dog"], max_length=10).inputs["token_type_ids"][0].tolist()
    assert types == [0, 0, 0, 0, 0, 0, 1, 1, 0, 1]  # pads carry type 0; they are masked anyway
    assert encode(bert, ["the cat"], max_length=6).inputs["token_type_ids"][0].tolist() == [0] * 6


def test_trimming_each_half():
    tok = tiny_tokenizer("bert")
    long = "the cat sat on the mat and the dog ran to the big mat"
    b = encode(tok, [long, "a dog"], max_length=8)
    assert b.truncated == [True, False]
    assert tok.convert_ids_to_tokens(b.inputs["input_ids"][0]) == ["[CLS]", "the", "cat", "sat", "on", "the", "mat",
                                                                   "[SEP]"]
    p = encode(tok, [long], [long], max_length=10)
    tokens = tok.convert_ids_to_tokens(p.inputs["input_ids"][0])
    # first half: [CLS] + 4 words + [SEP] in slots 0..5; second half: 3 words + [SEP] in slots 6..9
    assert tokens == ["[CLS]", "the", "cat", "sat", "on", "[SEP]", "the", "cat", "sat", "[SEP]"]
    assert p.truncated == [True]
    assert encode(tok, ["a"], ["the cat sat on"], max_length=10).truncated == [True]


def test_words_and_word_ids():
    tok = tiny_tokenizer("deberta-v2")
    b = encode(tok, [["ab", "c"]], max_length=8)
    assert b.word_ids[0] == [None, 0, 0, 1, None, None, None, None]
    assert b.inputs["attention_mask"][0].tolist() == [1, 1, 1, 1, 0, 0, 0, 1]


def test_standard_layout():
    tok = tiny_tokenizer("bert")
    b = encode(tok, ["the cat"], max_length=6, layout="standard").inputs
    assert tok.convert_ids_to_tokens(b["input_ids"][0]) == ["[CLS]", "the", "cat", "[SEP]", "[PAD]", "[PAD]"]


def test_bad_input():
    tok = tiny_tokenizer("bert")
    with pytest.raises(ValueError, match="empty"):
        encode(tok, [], max_length=8)
    with pytest.raises(ValueError, match="pair up"):
        encode(tok, ["a"], ["b", "c"], max_length=8)
    with pytest.raises(ValueError, match="no room"):
        encode(tok, ["a"], ["b"], max_length=3)
    with pytest.raises(ValueError, match="unknown layout"):
        encode(tok, ["a"], max_length=8, layout="left")


def test_position_ids():
    mask = torch.tensor([[1, 1, 0, 0, 1], [1, 1, 1, 1, 1]])
    assert position_ids(mask).tolist() == [[0, 1, 1, 1, 2], [0, 1, 2, 3, 4]]
    tok = tiny_tokenizer("bert")
    assert "position_ids" in encode(tok, ["a"], max_length=6, model_type="bert").inputs
    assert "position_ids" not in encode(tiny_tokenizer("roberta"), ["a"], max_length=6, model_type="roberta").inputs


@pytest.mark.parametrize("arch", ["bert", "electra", "roberta"])
def test_sep_last_is_invisible_to_absolute_position_models(arch):
    """With the chosen position ids, the unmodified model computes the same token states in both layouts."""
    tok, model = tiny_tokenizer(arch), tiny_model(arch)
    texts, pairs = ["the cat sat", "a dog"], ["it was good", "mary ran"]
    for second in (None, pairs):
        a = encode(tok, texts, second, max_length=20, model_type=arch)
        b = encode(tok, texts, second, max_length=20, layout="standard", model_type=arch)
        with torch.no_grad():
            ha = model(**a.inputs).last_hidden_state[a.inputs["attention_mask"].bool()]
            hb = model(**b.inputs).last_hidden_state[b.inputs["attention_mask"].bool()]
        assert torch.allclose(ha, hb, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["sep_last", "standard"])
def test_a_batch_encodes_each_input_as_it_would_alone(arch, name):
    # papa's layouts tokenize a whole batch in one call: no input may depend on the others in its batch
    tok = tiny_tokenizer(arch)
    texts, pairs = ["the cat sat on the mat", "a dog", "it was good and then it was not"], ["yes", "no no", "maybe"]
    words = [["the", "cat"], ["a", "dog", "sat", "on", "the", "mat", "again"], ["good"]]
    for args, kwargs in [((texts,), {}), ((texts, pairs), {}), ((words,), {})]:
        batch = layout.encode(tok, *args, max_length=8, layout=name)
        for i in range(len(texts)):
            alone = layout.encode(tok, *([a[i]] for a in args), max_length=8, layout=name, **kwargs)
            for key, value in alone.inputs.items():
                assert torch.equal(batch.inputs[key][i], value[0]), (key, i)
            assert batch.truncated[i] == alone.truncated[0]
            if batch.word_ids is not None:
                assert batch.word_ids[i] == alone.word_ids[0]
