"""Single-input views: the layout table and what replacing heads does to a representation (tiny BERT)."""
from __future__ import annotations

import pytest

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.extract import extract_constants
from papa.method.selection import replacement_order
from papa.sections.method import layout_table, replacement_effect


def test_layout_table_collapses_padding_and_keeps_sep_last():
    tok = tiny_tokenizer("bert")
    table = layout_table(tok, "the cat sat", max_length=20, model_type="bert", edge=4)
    assert list(table["token"])[:4] == ["[CLS]", "the", "cat", "sat"] and table["token"].iloc[-1] == "[SEP]"
    assert table.index[-1] == 19 and "… 13 pads …" in set(table["token"])  # 15 pads: first, 13 collapsed, last
    assert table.loc[19, "position_id"] == 4  # the final [SEP] keeps its ordinary position
    short = layout_table(tok, "the cat sat", max_length=20, model_type="bert", edge=20)
    assert len(short) == 20


def test_replacement_effect_counts_heads_and_moves_representations():
    model, tok = tiny_model("bert", layers=2, heads=4, init_std=0.3), tiny_tokenizer("bert")
    texts = ["the cat sat on the mat", "a dog ran in london"]
    constants = extract_constants(model, tok, texts * 2, max_length=12, progress=False)
    order = replacement_order("first_to_last", 2, 4)
    effect = replacement_effect(model, tok, texts, constants, order, ["1", "1/2", "0"])
    assert effect["input_dependent_heads"].tolist() == [8, 4, 0]
    assert effect.loc[0, "mean_cosine"] == pytest.approx(1.0)
    assert effect.loc[2, "min_cosine"] < 1.0
    with pytest.raises(InputError, match="at least one text"):
        replacement_effect(model, tok, [], constants, order, ["1"])


def test_a_decoders_representation_and_replacement_effect():
    """The explorer's slider on a causal LM (its head view reads the backbone, not the LM head's logits)."""
    import torch

    from conftest import tiny_model, tiny_tokenizer
    from papa.method.extract import extract_constants
    from papa.method.layout import encode
    from papa.paper.inspection import mean_pooled
    from papa.sections.method import replacement_effect

    model, tok = tiny_model("llama", lm_head=True), tiny_tokenizer("llama")
    texts = ["the cat sat", "a dog ran on the mat"]
    inputs = encode(tok, texts, max_length=12, layout="standard", model_type="llama").inputs
    assert mean_pooled(model, inputs).shape == (2, model.config.hidden_size)
    constants = extract_constants(model, tok, texts, max_length=12, layout="standard", progress=False)
    order = [(layer, head) for layer in range(2) for head in range(4)]
    effect = replacement_effect(model, tok, texts, constants, order, ["1", "0"])
    assert torch.isfinite(torch.tensor(effect.select_dtypes("number").to_numpy())).all()


def test_readable_tokens_decode_byte_level_pieces_and_keep_wordpieces():
    from papa.paper.inspection import readable_tokens

    bpe = tiny_tokenizer("llama")  # byte-level BPE, as SmolLM2's: a word's first piece carries "Ġ"
    ids = bpe.convert_tokens_to_ids(["Ġa", "b", "Ġc", "<|endoftext|>"])
    assert readable_tokens(bpe, ids) == ["a", "b", "c", "<|endoftext|>"]
    wordpiece = tiny_tokenizer("bert")
    ids = wordpiece("the cat")["input_ids"]
    assert readable_tokens(wordpiece, ids) == wordpiece.convert_ids_to_tokens(ids)  # [CLS] the cat [SEP]
