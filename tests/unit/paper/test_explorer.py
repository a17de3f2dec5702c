"""The widgets explorer's callbacks, driven without a browser on tiny models."""
from __future__ import annotations

import dataclasses
import struct

import pytest
import torch

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.architectures import model_signature
from papa.method.constants import ConstantMatrices, ConstantsMetadata
from papa.method.extract import extract_constants
from papa.method.rankings import HeadRanking
from papa.sections.explorer import GRID_SCOPES, Artifacts, HeadExplorer, HeadGrid, find_artifacts, head_thumbnails
from papa.tasks.corpus import Corpus

TEXTS = ["the cat sat on the mat", "a dog ran in london", "it was a very good movie", "the plot is bad"]


@pytest.fixture
def tiny():
    return tiny_model("bert", layers=2, heads=4, init_std=0.3), tiny_tokenizer("bert")


@pytest.fixture
def folder(tmp_path, tiny):
    """An artifacts folder as a reproduction leaves it: constants of one model in two lengths, a λ ranking, junk."""
    model, tok = tiny
    for n in (12, 16):
        constants = extract_constants(model, tok, Corpus("toy", TEXTS * 3), max_length=n, model_name="tiny-bert",
                                      layout="sep_last", progress=False)
        constants.save(tmp_path / "quick" / "constants" / f"c{n}.safetensors")
    lambdas = torch.tensor([[0.9, 0.2, 0.6, 0.4], [0.3, 0.8, 0.1, 0.7]])
    for draw, examples, lam in (("", 12, lambdas), ("-part1", 6, lambdas.flip(0))):  # the grid's, half the data
        HeadRanking.from_lambdas(lam, signature=model_signature(model, "tiny-bert"), task="toy", max_length=12,
                                 layout="sep_last", profile="quick", examples=examples, seed=0).save(
            tmp_path / "quick" / "rankings" / f"r{draw}.safetensors")
    (tmp_path / "quick" / "constants" / "not-constants.safetensors").write_bytes(b"garbage")  # skipped
    return tmp_path


@pytest.fixture
def explorer(folder, tiny):
    return HeadExplorer(folder, text="the cat sat on the mat", loader=lambda name: tiny)


def test_find_artifacts_lists_constants_and_rankings_by_model(folder):
    found = find_artifacts(folder)
    assert found.models == ["tiny-bert"]
    assert list(found.constants["tiny-bert"]) == ["toy · n=12 · sep_last (quick/constants)",
                                                  "toy · n=16 · sep_last (quick/constants)"]
    # each draw of a task under its own label: profile and draw (another part of the data, another seed)
    assert sorted(found.rankings["tiny-bert"]) == ["toy · quick part1 · n=12 · sep_last (quick/rankings)",
                                                   "toy · quick seed0 · n=12 · sep_last (quick/rankings)"]


def test_any_model_with_constants_shows_up(tmp_path, folder):
    """A model is listed from its constants' metadata alone: a causal LM's constants appear like an encoder's."""
    meta = ConstantsMetadata(kind="average", max_length=8, layout="sep_last", corpus="wiki",
                             model=dataclasses.replace(model_signature(tiny_model("llama"), "acme/tiny-llama"),
                                                       model_type="llama"))
    ConstantMatrices(torch.full((2, 4, 8, 8), 1 / 8), meta, counts=torch.ones(8, 8, dtype=torch.float64)).save(
        folder / "decoders" / "llama.safetensors")
    found = find_artifacts(folder)
    assert found.models == ["acme/tiny-llama", "tiny-bert"]
    assert list(found.constants["acme/tiny-llama"]) == ["wiki · n=8 · sep_last (decoders)"]


def test_initial_view(explorer):
    state = explorer.render()
    assert explorer.layer.options == (0, 1) and explorer.head.options == (0, 1, 2, 3)
    assert explorer.model_choice.value == "tiny-bert" and explorer.choice.value.startswith("toy · n=12")
    assert state["tokens"][0] == "[CLS]" and state["tokens"][-1] == "[SEP]" and len(state["tokens"]) == 8
    assert torch.allclose(state["constant"].sum(-1), torch.ones(8), atol=1e-5)  # renormalised as at use
    assert torch.allclose(state["live"].sum(-1), torch.ones(8), atol=1e-5)
    assert state["similarity"] == 1.0 and explorer.image.value[:4] == b"\x89PNG"


