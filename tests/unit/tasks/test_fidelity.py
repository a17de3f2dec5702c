"""papa.tasks.fidelity: one input in both layouts, the tokens each drops, truncation counts (real BERT tokenizer)."""
from __future__ import annotations

import pytest

from papa.tasks.fidelity import cut_tokens, layout_comparison, truncation_counts

LONG = "the cat sat on the mat and the dog ran away"


@pytest.fixture(scope="module")
def bert(hub_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(hub_dir / "bert-base-uncased")


def test_layout_comparison_shows_slots_and_positions(bert):
    table = layout_comparison(bert, "a dog", "it ran", max_length=12, model_type="bert")
    assert list(table["official token"]) == ["[CLS]", "a", "dog", "[PAD]", "[PAD]", "[PAD]", "[SEP]", "it", "ran",
                                             "[PAD]", "[PAD]", "[SEP]"]
    assert list(table["official position"]) == list(range(12))  # slots, as BERT numbers them unasked
    assert list(table["sep_last token"])[6:9] == ["[SEP]", "it", "ran"]
    assert list(table["sep_last position"])[6:9] == [3, 4, 5]  # ordinary positions


def test_cut_tokens(bert):
    cuts = cut_tokens(bert, LONG, max_length=12, model_type="bert").set_index("layout")
    assert cuts.loc["official", "kept"] == 5 and cuts.loc["official", "dropped"] == "mat and the dog ran away"
    assert cuts.loc["sep_last", "kept"] == 10 and cuts.loc["sep_last", "dropped"] == "away"
    words = cut_tokens(bert, "EU rejects German", max_length=12, model_type="bert", token_task=True)
    assert list(words["kept"]) == [3, 3] and list(words["dropped"]) == ["", ""]


@pytest.mark.integration
def test_truncation_counts_cola(bert, data_dir):
    counts = truncation_counts(bert, ["cola"], model_type="bert", data_dir=str(data_dir), splits=("eval",))
    row = counts.iloc[0]
    assert (row["examples"], row["max_length"]) == (1043, 64)
    assert row["official cut"] >= row["sep_last cut"]
    # a profile's look_limit counts the first examples: the same inputs cut as in the whole split's first ones
    sst2 = truncation_counts(bert, ["sst2"], model_type="bert", data_dir=str(data_dir), splits=("eval",))
    first = truncation_counts(bert, ["sst2"], model_type="bert", data_dir=str(data_dir), splits=("eval",), limit=100)
    assert first.iloc[0]["examples"] == 100 and sst2.iloc[0]["examples"] == 872
    from papa.method.layout import encode
    from papa.tasks.data import load_examples

    texts = [e.text for e in load_examples("sst2", "eval", data_dir, limit=100)]
    cut = sum(encode(bert, texts, max_length=64, layout="official", model_type="bert").truncated)
    assert first.iloc[0]["official cut"] == cut > 0  # the official layout cuts single sentences at n/2
    with pytest.raises(ValueError, match="unknown layout"):
        truncation_counts(bert, ["cola"], model_type="bert", layouts=("left",))
