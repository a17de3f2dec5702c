"""The `official` layout (the authors' released run_papa_glue.py / run_papa_ner.py preprocessing) against expectations
written out by hand, with the real tokenizers of the paper's models (../shared/hub, $PAPA_HUB_DIR), at n = 12.

How each expectation follows from the released rule: the tokenizer's ordinary encoding (truncation=True, padded to
n) is rearranged; slots 0..5 (n/2 = 6) take the first segment's leading tokens, the first separator and what
follows it up to the last separator go from slot 6 on and stop before slot 11, slot 11 gets the last separator;
token tasks only turn their own separator into padding and put one in slot 11. No position ids are passed.
"""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_model, tiny_tokenizer
from papa.method.layout import encode, model_positions, prefix_space_tokenizer
from papa.tasks.corpus import Corpus

N = 12
LONG = "the cat sat on the mat and the dog ran away"  # 11 tokens in every vocabulary here: longer than n/2
SHORT = "a dog ran"
PAIR_FIRST_LONG = ("the cat sat on the mat and the dog", "a dog")   # the first half overflows
PAIR_SECOND_LONG = ("a dog", "the cat sat on the mat and the dog")  # the second half overflows
WORDS = ["EU", "rejects", "German", "call"]
LONG_WORDS = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]

P = "[PAD]"
BERT = {  # bert-base-uncased and electra-base-discriminator share this vocabulary
    "long": ["[CLS]", "the", "cat", "sat", "on", "the", P, P, P, P, P, "[SEP]"],
    "short": ["[CLS]", "a", "dog", "ran", P, P, P, P, P, P, P, "[SEP]"],
    # the tokenizer trims the first sentence to 7 tokens (its budget is 9), the layout then to 5
    "pair_first_long": ["[CLS]", "the", "cat", "sat", "on", "the", "[SEP]", "a", "dog", P, P, "[SEP]"],
    # the tokenizer trims the second sentence to 7 tokens, the layout (slots 7..10) to 4
    "pair_second_long": ["[CLS]", "a", "dog", P, P, P, "[SEP]", "the", "cat", "sat", "on", "[SEP]"],
    "words": ["[CLS]", "eu", "rejects", "german", "call", P, P, P, P, P, P, "[SEP]"],
}
R = "<pad>"
ROBERTA = {  # the double separator: slots 6 and 7
    "long": ["<s>", "the", "Ġcat", "Ġsat", "Ġon", "Ġthe", R, R, R, R, R, "</s>"],
    "short": ["<s>", "a", "Ġdog", "Ġran", R, R, R, R, R, R, R, "</s>"],
    # tokenizer: first sentence to 6 tokens (budget 8); layout: 5
    "pair_first_long": ["<s>", "the", "Ġcat", "Ġsat", "Ġon", "Ġthe", "</s>", "</s>", "a", "Ġdog", R, "</s>"],
    # tokenizer: second sentence to 6 tokens; layout (slots 8..10): 3
    "pair_second_long": ["<s>", "a", "Ġdog", R, R, R, "</s>", "</s>", "the", "Ġcat", "Ġsat", "</s>"],
    # add_prefix_space=True: every word starts with Ġ
    "words": ["<s>", "ĠEU", "Ġrejects", "ĠGerman", "Ġcall", R, R, R, R, R, R, "</s>"],
}
D = "[PAD]"
DEBERTA = {  # the stand-in tokenizer: RoBERTa's BPE with DeBERTa's special tokens; transformers 5 doubles [SEP]
    key: [{"<s>": "[CLS]", "</s>": "[SEP]", R: D}.get(t, t) for t in tokens] for key, tokens in ROBERTA.items()
}
MASKS = {
    "long": [1] * 6 + [0] * 5 + [1],
    "short": [1] * 4 + [0] * 7 + [1],
    "words": [1] * 5 + [0] * 6 + [1],
}
CASES = [("bert-base-uncased", "bert", BERT), ("google--electra-base-discriminator", "electra", BERT),
         ("roberta-base", "roberta", ROBERTA), ("microsoft--deberta-base", "deberta", DEBERTA)]


def _tokens(tok, batch, i=0):
    return tok.convert_ids_to_tokens(batch.inputs["input_ids"][i].tolist())


