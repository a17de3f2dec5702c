"""The core invariants on the real all-MiniLM-L6-v2 and real SST-2 sentences, compared with Hugging Face outputs."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

import papa
from papa.method.constants import data_free_constants
from papa.method.layout import encode
from papa.method.models import resolve_model_path
from papa.tasks.corpus import task_corpus

pytestmark = pytest.mark.integration
N = 64


@pytest.fixture(scope="module")
def sentences(data_dir):
    return task_corpus("sst2", "eval", data_dir=data_dir, limit=24).texts


@pytest.fixture
def model(minilm_model):
    return minilm_model


def _inputs(tok, texts):
    return encode(tok, texts, max_length=N, model_type="bert").inputs


def _hidden(model, inputs):
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def test_default_model_is_the_offline_minilm(minilm):
    model, tok = minilm
    assert model.config.model_type == "bert" and model.config.num_hidden_layers == 6
    assert model.config.num_attention_heads == 12 and model.config._name_or_path.endswith("all-MiniLM-L6-v2")
    assert len(tok) == 30522


def test_nothing_replaced_is_identical(model, minilm, sentences):
    tok = minilm[1]
    inputs = _inputs(tok, sentences)
    before = _hidden(model, inputs)
    ctrl = papa.attach(model)
    ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, N))
    assert torch.equal(_hidden(model, inputs), before)


def test_capture_equals_hugging_face_attentions(model, minilm, sentences):
    tok = minilm[1]
    eager = AutoModel.from_pretrained(resolve_model_path(papa.DEFAULT_MODEL), attn_implementation="eager").eval()
    sums, counts = torch.zeros(6, 12, N, N, dtype=torch.float64), torch.zeros(N, N, dtype=torch.float64)
    ctrl = papa.attach(model)
    with ctrl.capturing(N) as stats:
        for start in (0, 12):
            inputs = _inputs(tok, sentences[start:start + 12])
            _hidden(model, inputs)
            with torch.no_grad():
                attentions = eager(**inputs, output_attentions=True).attentions
            v = inputs["attention_mask"].double()
            pair = v[:, :, None] * v[:, None, :]
            counts += pair.sum(0)
            for layer, a in enumerate(attentions):
                sums[layer] += (a.double() * pair[:, None]).sum(0)
    expected = torch.where(counts > 0, sums / counts.clamp_min(1), 0.0).float()
    assert torch.equal(stats.counts, counts)
    assert torch.allclose(stats.averages(), expected, atol=1e-6)


def test_self_constants_reproduce_outputs(model, minilm, sentences):
    tok = minilm[1]
    inputs = _inputs(tok, sentences[:1])
    before = _hidden(model, inputs)
    ctrl = papa.attach(model)
    with ctrl.capturing(N) as stats:
        _hidden(model, inputs)
    ctrl.set_constants(stats.to_constants(ctrl.signature, layout="sep_last"))
    ctrl.replace()
    real = inputs["attention_mask"].bool()
    assert torch.allclose(_hidden(model, inputs)[real], before[real], atol=1e-4)


def test_average_constants_keep_more_than_data_free_ones(model, minilm, data_dir):
    """Paper 5.2 in miniature: with all 72 heads replaced, average constants keep the sentence representation
    closer to the original than identity or zeros (mean-pooled cosine similarity on held-out sentences)."""
    tok = minilm[1]
    train = task_corpus("sst2", "train", data_dir=data_dir, limit=256).texts
    average = papa.extract_constants(model, tok, train, max_length=N, progress=False)
    inputs = _inputs(tok, task_corpus("sst2", "eval", data_dir=data_dir, limit=64).texts)
    mask = inputs["attention_mask"].unsqueeze(-1).float()
    pooled = lambda h: (h * mask).sum(1) / mask.sum(1)  # noqa: E731
    original = pooled(_hidden(model, inputs))
    ctrl = papa.attach(model)
    similarity = {}
    for name, constants in [("average", average), *[(k, data_free_constants(k, ctrl.signature, N))
                                                     for k in ("identity", "toeplitz", "zeros")]]:
        ctrl.set_constants(constants)
        ctrl.replace()
        similarity[name] = torch.cosine_similarity(pooled(_hidden(model, inputs)), original).mean().item()
    assert similarity["average"] > similarity["identity"] + 0.1, similarity
    assert similarity["average"] > similarity["zeros"], similarity
    assert similarity["average"] > similarity["toeplitz"], similarity
