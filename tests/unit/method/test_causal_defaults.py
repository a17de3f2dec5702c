"""One answer to "is this model causal?" (`papa.method.architectures.is_causal`), and `layout=None` meaning the
model's default everywhere: the decoder layout for a causal LM (registered or not), `official` for an encoder."""
from __future__ import annotations

import warnings

import pytest
import torch

import papa
from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.core.vocabulary import DECODER_LAYOUT, REPRODUCTION_LAYOUT
from papa.method.architectures import is_causal
from papa.method.layout import encode
from papa.probing.features import encode_task
from papa.tasks.data import Example
from papa.tasks.registry import get_task

TEXTS = ["the cat sat on the mat", "a dog", "it was a very good film"]
N = 16


def _mistral():
    """A causal LM papa has not registered: attached through the AttentionInterface, with a warning."""
    from transformers import AutoModelForCausalLM, MistralConfig

    tok = tiny_tokenizer("llama")
    config = MistralConfig(vocab_size=max(len(tok), 64), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, intermediate_size=67, max_position_embeddings=128,
                           pad_token_id=tok.pad_token_id, architectures=["MistralForCausalLM"])  # as a hub config
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval(), tok


def _decoder(name: str):
    if name == "mistral":
        return _mistral()
    return tiny_model(name, lm_head=True), tiny_tokenizer(name)


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral"])
def test_a_decoder_gets_the_decoder_layout_from_extract_to_attach(name):
    model, tok = _decoder(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unregistered type's warning
        assert is_causal(model) and is_causal(model.config)
        constants = papa.extract_constants(model, tok, TEXTS, max_length=N, progress=False)  # no layout passed
    assert constants.metadata.layout == DECODER_LAYOUT
    # the encoding the probes see: the same default, left-aligned, from the model alone
    batch = encode(tok, TEXTS, max_length=N, model_type=model.config.model_type, causal=is_causal(model))
    mask = batch.inputs["attention_mask"]
    assert torch.equal(mask, (torch.arange(N)[None] < mask.sum(1, keepdim=True)).long())
    data = encode_task(tok, get_task("lm"), [Example(text=t) for t in TEXTS], max_length=N,
                       model_type=model.config.model_type, causal=is_causal(model))
    assert torch.equal(data.inputs["input_ids"], batch.inputs["input_ids"])
    ctrl = papa.attach(model)
    try:
        ctrl.set_constants(constants)
        ctrl.replace(None)
        with torch.no_grad():
            out = model(**batch.inputs).logits
        assert torch.isfinite(out).all()
    finally:
        ctrl.detach()


def test_an_encoder_gets_the_reproductions_layout():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    assert not is_causal(model) and not is_causal(model.config) and not is_causal("bert")
    constants = papa.extract_constants(model, tok, TEXTS, max_length=N, progress=False)
    assert constants.metadata.layout == REPRODUCTION_LAYOUT
    assert torch.equal(encode(tok, TEXTS, max_length=N, model_type="bert").inputs["input_ids"],
                       encode(tok, TEXTS, max_length=N, model_type="bert", layout=REPRODUCTION_LAYOUT)
                       .inputs["input_ids"])


def test_a_separator_layout_on_a_decoder_names_the_argument():
    model, tok = _decoder("llama")
    with pytest.raises(InputError) as caught:
        papa.extract_constants(model, tok, TEXTS, max_length=N, layout="sep_last", progress=False)
    message = str(caught.value)
    assert f"layout={DECODER_LAYOUT!r}" in message and "--layout" not in message
    assert f"--layout {DECODER_LAYOUT}" in caught.value.cli_message()


def test_a_decoder_whose_config_was_not_here_gets_a_decoders_defaults_once_loaded(tmp_path, data_dir, monkeypatch):
    """A hub id not yet cached resolves as an encoder before loading (nothing says otherwise without the network);
    once the model is loaded it says it is causal, and the grid runs with the decoder layout and probe inputs, as
    one whose config was here (papa.runs.session.load_resolved)."""
    from papa.runs.experiment import GridConfig, run_grid
    from papa.runs.profiles import PROFILES, Profile

    model, tok = _mistral()
    path = tmp_path / "tiny-mistral"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    monkeypatch.setitem(PROFILES, "causal-test", Profile("causal-test", train_limit=8, eval_limit=8, corpus_limit=8, rank_limit=8, rank_epochs=1,
                                                         epochs=1, seeds=(0,), fractions=("1",)))
    cfg = GridConfig(task="sst2", model=str(path), profile="causal-test", folder=str(tmp_path / "out"),
                     data_dir=str(data_dir))
    here = cfg.resolved()
    assert (here.layout, here.probe_inputs) == (DECODER_LAYOUT, "standardized")
    monkeypatch.setattr("papa.runs.session.is_causal_model", lambda name: None)  # as for a hub id not cached
    before = cfg.resolved()
    assert (before.layout, before.probe_inputs) == (REPRODUCTION_LAYOUT, "raw")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unregistered type's warning
        rows = run_grid(cfg, progress=False)
    assert set(rows["layout"]) == {DECODER_LAYOUT} and set(rows["probe_inputs"]) == {"standardized"}