@pytest.mark.parametrize("folder,model_type,expected", CASES, ids=[c[1] for c in CASES])
def test_official_layout_by_hand(hub_dir, folder, model_type, expected):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hub_dir / folder)
    single = encode(tok, [LONG, SHORT], max_length=N, layout="official", model_type=model_type)
    assert _tokens(tok, single, 0) == expected["long"] and _tokens(tok, single, 1) == expected["short"]
    assert single.inputs["attention_mask"].tolist() == [MASKS["long"], MASKS["short"]]
    assert single.truncated == [True, False]
    assert "position_ids" not in single.inputs  # the released code passes none

    pairs = encode(tok, [PAIR_FIRST_LONG[0], PAIR_SECOND_LONG[0]], [PAIR_FIRST_LONG[1], PAIR_SECOND_LONG[1]],
                   max_length=N, layout="official", model_type=model_type)
    assert _tokens(tok, pairs, 0) == expected["pair_first_long"]
    assert _tokens(tok, pairs, 1) == expected["pair_second_long"]
    assert pairs.truncated == [True, True]
    pad = tok.pad_token
    for i in range(2):  # every slot but the pads is attended
        assert pairs.inputs["attention_mask"][i].tolist() == [int(t != pad) for t in _tokens(tok, pairs, i)]

    words = encode(tok, [WORDS], max_length=N, layout="official", model_type=model_type)
    assert _tokens(tok, words) == expected["words"]
    assert words.inputs["attention_mask"][0].tolist() == MASKS["words"]
    assert words.word_ids[0] == [None, 0, 1, 2, 3] + [None] * 7
    assert words.truncated == [False] and "position_ids" not in words.inputs


@pytest.mark.parametrize("folder,model_type", [("bert-base-uncased", "bert"), ("roberta-base", "roberta")])
def test_official_token_task_has_no_half_cut(hub_dir, folder, model_type):
    """A word list longer than n keeps n-2 tokens (no n/2 cut); its separator stays in the last slot."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hub_dir / folder)
    batch = encode(tok, [LONG_WORDS], max_length=8, layout="official", model_type=model_type)
    expected = {"bert": ["[CLS]", "eu", "rejects", "german", "call", "to", "boycott", "[SEP]"],
                "roberta": ["<s>", "ĠEU", "Ġrejects", "ĠGerman", "Ġcall", "Ġto", "Ġboycott", "</s>"]}
    assert _tokens(tok, batch) == expected[model_type]
    assert batch.inputs["attention_mask"][0].tolist() == [1] * 8
    assert batch.word_ids[0] == [None, 0, 1, 2, 3, 4, 5, None] and batch.truncated == [True]
    # MLM texts (token_task=True) follow the same rule: no n/2 cut either
    text = encode(tok, [LONG], max_length=N, layout="official", model_type=model_type, token_task=True)
    assert text.inputs["attention_mask"][0].tolist() == [1] * 11 + [1]


def test_official_token_types_stay_where_the_tokenizer_put_them(hub_dir):
    """The released scripts move input ids and the mask only: BERT's type-1 ids stay in their ordinary slots."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hub_dir / "bert-base-uncased")
    pairs = encode(tok, [PAIR_FIRST_LONG[0], PAIR_SECOND_LONG[0]], [PAIR_FIRST_LONG[1], PAIR_SECOND_LONG[1]],
                   max_length=N, layout="official", model_type="bert")
    # ordinary: [CLS] + 7 + [SEP] | a dog [SEP]  and  [CLS] a dog [SEP] | 7 + [SEP]
    assert pairs.inputs["token_type_ids"].tolist() == [[0] * 9 + [1] * 3, [0] * 4 + [1] * 8]
    # papa's own layout gives the second sentence type 1 where it now sits
    own = encode(tok, [PAIR_SECOND_LONG[0]], [PAIR_SECOND_LONG[1]], max_length=N, layout="sep_last",
                 model_type="bert")
    assert own.inputs["token_type_ids"][0].tolist()[7:11] == [1, 1, 1, 1]


def test_prefix_space_twin_matches_a_tokenizer_loaded_with_it(hub_dir):
    from transformers import AutoTokenizer

    for folder in ("roberta-base", "microsoft--deberta-base"):
        plain = AutoTokenizer.from_pretrained(hub_dir / folder)
        loaded = AutoTokenizer.from_pretrained(hub_dir / folder, add_prefix_space=True)
        twin = prefix_space_tokenizer(plain)
        for words in (WORDS, LONG_WORDS, ["Peter", "Blackburn"]):
            assert twin(words, is_split_into_words=True)["input_ids"] == \
                loaded(words, is_split_into_words=True)["input_ids"]
        assert plain(WORDS, is_split_into_words=True)["input_ids"] != twin(WORDS, is_split_into_words=True)[
            "input_ids"]  # the original is left as it was
        assert prefix_space_tokenizer(plain) is twin


