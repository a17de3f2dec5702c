"""The paper's seven encoders at their real size, with their real tokenizers (../shared/hub, $PAPA_HUB_DIR): the PAPA
input layouts, the length limit, and the method's invariants (nothing replaced, self-constants, fast paths, Q/K
dropping) on each architecture's real configuration, with seeded random weights (the folders hold no weights).

Every model is built once per module (a module-scoped fixture: pytest runs one model's tests together, then frees
it). Long inputs are used where the property is about length (the layout at n = 512, self-constants at the model's
limit); the fast-path comparisons, which hold at any length, run at a short n.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

import papa
from papa.core.errors import InputError
from papa.method.attention_free import query_key_dropped, query_key_dropped_while
from papa.method.extract import max_positions
from papa.method.layout import encode, position_ids
from papa.tasks.corpus import Corpus

pytestmark = [pytest.mark.integration, pytest.mark.acceptance, pytest.mark.slow]

# folder in the hub directory -> transformers model type
FOLDERS = {
    "bert-base-uncased": "bert",
    "bert-large-uncased": "bert",
    "roberta-base": "roberta",
    "roberta-large": "roberta",
    "microsoft--deberta-base": "deberta",
    "microsoft--deberta-large": "deberta",
    "google--electra-base-discriminator": "electra",
}
# (first token, separator, pad) as the tokenizers name them; DeBERTa's are those of its (stand-in) tokenizer.
SPECIALS = {"bert": ("[CLS]", "[SEP]", "[PAD]"), "electra": ("[CLS]", "[SEP]", "[PAD]"),
            "roberta": ("<s>", "</s>", "<pad>"), "deberta": ("[CLS]", "[SEP]", "[PAD]")}
# Tokenizers that put two separators between the sentences of a pair: RoBERTa's </s></s>, and transformers 5.23's
# DebertaTokenizer, which builds DeBERTa v1 pairs as [CLS] a [SEP][SEP] b [SEP] (hub MANIFEST).
DOUBLE_SEPARATOR = {"roberta", "deberta"}
LONG_N = 512     # every model's limit: BERT/ELECTRA 512 positions, RoBERTa 514 of which 512 usable, DeBERTa 512
LARGE_N = 128    # the 24-layer models' self-constants (capture at 512 costs minutes on 2 CPU cores; the limit
                 # itself is still run, by a plain forward at 512, in test_length_limit)
SHORT_N = 48     # for properties that hold at any length
SEED = 0

SHORT = "How much does attention actually attend?"
SHORT_PAIR = ("The cat sat on the mat.", "A cat was sitting on a mat in the sun.")
_PARAGRAPH = ("Attention heads in pretrained encoders are often said to capture syntax and coreference, yet many of "
              "them attend to the same positions whatever the input is, such as the separator, the next token or the "
              "previous one. ")
LONG = _PARAGRAPH * 12   # about 400 tokens in every vocabulary here: longer than n/2 at n = 512
LONG_PAIR = (LONG, _PARAGRAPH * 11)


def _length(folder: str) -> int:
    """The length at which the invariants are checked: the limit for the base models, `LARGE_N` for the large."""
    return LARGE_N if "large" in folder else LONG_N


@dataclass
class Paper:
    """One of the paper's models, built once for the module, and what its tests share."""

    folder: str
    model_type: str
    model: torch.nn.Module
    tokenizer: object
    build_s: float
    cache: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def tokenizers(hub_dir: Path) -> dict[str, object]:
    from transformers import AutoTokenizer

    return {folder: AutoTokenizer.from_pretrained(hub_dir / folder) for folder in FOLDERS}


@pytest.fixture(scope="module", params=list(FOLDERS))
def paper(request, hub_dir: Path, tokenizers) -> Paper:
    """The model of one hub folder, seeded random weights, eval mode; freed when its tests are done."""
    from transformers import AutoConfig, AutoModel

    folder = request.param
    start = time.perf_counter()
    config = AutoConfig.from_pretrained(hub_dir / folder)
    torch.manual_seed(SEED)
    model = AutoModel.from_config(config).eval()
    out = Paper(folder, FOLDERS[folder], model, tokenizers[folder], time.perf_counter() - start)
    assert config.model_type == out.model_type
    yield out
    papa.detach(model)