def test_the_head_view_is_drawn_at_the_width_it_is_shown(explorer):
    """Drawn wider than its 560 px box, the head view would be scaled down, its token labels about 6 px tall; drawn at
    the box's width it is shown unscaled."""
    explorer.render()
    width, height = struct.unpack(">II", explorer.image.value[16:24])  # the PNG's IHDR
    head_view = explorer.widget.children[-1].children[-1]
    assert "papa-head-view" in head_view._dom_classes
    assert f"{width}px" == head_view.layout.width and height < width


def test_grid_shows_every_head_of_the_model(explorer):
    state = explorer.render()
    grid = explorer.grid
    assert (grid.layers, grid.heads, grid.size) == (2, 4, 8)  # 8 slots: the sentence's, unpooled
    assert len(grid.pixels) == 2 * 4 * 8 * 8 * 4 and state["thumbnails"].shape == (2, 4, 8, 8, 4)
    # Each thumbnail is its own head's matrix, not one image repeated.
    assert len({state["thumbnails"][layer, head].numpy().tobytes() for layer in range(2) for head in range(4)}) == 8
    explorer.scope.value = GRID_SCOPES[1]  # the whole n x n matrix
    assert explorer.grid.size == 12


def test_clicking_a_thumbnail_picks_the_head(explorer):
    before = explorer.render()
    explorer.grid.selected = [1, 2]  # what a click in the browser sends
    assert (explorer.layer.value, explorer.head.value) == (1, 2)
    after = explorer.render()
    assert after["png"] != before["png"] and not torch.allclose(after["constant"], before["constant"])
    explorer.head.value = 3  # the menus move the grid's highlight
    assert explorer.grid.selected == [1, 3]


def test_lambda_of_the_head_when_a_ranking_exists(explorer):
    # the matching one learned on the most examples (the whole training set, as the paper learns λ), chosen
    assert explorer.ranking_choice.value == "toy · quick seed0 · n=12 · sep_last (quick/rankings)"
    explorer.grid.selected = [1, 2]
    state = explorer.render()
    assert state["lambda"] == pytest.approx(0.1)
    assert "λ 0.100" in explorer.stats.value and "replaced 1 of 8" in explorer.stats.value  # the smallest λ
    assert explorer.grid.captions[1 * 4 + 2] == "#1 λ 0.100"  # replaced first: its rank in the order, and λ
    assert sorted(int(c.split()[0][1:]) for c in explorer.grid.captions) == list(range(1, 9))  # every rank once
    explorer.ranking_choice.value = ""  # none: no λ, layer order for the slider
    assert explorer.render()["lambda"] is None and "no λ ranking" in explorer.stats.value
    assert explorer.grid.captions == [""] * 8


def test_changing_text_constants_and_replacement_changes_the_view(explorer):
    before = explorer.render()
    explorer.text.value = "a dog ran"
    state = explorer.render()
    assert len(state["tokens"]) == 5 and explorer.grid.size == 5 and state["tokens"] != before["tokens"]
    explorer.choice.value = "toy · n=16 · sep_last (quick/constants)"
    assert explorer.constants.max_length == 16
    explorer.text.value = "the cat sat on the mat"
    explorer.replaced.value = explorer.replaced.max
    replaced = explorer.render()
    assert replaced["similarity"] < 0.999
    assert "8 of 8 heads replaced" in explorer.stats.value


def test_picking_a_head_reuses_the_sentence(explorer, monkeypatch):
    """Another head redraws the head view only: the live attention and the grid are not recomputed."""
    explorer.render()
    calls = []
    monkeypatch.setattr("papa.sections.explorer.live_attention", lambda *a, **k: calls.append(1))
    monkeypatch.setattr("papa.sections.explorer.head_thumbnails", lambda *a, **k: calls.append(1))
    for layer, head in [(0, 1), (1, 3), (0, 0)]:
        explorer.grid.selected = [layer, head]
    assert calls == []