def test_positions_the_model_gives(hub_dir):
    """BERT numbers slots (the final [SEP] at n-1); RoBERTa counts real tokens; papa's layout passes its own."""
    from transformers import AutoTokenizer

    bert = AutoTokenizer.from_pretrained(hub_dir / "bert-base-uncased")
    official = encode(bert, [SHORT], max_length=N, layout="official", model_type="bert")
    assert model_positions(official.inputs, "bert", bert.pad_token_id)[0].tolist() == list(range(N))
    own = encode(bert, [SHORT], max_length=N, layout="sep_last", model_type="bert")
    assert model_positions(own.inputs, "bert", bert.pad_token_id)[0].tolist() == [0, 1, 2, 3] + [3] * 7 + [4]
    roberta = AutoTokenizer.from_pretrained(hub_dir / "roberta-base")
    batch = encode(roberta, [SHORT], max_length=N, layout="official", model_type="roberta")
    assert model_positions(batch.inputs, "roberta", roberta.pad_token_id)[0].tolist() == [0, 1, 2, 3] + [-1] * 7 + [4]


def test_official_needs_the_model_type_for_words():
    tok = tiny_tokenizer("roberta")
    with pytest.raises(ValueError, match="model_type"):
        encode(tok, [["ab", "c"]], max_length=8, layout="official")
    with pytest.raises(ValueError, match="no room"):
        encode(tok, ["ab"], max_length=3, layout="official")


@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_official_constants_equal_the_released_average(arch):
    """papa's capture in the official layout equals the released avgs creator's average: eager attentions, no
    position ids, entries weighted by the outer product of the attention mask, 0 where never observed."""
    import papa

    tok, model = tiny_tokenizer(arch), tiny_model(arch, attn_implementation="eager")
    texts = ["the cat sat on the mat", "a dog", "it was not a good movie and the plot was bad", "mary ran"]
    pairs = ["john ran", "the film is big", "paris", "it was good"]
    for second in (None, pairs):
        constants = papa.extract_constants(model, tok, Corpus("", texts, second), max_length=N, layout="official",
                                           batch_size=3, progress=False)
        sums, counts = torch.zeros(constants.matrices.shape, dtype=torch.float64), torch.zeros(N, N,
                                                                                            dtype=torch.float64)
        for start in range(0, len(texts), 3):
            batch = encode(tok, texts[start:start + 3], None if second is None else second[start:start + 3],
                           max_length=N, layout="official", model_type=arch)
            with torch.no_grad():
                att = torch.stack(model(**batch.inputs, output_attentions=True).attentions, 1).double()
            mask = batch.inputs["attention_mask"].double()
            pattern = mask[:, :, None] * mask[:, None, :]
            counts += pattern.sum(0)
            sums += (att * pattern[:, None, None]).sum(0)
        expected = torch.nan_to_num(sums / counts)
        assert torch.allclose(constants.matrices.double(), expected, atol=1e-6)
        assert constants.metadata.layout == "official"


# ---- the layout is recorded, and artifacts of one layout are refused in another ------------------------------------

def test_reproductions_default_to_the_official_layout():
    from papa.reproduce.jobs import grid_jobs
    from papa.runs.experiment import GridConfig
    from papa.runs.profiles import PROFILES, Profile

    assert {p.layout for p in PROFILES.values()} == {"official"}
    with pytest.raises(ValueError, match="unknown layout"):
        Profile("bad", None, None, None, None, None, None, layout="left")
    assert GridConfig(task="sst2").resolved().layout == "official"
    assert GridConfig(task="sst2", layout="sep_last").resolved().layout == "sep_last"
    with pytest.raises(ValueError, match="unknown layout"):
        GridConfig(task="sst2", layout="left").resolved()
    official = grid_jobs(GridConfig(task="sst2", fractions=("1",), seeds=(0,)))
    own = grid_jobs(GridConfig(task="sst2", fractions=("1",), seeds=(0,), layout="sep_last"))
    assert official[0].layout == "official" and own[0].layout == "sep_last"
    assert official[0].key != own[0].key and official[0].point != own[0].point


def test_artifacts_of_one_layout_are_refused_in_the_other():
    import papa
    from papa.method.rankings import HeadRanking

    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    official = papa.extract_constants(model, tok, ["the cat sat", "a dog"], max_length=N, layout="official",
                                      progress=False)
    sig = papa.model_signature(model)
    official.check_compatible(sig, max_length=N, layout="official")
    with pytest.raises(papa.IncompatibleArtifactError, match="input layout 'official', not 'sep_last'"):
        official.check_compatible(sig, max_length=N, layout="sep_last")
    ranking = HeadRanking.from_lambdas(torch.full((2, 4), 0.5), signature=sig, max_length=N, layout="sep_last")
    with pytest.raises(papa.IncompatibleArtifactError, match="input layout 'sep_last', not 'official'"):
        ranking.check_compatible(2, 4, sig.model_name, signature=sig, layout="official")
    # the official layout also keeps the final separator in the last slot: constants only fit their own length
    ctrl = papa.attach(model, official)
    try:
        ctrl.replace()
        with pytest.raises(papa.InputError, match="official layout"):
            model(**encode(tok, ["the cat"], max_length=N - 2, layout="official", model_type="bert").inputs)
    finally:
        papa.detach(model)