def _hidden(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def _real(x: torch.Tensor, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Hidden states at real (attended) slots: a replaced head gives pad queries no attention at all."""
    return x[inputs["attention_mask"].bool()]


def _tokens(tok, batch, i: int = 0) -> list[str]:
    return tok.convert_ids_to_tokens(batch.inputs["input_ids"][i].tolist())


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


# ---- the layouts at n = 512 (tokenizers only) ---------------------------------------------------------------------

@pytest.mark.parametrize("folder", list(FOLDERS))
def test_sep_last_layout_at_full_length(tokenizers, folder):
    """papa's layout: the final separator in slot n-1; a pair's middle separator ends in slot n/2 (RoBERTa's and
    DeBERTa's double one in n/2-1 and n/2); the second sentence starts at n/2+1 with token type 1 (BERT, ELECTRA);
    position ids continue across the padding, except for RoBERTa, which counts real tokens itself."""
    tok, model_type, n = tokenizers[folder], FOLDERS[folder], LONG_N
    cls, sep, pad = SPECIALS[model_type]
    half = n // 2

    single = encode(tok, [SHORT], max_length=n, layout="sep_last", model_type=model_type)
    words = tok(SHORT, add_special_tokens=False)["input_ids"]
    ids, mask = single.inputs["input_ids"][0].tolist(), single.inputs["attention_mask"][0].tolist()
    assert _tokens(tok, single) == [cls, *tok.convert_ids_to_tokens(words)] + [pad] * (n - 2 - len(words)) + [sep]
    assert mask == [1] * (1 + len(words)) + [0] * (n - 2 - len(words)) + [1]
    assert ids[n - 1] == tok.sep_token_id and single.truncated == [False]
    if model_type == "roberta":
        assert "position_ids" not in single.inputs and "token_type_ids" not in single.inputs
    else:
        assert torch.equal(single.inputs["position_ids"], position_ids(single.inputs["attention_mask"]))
        assert single.inputs["position_ids"][0, n - 1] == len(words) + 1  # right after the last word
        assert single.inputs["token_type_ids"].eq(0).all()

    pair = encode(tok, [SHORT_PAIR[0]], [SHORT_PAIR[1]], max_length=n, layout="sep_last", model_type=model_type)
    a = tok(SHORT_PAIR[0], add_special_tokens=False)["input_ids"]
    b = tok(SHORT_PAIR[1], add_special_tokens=False)["input_ids"]
    tokens, ids = _tokens(tok, pair), pair.inputs["input_ids"][0].tolist()
    middle = [sep, sep] if model_type in DOUBLE_SEPARATOR else [sep]
    assert tokens[:1 + len(a)] == [cls, *tok.convert_ids_to_tokens(a)]
    assert tokens[half + 1 - len(middle):half + 1] == middle and tokens[half + 1 - len(middle) - 1] == pad
    assert ids[half + 1:half + 1 + len(b)] == b and tokens[half + 1 + len(b)] == pad
    assert tokens[n - 1] == sep and tokens.count(sep) == len(middle) + 1
    if model_type in ("bert", "electra"):
        types = pair.inputs["token_type_ids"][0].tolist()
        assert types[:half + 1] == [0] * (half + 1)                    # first sentence and its separator
        assert types[half + 1:half + 1 + len(b)] == [1] * len(b) and types[n - 1] == 1
    elif model_type == "deberta":  # DeBERTa v1 has no token-type embeddings (type_vocab_size 0): all 0
        assert pair.inputs["token_type_ids"].eq(0).all()

    # Long sentences are trimmed at their ends to fill each half exactly: no padding is left.
    full = encode(tok, [LONG_PAIR[0]], [LONG_PAIR[1]], max_length=n, layout="sep_last", model_type=model_type)
    assert full.inputs["attention_mask"].eq(1).all() and full.truncated == [True]
    tokens = _tokens(tok, full)
    assert tokens[half + 1 - len(middle):half + 1] == middle and tokens[n - 1] == sep
    assert tokens.count(sep) == len(middle) + 1


@pytest.mark.parametrize("folder", list(FOLDERS))
def test_official_layout_at_full_length(tokenizers, folder):
    """The released scripts' layout: slots 0..n/2-1 take the ordinary encoding's first segment, the first separator
    goes to slot n/2 (RoBERTa's and DeBERTa's second one to n/2+1) followed by the second sentence, the last
    separator to slot n-1; no position ids; token types stay where the tokenizer put them."""
    tok, model_type, n = tokenizers[folder], FOLDERS[folder], LONG_N
    cls, sep, pad = SPECIALS[model_type]
    half = n // 2

    single = encode(tok, [SHORT, LONG], max_length=n, layout="official", model_type=model_type)
    words = tok(SHORT, add_special_tokens=False)["input_ids"]
    assert _tokens(tok, single, 0) == [cls, *tok.convert_ids_to_tokens(words)] + [pad] * (n - 2 - len(words)) + [sep]
    assert "position_ids" not in single.inputs
    # A single sentence keeps at most n/2 - 1 of its own tokens, however much room the input has otherwise.
    long_mask = single.inputs["attention_mask"][1].tolist()
    assert long_mask == [1] * half + [0] * (n - half - 1) + [1] and single.truncated == [False, True]
    assert _tokens(tok, single, 1)[n - 1] == sep

    pair = encode(tok, [SHORT_PAIR[0]], [SHORT_PAIR[1]], max_length=n, layout="official", model_type=model_type)
    a = tok(SHORT_PAIR[0], add_special_tokens=False)["input_ids"]
    b = tok(SHORT_PAIR[1], add_special_tokens=False)["input_ids"]
    tokens, ids = _tokens(tok, pair), pair.inputs["input_ids"][0].tolist()
    middle = [sep, sep] if model_type in DOUBLE_SEPARATOR else [sep]
    assert tokens[:1 + len(a)] == [cls, *tok.convert_ids_to_tokens(a)] and tokens[1 + len(a)] == pad
    assert tokens[half - 1] == pad and tokens[half:half + len(middle)] == middle
    start = half + len(middle)  # the second sentence right after the separator(s)
    assert ids[start:start + len(b)] == b and tokens[start + len(b)] == pad
    assert tokens[n - 1] == sep and tokens.count(sep) == len(middle) + 1
    mask = pair.inputs["attention_mask"][0].tolist()
    assert mask == [int(t != pad) for t in tokens] and pair.truncated == [False]
    ordinary = tok(SHORT_PAIR[0], SHORT_PAIR[1], padding="max_length", truncation=True, max_length=n)
    if model_type == "roberta":
        assert "token_type_ids" not in pair.inputs
    else:  # as the released scripts leave them: not moved with the tokens
        assert pair.inputs["token_type_ids"][0].tolist() == ordinary["token_type_ids"]
    if model_type in ("bert", "electra"):
        # ...so the type-1 ids stay in the slots the ordinary layout gave the second sentence (now padding there),
        # and the second sentence, moved to slot n/2 on, is seen as type 0.
        assert pair.inputs["token_type_ids"][0, start:start + len(b)].eq(0).all()
        assert sum(ordinary["token_type_ids"]) == len(b) + 1

    long_pair = encode(tok, [LONG_PAIR[0]], [LONG_PAIR[1]], max_length=n, layout="official", model_type=model_type)
    tokens = _tokens(tok, long_pair)
    assert tokens[half:half + len(middle)] == middle and tokens[n - 1] == sep and long_pair.truncated == [True]
    assert tokens.count(sep) == len(middle) + 1


# ---- the models ---------------------------------------------------------------------------------------------------

def _pair_inputs(paper: Paper, n: int) -> dict[str, torch.Tensor]:
    """A short sentence pair at length `n` in the official layout (padded in both halves)."""
    return encode(paper.tokenizer, [SHORT_PAIR[0]], [SHORT_PAIR[1]], max_length=n, layout="official",
                  model_type=paper.model_type).inputs


def _original(paper: Paper, key: str, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Hugging Face's own output for `inputs` (no controller attached), computed once per model."""
    if key not in paper.cache:
        assert papa.controller_of(paper.model) is None
        paper.cache[key] = _hidden(paper.model, inputs)
    return paper.cache[key]


def test_length_limit(paper):
    """n = 512 runs (RoBERTa: 514 positions, 512 usable); longer inputs are refused before any work, by name."""
    config = paper.model.config
    limit = max_positions(config)
    if paper.model_type == "deberta":
        # Relative positions only (position_biased_input false): no absolute limit to enforce; its tokenizer stops
        # at 512 as the model was pretrained.
        assert limit is None and paper.tokenizer.model_max_length == LONG_N
        return
    assert limit == LONG_N
    assert config.max_position_embeddings == (514 if paper.model_type == "roberta" else 512)
    inputs = _pair_inputs(paper, LONG_N)
    assert inputs["input_ids"].shape == (1, LONG_N)
    out = _original(paper, f"pair-{LONG_N}", inputs)
    assert out.shape == (1, LONG_N, config.hidden_size) and torch.isfinite(out).all()
    with pytest.raises(InputError, match=rf"max_length={LONG_N + 1} is longer than the {LONG_N} positions"):
        papa.extract_constants(paper.model, paper.tokenizer, [SHORT], max_length=LONG_N + 1, layout="official",
                               progress=False)
    assert papa.controller_of(paper.model) is None  # refused before attaching


def test_nothing_replaced_is_hugging_faces_output(paper):
    """Attached, every head kept: the forward pass is Hugging Face's own (at n = 512 for the base models)."""
    n = _length(paper.folder)
    inputs = _pair_inputs(paper, n)
    original = _original(paper, f"pair-{n}", inputs)
    papa.attach(paper.model)
    try:
        attached = _hidden(paper.model, inputs)
    finally:
        papa.detach(paper.model)
    assert _max_diff(attached, original) <= 1e-6
    assert torch.equal(_hidden(paper.model, inputs), original)  # detached: exactly the original again


@pytest.mark.parametrize("padding", ["padded", "unpadded"])
def test_self_constants_reproduce_the_input(paper, padding):
    """Constants averaged over one input (at n = 512 for the base models), every head replaced: the outputs at real
    tokens are the original ones. Padded: a short pair in the official layout; unpadded: a long pair filling every slot of papa's
    layout."""
    if padding == "padded":
        layout, texts, pairs = "official", [SHORT_PAIR[0]], [SHORT_PAIR[1]]
    else:
        layout, texts, pairs = "sep_last", [LONG_PAIR[0]], [LONG_PAIR[1]]
    n = _length(paper.folder)
    inputs = encode(paper.tokenizer, texts, pairs, max_length=n, layout=layout, model_type=paper.model_type).inputs
    assert bool(inputs["attention_mask"].all()) == (padding == "unpadded")
    original = _original(paper, f"pair-{n}" if padding == "padded" else f"full-{n}", inputs)
    constants = papa.extract_constants(paper.model, paper.tokenizer, Corpus("", texts, pairs), max_length=n,
                                       layout=layout, model_name=paper.folder, progress=False)
    assert constants.matrices.shape[:2] == (paper.model.config.num_hidden_layers,
                                            paper.model.config.num_attention_heads)
    ctrl = papa.attach(paper.model, model_name=paper.folder)
    try:
        ctrl.set_constants(constants)
        ctrl.replace()
        replaced = _hidden(paper.model, inputs)
    finally:
        papa.detach(paper.model)
    assert _max_diff(_real(replaced, inputs), _real(original, inputs)) <= 1e-5


def _half_the_heads(num_layers: int, num_heads: int) -> torch.Tensor:
    """[L, H] mask of replaced heads, half of them: the first quarter of the layers entirely (so DeBERTa's
    attention-free layers are exercised), every other head of the middle half, none in the last quarter."""
    mask = torch.zeros(num_layers, num_heads, dtype=torch.bool)
    quarter = num_layers // 4
    mask[:quarter] = True
    mask[quarter:num_layers - quarter, ::2] = True
    assert int(mask.sum()) * 2 == num_layers * num_heads
    return mask


def test_fast_paths_and_dropped_query_key(paper):
    """Half the heads replaced: the fast paths give the plain path's outputs, and so does dropping the replaced
    heads' query/key projections (attention-free where every head of a layer is replaced)."""
    tok, model = paper.tokenizer, paper.model
    corpus = [SHORT_PAIR[1], "The plot is thin and the jokes fall flat.", LONG]
    constants = papa.extract_constants(model, tok, corpus, max_length=SHORT_N, layout="official",
                                       model_name=paper.folder, progress=False)
    inputs = encode(tok, [SHORT, LONG, SHORT_PAIR[0]], max_length=SHORT_N, layout="official",
                    model_type=paper.model_type).inputs
    assert not inputs["attention_mask"].all()  # padding in the middle of the batch
    original = _hidden(model, inputs)
    ctrl = papa.attach(model, model_name=paper.folder)
    try:
        ctrl.set_constants(constants)
        ctrl.replace(_half_the_heads(ctrl.num_layers, ctrl.num_heads))
        ctrl.fast_paths = False
        plain = _hidden(model, inputs)
        ctrl.fast_paths = True
        fast = _hidden(model, inputs)
        with query_key_dropped_while(ctrl):
            assert query_key_dropped(ctrl)
            dropped = _hidden(model, inputs)
    finally:
        papa.detach(model)
    real = lambda x: _real(x, inputs)  # noqa: E731
    assert _max_diff(real(plain), real(original)) > 1e-3  # the replaced heads do change the outputs
    assert _max_diff(real(fast), real(plain)) <= 1e-5
    assert _max_diff(real(dropped), real(fast)) <= 1e-5