def test_head_thumbnails_crop_renormalise_and_pool():
    m = torch.rand(2, 3, 100, 100)
    full = head_thumbnails(m, size=40)
    assert full.shape == (2, 3, 40, 40, 4) and full.dtype == torch.uint8
    crop = head_thumbnails(m, slots=[0, 1, 2, 99], size=40)
    assert crop.shape == (2, 3, 4, 4, 4)
    # A head whose mass is on the diagonal shows a bright diagonal (viridis' top) on a dark field.
    eye = torch.eye(6).expand(1, 1, 6, 6)
    rgba = head_thumbnails(eye)[0, 0]
    assert (rgba.diagonal(dim1=0, dim2=1)[:3] == rgba[0, 0, :3].unsqueeze(-1)).all() and (rgba[0, 0] != rgba[0, 1]).any()


def test_grid_widget_sends_rgba_bytes():
    grid = HeadGrid()
    grid.show(torch.zeros(3, 2, 5, 5, 4, dtype=torch.uint8))
    assert (grid.layers, grid.heads, grid.size, len(grid.pixels)) == (3, 2, 5, 3 * 2 * 5 * 5 * 4)
    assert grid._esm and "papa-head" in str(grid._esm)


def test_explorer_needs_constants(tmp_path):
    with pytest.raises(InputError, match="no average constants"):
        HeadExplorer(tmp_path)
    with pytest.raises(InputError, match="no average constants"):
        HeadExplorer(Artifacts(constants={}))


def test_it_opens_on_the_given_model_and_its_tasks_largest_constants(tmp_path, tiny):
    """A clone holds the quick run's constants beside the cpu run's and a decoder's: the explorer opens on the model
    asked for, on the task's constants averaged over the most sentences, wherever they sort."""
    model, tok = tiny
    for folder, corpus, sentences in (("a_quick", "sst2:train[:8]", 8), ("b_cpu", "sst2:train[random:12]", 12),
                                      ("c_cpu", "mlm:train[random:24]", 24)):
        constants = extract_constants(model, tok, Corpus(corpus, (TEXTS * 6)[:sentences]), max_length=12,
                                      model_name="tiny-bert", layout="sep_last", progress=False)
        constants.save(tmp_path / folder / "constants" / "c.safetensors")
    meta = ConstantsMetadata(kind="average", max_length=8, layout="sep_last", corpus="lm",
                             model=dataclasses.replace(model_signature(tiny_model("llama"), "acme/tiny-llama"),
                                                       model_type="llama"))
    ConstantMatrices(torch.full((2, 4, 8, 8), 1 / 8), meta, counts=torch.ones(8, 8, dtype=torch.float64)).save(
        tmp_path / "a_decoder" / "llama.safetensors")
    assert find_artifacts(tmp_path).models[0] == "acme/tiny-llama"  # what it opened on before
    explorer = HeadExplorer(tmp_path, loader=lambda name: tiny, model="tiny-bert", task="sst2")
    assert explorer.model_choice.value == "tiny-bert" and explorer.choice.value.endswith("(b_cpu/constants)")
    assert explorer.constants.metadata.num_examples == 12
    anywhere = HeadExplorer(tmp_path, loader=lambda name: tiny, model="tiny-bert")  # no task: the most sentences
    assert anywhere.choice.value.endswith("(c_cpu/constants)")


def test_the_head_view_sits_beside_the_grid_and_a_picture_stands_in_for_the_widgets(explorer):
    import base64

    view = [w for w in explorer.widget.children if explorer.grid in getattr(w, "children", ())]
    assert len(view) == 1 and explorer.image in view[0].children[1].children  # the grid's row holds the head view
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"])[:4] == b"\x89PNG"
    assert bundle["text/plain"].startswith("head explorer: tiny-bert")


def test_captions_carry_the_decimals_that_tell_lambdas_apart():
    """Captions tell the decoder's 270 λ within 0.012 of 0.5 apart (at three decimals they read "λ 0.506" over and
    over)."""
    from papa.sections.explorer import lambda_digits

    assert lambda_digits(torch.linspace(0.05, 0.95, 72)) == 3  # an encoder's spread
    narrow = torch.linspace(0.494, 0.506, 270)
    digits = lambda_digits(narrow)
    assert digits == 5 and len({f"{v:.{digits}f}" for v in narrow.tolist()}) > 200
    assert lambda_digits(torch.full((4,), 0.5)) == 3
