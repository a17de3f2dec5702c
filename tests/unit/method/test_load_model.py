"""`papa.load_model`: float32 by default whatever the checkpoint stores, another dtype on request, and quiet: no
"Loading weights" bar and no load report about a pooler papa never uses, but a warning for weights that start random."""
from __future__ import annotations

import logging
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, BertModel

import papa
from conftest import tiny_model, tiny_tokenizer


@pytest.fixture(scope="module")
def float16_dir(tmp_path_factory):
    """A tiny BERT checkpoint stored in float16 and without a pooler, as sentence-embedding checkpoints are."""
    path = tmp_path_factory.mktemp("fp16") / "tiny-bert-fp16"
    full = tiny_model("bert")
    bare = BertModel(full.config, add_pooling_layer=False)
    bare.load_state_dict({k: v for k, v in full.state_dict().items() if not k.startswith("pooler.")})
    bare.half().save_pretrained(path)
    tiny_tokenizer("bert").save_pretrained(path)
    assert load_file(str(path / "model.safetensors"))["embeddings.word_embeddings.weight"].dtype == torch.float16
    return path


def _dtype(model) -> torch.dtype:
    return next(model.parameters()).dtype


def test_float32_by_default_and_dtype_on_request(float16_dir):
    assert _dtype(papa.load_model(str(float16_dir))[0]) == torch.float32
    assert _dtype(papa.load_model(str(float16_dir), dtype="bfloat16")[0]) == torch.bfloat16
    assert _dtype(papa.load_model(str(float16_dir), dtype=torch.float16)[0]) == torch.float16
    assert _dtype(papa.load_model(str(float16_dir), dtype=None)[0]) == torch.float16  # the checkpoint's own
    with pytest.raises(ValueError, match="unknown dtype 'float64': use one of float32, bfloat16, float16"):
        papa.load_model(str(float16_dir), dtype="float64")


def test_loading_prints_no_bar_and_no_report_about_the_pooler(float16_dir, capfd, caplog):
    caplog.set_level(logging.WARNING, logger="transformers")
    # transformers alone shows both (so this test can tell) ...
    AutoModel.from_pretrained(str(float16_dir))
    assert "Loading weights" in capfd.readouterr().err and "LOAD REPORT" in caplog.text
    caplog.clear()
    # ... papa shows neither, and warns of nothing: the missing pooler is never run.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        papa.load_model(str(float16_dir))
    assert "Loading weights" not in capfd.readouterr().err and "LOAD REPORT" not in caplog.text
    # Bars elsewhere are untouched: the hook is removed after loading.
    from transformers.utils import logging as hf_logging

    assert getattr(hf_logging, "_tqdm_hook", None) is None


def test_weights_missing_from_the_checkpoint_are_a_warning(float16_dir, tmp_path):
    broken = tmp_path / "broken"
    for f in float16_dir.iterdir():
        (broken / f.name).parent.mkdir(exist_ok=True)
        (broken / f.name).write_bytes(f.read_bytes())
    weights = load_file(str(broken / "model.safetensors"))
    del weights["encoder.layer.0.attention.self.query.weight"]
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.warns(UserWarning, match=r"1 weight\(s\) are not in its checkpoint and start random "
                                         r"\(encoder\.layer\.0\.attention\.self\.query\.weight\)"):
        papa.load_model(str(broken))


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "smollm2"])
def test_a_packaged_model_says_what_its_config_says(name):
    """`is_causal_model` answers for an installed packaged model without parsing its config; the answer is the
    config's."""
    from papa.method.architectures import is_causal
    from papa.method.models import PACKAGED_MODELS, is_causal_model, local_config

    config = local_config(name)
    if config is None:
        pytest.skip(f"{name} is not installed")
    assert PACKAGED_MODELS[name].causal == is_causal(config) == is_causal_model(name)
