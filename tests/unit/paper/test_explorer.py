"""The widgets explorer's callbacks, driven without a browser on a tiny model."""
from __future__ import annotations

import pytest
import torch

from papa.core.errors import InputError
from papa.method.extract import extract_constants
from papa.paper.explorer import HeadExplorer, constants_files
from conftest import tiny_model, tiny_tokenizer

TEXTS = ["the cat sat on the mat", "a dog ran in london", "it was a very good movie", "the plot is bad"]


@pytest.fixture
def explorer(tmp_path):
    model, tok = tiny_model("bert", layers=2, heads=4, init_std=0.3), tiny_tokenizer("bert")
    constants = extract_constants(model, tok, TEXTS * 3, max_length=12, corpus="toy", model_name="tiny-bert",
                                  progress=False)
    constants.save(tmp_path / "c.safetensors")
    (tmp_path / "not-constants.safetensors").write_bytes(b"garbage")  # skipped when listing
    files = constants_files(tmp_path)
    assert list(files) == ["tiny-bert · toy · n=12"]
    return HeadExplorer(files, text="the cat sat on the mat", loader=lambda name: (model, tok))


def test_initial_view(explorer):
    state = explorer.render()
    assert explorer.layer.options == (0, 1) and explorer.head.options == (0, 1, 2, 3)
    assert state["tokens"][0] == "[CLS]" and state["tokens"][-1] == "[SEP]" and len(state["tokens"]) == 8
    assert torch.allclose(state["constant"].sum(-1), torch.ones(8), atol=1e-5)  # renormalised as at use
    assert torch.allclose(state["live"].sum(-1), torch.ones(8), atol=1e-5)
    assert state["similarity"] == 1.0 and explorer.image.value[:4] == b"\x89PNG"


def test_changing_head_text_and_replacement_changes_the_view(explorer):
    before = explorer.render()
    explorer.head.value = 2  # the observer re-renders
    after_head = explorer.render()
    assert after_head["png"] != before["png"]
    assert not torch.allclose(after_head["constant"], before["constant"])
    explorer.text.value = "a dog ran"
    assert len(explorer.render()["tokens"]) == 5
    explorer.replaced.value = explorer.replaced.max
    replaced = explorer.render()
    assert replaced["similarity"] < 0.999
    assert "8 of 8 heads replaced" in explorer.stats.value


def test_explorer_needs_constants():
    with pytest.raises(InputError, match="no average constants"):
        HeadExplorer({})
